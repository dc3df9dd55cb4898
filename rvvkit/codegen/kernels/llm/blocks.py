"""Kernels of decoder blocks (semantics: rvvkit/ops/llm/blocks.py): RMS normalisation with an
optional skip/bias sum, and GroupQueryAttention over a key/value cache read only up to its
live length, which comes from run-time data (seqlens_k) and is checked against the bound.
MatMulNBits is in nbits_f32.py and nbits_int8.py,
GatherBlockQuantized in gather_bq.py."""
from __future__ import annotations

from ... import rvv
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop
from ...parallel import split_of
from . import gqa_host, gqa_rvv

declare_spec("rmsnorm", ("rows", "cols", "eps", "skip", "bias", "sum_out"))
declare_spec("gqa", ("batch", "seq", "heads", "kv_heads", "head", "max_seq", "rotary",
                     "rot_half", "interleaved", "scale", "in_place", "cos_rows"))
declare_spec("cache_write", ("batch", "heads", "max_seq", "head", "seq"))


def rmsnorm(rows: int, cols: int, eps: float, skip: bool, bias: bool, sum_out: bool
            ) -> Lowered:
    """Params: x, [skip], gamma, [bias], y, [sum]: y = rms_norm(x + skip + bias) * gamma."""
    spec = make_spec("rmsnorm", rows=rows, cols=cols, eps=eps, skip=skip, bias=bias,
                     sum_out=sum_out)
    terms = "x[o + c]" + (" + sk[o + c]" if skip else "") + (" + bias[c]" if bias else "")
    keep = "            s[o + c] = v;\n" if sum_out else ""
    src = "s" if sum_out else "x"
    if skip and not sum_out:   # the sum is needed twice: recompute it rather than store it
        again = terms
    else:
        again = f"{src}[o + c]"
    body = f"""    for (long r = rvk_lo; r < rvk_hi; ++r) {{
        const long o = r * {cols};
        double ss = 0.0;
        for (long c = 0; c < {cols}; ++c) {{
            const float v = {terms};
{keep}            ss += (double)v * v;
        }}
        const float inv = (float)(1.0 / sqrt(ss / {cols} + {eps!r}));
        for (long c = 0; c < {cols}; ++c) y[o + c] = ({again}) * inv * gamma[c];
    }}
"""
    params = [Param("x")] + ([Param("sk")] if skip else []) + [Param("gamma")] + \
        ([Param("bias")] if bias else []) + [Param("y", False)] + \
        ([Param("s", False)] if sum_out else [])
    split = split_of(rows, rows * cols * 4)
    if split is None:
        body = "    const long rvk_lo = 0, rvk_hi = 1;\n" + body
    return Lowered(Kernel("rmsnorm", tuple(params), body, spec=spec, split=split))


def _rotate(dst: str, src: str, rot_half: int, head: int, interleaved: bool) -> str:
    """C: `dst` = `src` rotated at position `pos` (a block: cr and sr are its own)."""
    i1, i2 = ("2 * j", "2 * j + 1") if interleaved else ("j", f"j + {rot_half}")
    rest = f"\n    for (long d = {2 * rot_half}; d < {head}; ++d) {dst}[d] = {src}[d];" \
        if 2 * rot_half < head else ""   # the dimensions past the rotated ones, unchanged
    return f"""{{
    const float *__restrict cr = cosc + pos * {rot_half};
    const float *__restrict sr = sinc + pos * {rot_half};
    for (long j = 0; j < {rot_half}; ++j) {{
        const float x1 = {src}[{i1}], x2 = {src}[{i2}];
        {dst}[{i1}] = fmaf(cr[j], x1, -(sr[j] * x2));   /* fused as written: the same */
        {dst}[{i2}] = fmaf(sr[j], x1, cr[j] * x2);      /* bits from every compiler */
    }}{rest}
}}"""


def _attend(heads: int, group: int, head: int, max_seq: int, row: str, rotate,
            scale: float) -> str:
    """C: every query head of token `row` at position `pos` against the `live` cached keys:
    softmax(q . k * scale) . v into out, in one order on every executor (gqa_host.py).
    `rotate(dst, src)`: C putting a query row (rotated) into the workspace."""
    return rvv.guarded(gqa_rvv.attend(heads, group, head, max_seq, row, rotate, scale),
                       gqa_host.attend(heads, group, head, max_seq, row, rotate, scale))


def _store(kv_heads: int, head: int, max_seq: int, row: str, put_k: str) -> str:
    """C: token `row`'s keys (rotated) and values into the caches at position `pos`."""
    per_head = f"""const float *__restrict ks = k + {row} * {kv_heads * head} + h * {head};
const float *__restrict vs = v + {row} * {kv_heads * head} + h * {head};
float *__restrict kr = kd + (h * {max_seq} + pos) * {head};
float *__restrict vr = vd + (h * {max_seq} + pos) * {head};
{put_k}
for (long d = 0; d < {head}; ++d) vr[d] = vs[d];"""
    return loop("h", 0, kv_heads, per_head, "long")


def _caches(in_place: bool, kv_heads: int, max_seq: int, head: int) -> str:
    """C: kd and vd, where batch row b's caches are written: the session's caches in place, or
    the presents, the past's live prefix copied into them first."""
    cache = f"{kv_heads} * {max_seq} * {head}"
    if in_place:
        return f"float *__restrict kd = kc + b * {cache}, *__restrict vd = vc + b * {cache};"
    copy = f"""for (long t = 0; t < past * {head}; ++t) {{   /* the live prefix only */
    kd[h * {max_seq * head} + t] = kc[b * {cache} + h * {max_seq * head} + t];
    vd[h * {max_seq * head} + t] = vc[b * {cache} + h * {max_seq * head} + t];
}}"""
    return f"float *__restrict kd = pk + b * {cache}, *__restrict vd = pv + b * {cache};\n" + \
        loop("h", 0, kv_heads, copy, "long")


