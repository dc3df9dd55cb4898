"""GGUF files in (rvvkit/llm/gguf/): `rvvkit build model.gguf --max-seq N` on the stored files
tests/llm/export_gguf.py wrote with the `gguf` package and llama.cpp's llama-quantize, checked
against llama.cpp's own generation on the same files (tests/llm/gguf_reference.cpp, stored in
<name>.json beside each):
- exactly, on a float32 copy of each file (llama.cpp then computes in float32 alone): the same
  64 greedy tokens on every executor, logits within 1e-4;
- on the file itself, where llama.cpp quantizes activations (Q8_0/Q8_K) or rounds them to 16
  bits and rvvkit quantizes them its own way (or not, for Q4_K): logits within the noise
  that rounding makes, and the same tokens up to the first near-tie;
- the block formats dequantize value for value as ggml's (the gguf package's decoders);
- the tokenizer inside the file encodes text as llama.cpp does, and the artifact carries it:
  `generate --prompt TEXT` and `--chat` need no --tokenizer."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rvvkit
from rvvkit.llm.generate import generate

gguf = pytest.importorskip("gguf", reason="the gguf package (rvvkit[llm]) reads GGUF files")

STORED = Path(__file__).resolve().parents[1] / "models" / "llm" / "gguf"
NAMES = sorted(p.stem for p in STORED.glob("*.gguf"))
BOUND = 96
# llama.cpp's int8 activations against rvvkit's: the logits move by up to this much of their
# largest value on these random models, teacher-forced (measured: F16 0.1 %, BF16 1.2 %, Q8_0
# 2.3 %, Q5_0 2.2 %, Q4_0 2.8 %, Q5_1 4.7 %, Q4_K_M 8.2 %, where llama.cpp quantizes
# activations in blocks of 256; rvvkit's own int8 and float activations differ by 5.1 % there)
NOISE = 0.1


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "rvvkit", *map(str, args)],
                          capture_output=True, text=True, timeout=600, **kw)


def _reference(name: str) -> dict:
    return json.loads((STORED / f"{name}.json").read_text())


@pytest.fixture(scope="module", params=NAMES)
def built(request, tmp_path_factory):
    """(name, reference, the artifact `rvvkit build` made of the stored file)."""
    name = request.param
    out = tmp_path_factory.mktemp(name) / "model.rvv"
    res = _cli("build", STORED / f"{name}.gguf", "--max-seq", BOUND, "-o", out)
    assert res.returncode == 0, res.stderr
    assert "(from the GGUF metadata)" in res.stderr and "tokenizer from the GGUF" in res.stderr
    return name, _reference(name), out


@pytest.fixture(scope="module", params=NAMES)
def exact(request, tmp_path_factory):
    """(name, llama.cpp's float32 reference, the artifact of the file's float32 copy)."""
    from gguf_support import as_f32
    name = request.param
    copy = tmp_path_factory.mktemp(name) / f"{name}.f32.gguf"
    as_f32(STORED / f"{name}.gguf", copy)
    return name, _reference(name)["f32"], rvvkit.build(str(copy), max_seq=BOUND)


def test_the_files_cover_the_formats_users_hold():
    from rvvkit.llm.gguf.reader import GgufFile
    kinds = set()
    for name in NAMES:
        kinds |= set(GgufFile(STORED / f"{name}.gguf").tensor_types().values())
    assert {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "F16", "BF16", "F32"} <= kinds, kinds


def test_float32_copy_generates_llama_cpps_tokens(exact, op_executor):
    if op_executor.on == "cuda":
        pytest.skip("checked on the host, the QEMU samples and the CUDA emulator")
    name, ref, art = exact
    with rvvkit.load(art, on=op_executor.on, **op_executor.options) as sess:
        got = sess.generate(_reference(name)["prompt"], len(ref["tokens"]), eos=[])
    assert got.tokens == ref["tokens"], name


def test_float32_copy_logits_are_llama_cpps(exact):
    name, ref, art = exact
    with rvvkit.load(art, on="host") as sess:
        got = generate(sess, _reference(name)["prompt"], len(ref["logits"]), eos=[],
                       keep_logits=True)
    err = np.abs(np.array(got.logits) - np.array(ref["logits"])).max()
    assert err < 1e-4, (name, err)


def test_quantized_file_follows_llama_cpp(built):
    """Teacher-forced on llama.cpp's own tokens (so that a near-tie cannot send the two down
    different paths), every stored step's logits are within NOISE of llama.cpp's, and the
    token each picks is llama.cpp's except where llama.cpp's two best were within that noise
    of each other; the free-running tokens agree up to such a near-tie."""
    name, ref, art = built
    want = np.array(ref["logits"])
    scale = np.abs(want).max()
    with rvvkit.load(str(art), on="host") as sess:
        for step, row in enumerate(want):
            got = generate(sess, ref["prompt"] + ref["tokens"][:step], 1, eos=[],
                           keep_logits=True).logits[0]
            assert np.abs(got - row).max() < NOISE * scale, (name, step)
            top2 = np.sort(row)[-2:]
            assert int(np.argmax(got)) == ref["tokens"][step] or \
                top2[1] - top2[0] < 2 * NOISE * scale, (name, step)
        free = sess.generate(ref["prompt"], len(ref["tokens"]), eos=[]).tokens
    agree = next((i for i, (a, b) in enumerate(zip(free, ref["tokens"])) if a != b), len(free))
    assert agree >= 2, (name, agree)


def test_quantized_file_gives_the_same_tokens_on_every_executor(built, op_executor):
    if op_executor.on in ("host", "cuda"):
        pytest.skip("the host is the reference here; the GPU is not in this sample")
    name, ref, art = built
    with rvvkit.load(str(art), on="host") as sess:
        want = sess.generate(ref["prompt"], 32, eos=[]).tokens
    with rvvkit.load(str(art), on=op_executor.on, **op_executor.options) as sess:
        assert sess.generate(ref["prompt"], 32, eos=[]).tokens == want, name


@pytest.mark.parametrize("kind", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K"])
def test_block_formats_dequantize_as_ggml(kind):
    from rvvkit.llm.gguf import weights
    size, count = weights.BLOCKS[kind]
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, (3, 4, size), dtype=np.uint8)
    halves = {"Q4_0": (0,), "Q8_0": (0,), "Q5_0": (0,), "Q4_1": (0, 2), "Q5_1": (0, 2),
              "Q4_K": (0, 2), "Q6_K": (208,)}[kind]
    for at in halves:   # sane float16 scales (random bytes may be inf or NaN)
        raw[..., at:at + 2] = rng.uniform(0.01, 0.1, (3, 4)).astype(np.float16).view(
            np.uint8).reshape(3, 4, 2)
    if kind == "Q4_K":   # one block whose scale is 0 and whose offset is not
        raw[0, 0, 4] = (raw[0, 0, 4] & 0xC0)
        raw[0, 0, 8] |= 1
    flat = raw.reshape(3, -1)
    want = gguf.quants.dequantize(flat, gguf.GGMLQuantizationType[kind])
    got = weights.blocked(kind, (3, 4 * count), flat).dequantized()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("name", ["qwen2_q4_0", "llama_bf16"])
def test_the_files_tokenizer_encodes_as_llama_cpp(name):
    tokenizers = pytest.importorskip("tokenizers", reason="rvvkit[llm]")
    from rvvkit.llm.gguf.reader import GgufFile
    from rvvkit.llm.gguf.tokenizer import tokenizer_json
    tok = tokenizers.Tokenizer.from_str(tokenizer_json(GgufFile(STORED / f"{name}.gguf")))
    ref = _reference(name)
    ids = tok.encode(ref["text"], add_special_tokens=False).ids
    assert ids == ref["text_ids"]
    assert tok.decode(ids) == ref["text"]


def test_generate_takes_text_with_the_artifacts_own_tokenizer(tmp_path):
    pytest.importorskip("tokenizers", reason="rvvkit[llm]")
    art = tmp_path / "m.rvv"
    assert _cli("build", STORED / "qwen2_q8_0.gguf", "--max-seq", 64, "-o", art,
                "-q").returncode == 0
    ref = _reference("qwen2_q8_0")
    res = _cli("generate", art, "--prompt", ref["text"], "--max-new-tokens", 6)
    assert res.returncode == 0, res.stderr
    assert f"prompt {len(ref['text_ids'])} tokens" in res.stderr
    pytest.importorskip("jinja2", reason="rvvkit[llm]")
    res = _cli("generate", art, "--chat", "--max-new-tokens", 4, input="hello\n\n")
    assert res.returncode == 0, res.stderr
    # the ChatML template the file carries: 5 tokens of markup around "hello" and the role
    assert "prompt " in res.stderr


@pytest.mark.parametrize("content,says", [
    (b"hello", "is not a GGUF file"),
    (b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 4, "cannot read GGUF file"),
])
def test_a_bad_file_is_one_line(tmp_path, content, says):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    res = _cli("build", bad, "--max-seq", 32, "-o", tmp_path / "x.rvv")
    assert res.returncode != 0 and res.stderr.count("\n") == 1 and says in res.stderr, \
        res.stderr
    assert not (tmp_path / "x.rvv").exists()


def test_a_truncated_file_is_one_line(tmp_path):
    data = (STORED / "qwen2_q4_0.gguf").read_bytes()
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(data[:len(data) * 3 // 4])
    res = _cli("build", bad, "--max-seq", 32, "-o", tmp_path / "x.rvv")
    assert res.returncode != 0 and res.stderr.count("\n") == 1, res.stderr
    assert "truncated" in res.stderr


def test_unsupported_tensor_types_are_all_named(tmp_path):
    from export_gguf import CONFIGS, write
    path = tmp_path / "mxfp4.gguf"
    write(path, CONFIGS["qwen2"], lambda n: "MXFP4")
    res = _cli("build", path, "--max-seq", 32, "-o", tmp_path / "x.rvv")
    assert res.returncode != 0 and res.stderr.count("\n") == 1, res.stderr
    assert "tensors of unsupported types" in res.stderr and "blk.0.attn_q.weight (MXFP4)" in \
        res.stderr


def test_per_layer_sizes_are_one_line(tmp_path, monkeypatch):
    """A head count given per layer (an array, as some architectures write it) is refused in
    one line naming the key, not a traceback."""
    from export_gguf import CONFIGS, write
    plain = gguf.GGUFWriter.add_head_count
    monkeypatch.setattr(gguf.GGUFWriter, "add_head_count",
                        lambda self, n: plain(self, [n] * CONFIGS["qwen2"]["layers"]))
    path = tmp_path / "per_layer.gguf"
    write(path, CONFIGS["qwen2"], lambda n: "Q8_0")
    res = _cli("build", path, "--max-seq", 32, "-o", tmp_path / "x.rvv")
    assert res.returncode != 0 and res.stderr.count("\n") == 1, res.stderr
    assert "qwen2.attention.head_count" in res.stderr and "per-layer" in res.stderr
