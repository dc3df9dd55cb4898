"""A decoder's generated C reads as a person would write it: what `rvvkit inspect --source`
shows an embedded engineer has no loop that runs once or never, no arithmetic that cancels
(`+ 1 - 1`), no bound checked twice, and braces and indentation that agree, in the decoding
step and the prefill plan alike, for every decoder form rvvkit builds (onnxruntime-genai's
GroupQueryAttention at float32, 4 and 8 bits, with an attention mask, float16; ONNX opset
23's Attention with in-place cache writes; a transformers export)."""
import re
from dataclasses import replace
from pathlib import Path

import pytest

import rvvkit
from rvvkit.zoo import llm as zoo_llm, llm_onnx as zoo_llm_onnx
from test_codegen_clean import SINGLE_TRIP

STORED = Path(__file__).resolve().parents[1] / "models" / "llm"

# `for (long d = 16; d < 16; ++d)`: bounds that are equal, so the body never runs
ZERO_TRIP = re.compile(r"for \((?:long long|long|int) (\w+) = (\w+); \1 < \2;")
# `(long)seqlens[b] + 1 - 1`: a constant added and taken away again
CANCELLING = re.compile(r"[+-] (\d+) [-+] \1(?![\w.])")
# `past + 1 > 64 || past + 1 > 128`: one value against two bounds, where the smaller says all
TWICE = re.compile(r"\b(\w+(?: \+ \d+)?) > \d+ \|\| \1 > \d+")


def misnested(src: str):
    """Lines not indented four spaces per open brace: continuation lines (the previous line
    ends inside an expression), preprocessor lines, comments and the unbraced bodies of
    if/for/else (one step deeper per level) aside; `case` labels may sit at their switch's
    level, and `extern "C" {` opens none."""
    bad, depth, prev, extra, in_comment = [], 0, ";", 0, False
    for num, ln in enumerate(src.splitlines(), 1):
        s = ln.strip()
        if in_comment:
            in_comment = "*/" not in s
            continue
        if not s or s.startswith("#"):
            continue
        in_comment = s.startswith("/*") and "*/" not in s
        code = re.sub(r"/\*.*?\*/|//.*$", "", re.sub(r'"(\\.|[^"\\])*"', '""', ln)).rstrip()
        if not code.strip():
            continue
        if depth == 0 and s == "}":          # the end of extern "C"
            prev = code
            continue
        want = 4 * (depth - (len(s) - len(s.lstrip("}"))))
        got = len(ln) - len(ln.lstrip(" "))
        continued = re.search(r"[,(+?:|&=*/-]$", prev) or \
            not re.search(r"[;{}]$|\)$|\belse$|^\s*(case .*|default):$", prev)
        unbraced = re.search(r"^\s*(if|for|while)\b.*\)$|\belse$", prev)
        extra = extra + 4 if unbraced else 0
        label = re.match(r"(case\b.*|default):", s)
        if got != want and not continued and not (unbraced and got == want + extra) \
                and not (label and got == want - 4):
            bad.append(f"{num}: {ln}")
        depth = max(0, depth + code.count("{") - code.count("}") - ('extern "C"' in ln))
        prev = code
    return bad


def _genai(**kw):
    cfg = replace(zoo_llm.DecoderConfig(hidden=80, heads=5, kv_heads=1, layers=1,
                                        intermediate=72), **kw)
    return zoo_llm.decoder(cfg)


DECODERS = {
    "genai_f32": lambda: _genai(),
    "genai_int4_zp": lambda: _genai(bits=4, block=64, zero_points=True),
    "genai_int8_acc4": lambda: _genai(bits=8, block=16, accuracy=4, bf16_scales=True),
    "genai_int4_mask": lambda: _genai(bits=4, block=16, mask=True, kv_heads=5),
    "genai_half": lambda: _genai(bits=4, block=16, half=True),
    "onnx_attention": lambda: zoo_llm_onnx.decoder(zoo_llm.DecoderConfig(
        hidden=48, heads=3, kv_heads=1, layers=1, intermediate=40)),
    "transformers_qwen2": lambda: str(STORED / "qwen2_tf.onnx"),
}


@pytest.fixture(scope="module")
def decoder_sources():
    out = {}
    for name, make in DECODERS.items():
        art = rvvkit.build(make(), max_seq=24, cuda=False)
        assert art.meta["prefill"]["tokens"] > 1, name     # both plans are in the source
        out[name] = art.c_source
    return out


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decoder_source_is_tidy(decoder_sources, name):
    src = decoder_sources[name]
    for what, pattern in (("single-trip loop", SINGLE_TRIP), ("zero-trip loop", ZERO_TRIP),
                          ("cancelling constants", CANCELLING), ("a bound checked twice", TWICE)):
        found = sorted({m.group(0) for m in pattern.finditer(src)})
        assert not found, f"{name}: {what}: {found[:5]}"
    bad = misnested(src)
    assert not bad, f"{name}: indentation disagrees with the braces:\n" + "\n".join(bad[:8])


def test_the_checks_catch_what_decoders_used_to_show():
    """Each check flags the text the decoder kernels generated before they were tidied."""
    assert SINGLE_TRIP.search("    for (long b = 0; b < 1; ++b) {")
    assert ZERO_TRIP.search("for (long d = 16; d < 16; ++d) kr[d] = ks[d];")
    assert ZERO_TRIP.search("for (long long d = 32; d < 32; ++d) y[o + d] = x[o + d];")
    assert not ZERO_TRIP.search("for (long d = 16; d < 32; ++d) kr[d] = ks[d];")
    assert CANCELLING.search("const long past = (long)seqlens[b] + 1 - 1;")
    assert not CANCELLING.search("const long past = (long)seqlens[b] + 1 - 16;")
    assert TWICE.search("if (past < 0 || past + 1 > 64 || past + 1 > 128) RVK_DATA_ERROR;")
    gqa_block = """void f(void) {
    for (long h = 0; h < 2; ++h) {
        {
        const float *__restrict cr = cosc + pos * 8;
        for (long j = 0; j < 8; ++j) kr[j] = cr[j];
    }
        vr[0] = 0.0f;
    }
}"""
    assert len(misnested(gqa_block)) == 3
    unindented_part = """void g(void) {
    for (long part = rvk_lo; part < rvk_hi; ++part) {
    const long j0 = part * 64;
    }
}"""
    assert misnested(unindented_part) == ["3:     const long j0 = part * 64;"]
    tidy = """#ifdef __cplusplus
extern "C" {
#endif
int f(int x) {
    switch (x) {
    case 0: return 1;
    default: break;
    }
    if (x > 1)
        for (int i = 0; i < x; ++i)
            x += g(i,
                   i);
    return x;
}
#ifdef __cplusplus
}
#endif"""
    assert misnested(tidy) == []