def gqa(batch: int, seq: int, heads: int, kv_heads: int, head: int, max_seq: int,
        rotary: bool, rot_half: int, interleaved: bool, scale: float, in_place: bool,
        cos_rows: int) -> Lowered:
    """Params: q, k, v, kc, vc, seqlens (int32), total (int32), [cosc, sinc], out,
    [present_k, present_v]. In place, kc/vc are the session's caches (read and written);
    otherwise they are the past inputs, whose live prefix is copied into the presents first.
    Workspace: the scores and rotated queries of gqa_rvv.CHUNK heads."""
    spec = make_spec("gqa", batch=batch, seq=seq, heads=heads, kv_heads=kv_heads, head=head,
                     max_seq=max_seq, rotary=rotary, rot_half=rot_half,
                     interleaved=interleaved, scale=scale, in_place=in_place,
                     cos_rows=cos_rows)
    put_k = _rotate("kr", "ks", rot_half, head, interleaved) if rotary else \
        f"for (long d = 0; d < {head}; ++d) kr[d] = ks[d];"
    def get_q(dst: str, src: str) -> str:
        return _rotate(dst, src, rot_half, head, interleaved) if rotary else \
            f"for (long d = 0; d < {head}; ++d) {dst}[d] = {src}[d];"
    # the last position written must lie inside the caches and, with rotary, the cos/sin rows
    bound = min(max_seq, cos_rows) if rotary else max_seq
    # seqlens_k counts the keys up to the last new token, less one: past = seqlens_k + 1 - seq
    past = "(long)seqlens[b]" if seq == 1 else f"(long)seqlens[b] + 1 - {seq}"
    group = heads // kv_heads
    if seq == 1:   # one token: its position is past, no loop over tokens
        row = "b"
        tokens = "const long pos = past, live = pos + 1;\n" + \
            _store(kv_heads, head, max_seq, row, put_k) + "\n" + \
            _attend(heads, group, head, max_seq, row, get_q, scale)
    else:
        row = f"(b * {seq} + s)"
        store = "const long pos = past + s;\n" + _store(kv_heads, head, max_seq, row, put_k)
        attend = "const long pos = past + s, live = pos + 1;\n" + \
            _attend(heads, group, head, max_seq, row, get_q, scale)
        tokens = loop("s", 0, seq, store, "long") + "\n" + \
            loop("s", 0, seq, attend, "long", directives=True)
    per_batch = f"""const long past = {past};
if (past < 0 || past + {seq} > {bound}) RVK_DATA_ERROR;
{_caches(in_place, kv_heads, max_seq, head)}
{tokens}"""
    # scores and rotated queries: one head's in the portable form, a chunk's in the RVV one
    ws_scores = gqa_rvv.CHUNK * max_seq
    body = f"""(void)total;
float *__restrict sc = ws, *__restrict qr = ws + {ws_scores};
{loop("b", 0, batch, per_batch, "long", flat=True, directives=True)}
RVK_DATA_OK;"""
    params = [Param("q"), Param("k"), Param("v"), Param("kc", not in_place),
              Param("vc", not in_place), Param("seqlens", dtype="int32"),
              Param("total", dtype="int32")]
    if rotary:
        params += [Param("cosc"), Param("sinc")]
    params.append(Param("out", False))
    if not in_place:
        params += [Param("pk", False), Param("pv", False)]
    macs = batch * seq * heads * max_seq * head * 2
    return Lowered(Kernel("gqa", tuple(params), indent(body, directives=True) + "\n",
                          workspace=gqa_rvv.CHUNK * (max_seq + head), spec=spec,
                          status=True, macs=macs,
                          support={**rvv.header(), **gqa_rvv.support(),
                                   **gqa_host.support()}))


def cache_write(batch: int, heads: int, max_seq: int, head: int, seq: int) -> Lowered:
    """Params: cache (the session's, written in place), x [batch, heads, seq, head], live
    (int64 [batch]: the live length, the new tokens included). Copies x to positions
    pos .. pos + seq - 1 of each head, pos = live - seq; pos out of the bound is a data
    error. At pos 0 (a new sequence) the row is cleared first: the session's
    memory starts undefined."""
    spec = make_spec("cache_write", batch=batch, heads=heads, max_seq=max_seq, head=head,
                     seq=seq)
    copy = f"""float *__restrict dst = cache + ((b * {heads} + h) * {max_seq} + pos) * {head};
const float *__restrict src = x + (b * {heads} + h) * {seq * head};
for (long i = 0; i < {seq * head}; ++i) dst[i] = src[i];"""
    per_batch = f"""const long pos = (long)live[b] - {seq};
if (pos < 0 || pos + {seq} > {max_seq}) RVK_DATA_ERROR;
if (pos == 0)
    for (long i = 0; i < {heads * max_seq * head}; ++i)
        cache[b * {heads * max_seq * head} + i] = 0.0f;
{loop("h", 0, heads, copy, "long")}"""
    body = indent(loop("b", 0, batch, per_batch, "long", flat=True), directives=True) + \
        "\n    RVK_DATA_OK;\n"
    params = (Param("cache", False), Param("x"), Param("live", dtype="int64"))
    return Lowered(Kernel("cache_write", params, body, spec=spec, status=True))
