"""Attention (ai.onnx opsets 23-25) as one kernel: per batch, query head and query row, the
scores against every key (scaled dot products, optional softcap, then the masks: boolean
(false = masked) or additive float `attn_mask` broadcast to (B, Hq, Sq, ml) with keys past ml
masked, the bottom-right causal mask, the sliding window, the keys past nonpad_kv_seqlen[b]),
a softmax with fully masked rows giving zeros, and the weighted sum of the values.
Grouped-query attention: query head h reads key/value head h / (Hq / Hkv). Q, K, V, Y are
either (B, H, S, D) or (B, S, H*D).

KV cache: when present_key/present_value are outputs, the kernel first writes them (past rows,
then the new K/V rows, in the 4-D layout) and attends over them; otherwise it reads K and V in
place. The causal and window masks put query i at absolute position i + offset, offset = the
past length, or nonpad_kv_seqlen[b] - Sq (external cache), or 0. The optional
qk_matmul_output is taken at the stage its mode names: 0 scaled QK, 1 after softcap, 2 after
the masks, 3 the softmax probabilities.

`attention_gemm` (used by the lowering) runs both products on the packed GEMM with the scores
of one head in the workspace; `attention` (direct, one row of scores as workspace) serves the
unusual shapes where that workspace would be large, and one query over a cache whose live
length is nonpad_kv_seqlen (a decoder's cache kept at its bound, passes/kv_cache.py): it then
reads only the keys before that length, since the ones after weigh exactly nothing. Both take
an `Attn`."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import List, Optional, Tuple

from ... import rvv, x86
from ...cfmt import flt, indent
from ...lanes import lane_reduce
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...parallel import Split
from ...loops import broadcast_strides, loop
from ..gemm.core import core
from ..gemm.spec import Epilogue, Side
from ..gemm.tiling import choose_tile
from ..math.vmath import exp_support
from ..reduce import softmax_x86
from ..reduce.norm import softmax_row_rvv
from ..rnn.rows import DOT


@dataclass(frozen=True)
class Attn:
    dims: Tuple[int, ...]      # (B, Hq, Hkv, Sq, T, D, Dv), T = past + new keys
    rank: int                  # of Q, K, V, Y
    scale: float
    softcap: float
    is_causal: bool
    mask_shape: Optional[Tuple[int, ...]]
    mask_dtype: Optional[str]
    past: int                  # past keys (inputs past_k, past_v); 0: none
    present: bool              # outputs present_k, present_v written, K/V read from them
    window: Tuple[int, int]    # (left, right) window sizes, -1: unbounded
    nonpad: bool               # input nonpad (int64, per batch)
    qk_mode: int               # stage copied to output qk; -1: no such output

    @property
    def kv(self) -> Tuple[str, str, int]:
        """(K source, V source, their rank) the attention reads."""
        return ("present_k", "present_v", 4) if self.present else ("k", "v", self.rank)

    def params(self) -> Tuple[Param, ...]:
        ps = [Param("q"), Param("k"), Param("v")]
        ps += [Param("mask", dtype=self.mask_dtype)] if self.mask_shape is not None else []
        ps += [Param("past_k"), Param("past_v")] if self.past else []
        ps += [Param("nonpad", dtype="int64")] if self.nonpad else []
        ps += [Param("y", False)]
        ps += [Param("present_k", False), Param("present_v", False)] if self.present else []
        return tuple(ps + ([Param("qk", False)] if self.qk_mode >= 0 else []))

    def spec(self):
        return make_spec("attention", **asdict(self))


declare_spec("attention", tuple(Attn.__dataclass_fields__))


def at(ptr: str, rank: int, heads: int, seq: int, size: int, head: str, row: str) -> str:
    """Pointer to row `row` of head `head` (batch b) of a Q/K/V/Y tensor."""
    if rank == 4:
        return f"{ptr} + ((b * {heads} + {head}) * {seq} + {row}) * {size}"
    return f"{ptr} + (b * {seq} + {row}) * {heads * size} + {head} * {size}"


def offset(c: Attn) -> str:
    """Absolute position of query row 0 (C expression; `off` is declared per batch)."""
    return "off" if c.nonpad and not c.past else str(c.past)


def offset_decl(c: Attn, ty: str = "long") -> str:
    """Declaration of `off` when a mask reads it."""
    used = c.is_causal or max(c.window) >= 0
    return (f"const {ty} off = ({ty})nonpad[b] - {c.dims[3]};\n"
            if used and offset(c) == "off" else "")


def masks(c: Attn, row: str) -> List[str]:
    """Statements applying every mask to the score s of query `row` and key j; they read b,
    h, `row`, j, mask, nonpad and off."""
    b_, hq, _, sq, total = c.dims[:5]
    out = []
    if c.mask_shape is not None:
        ml = c.mask_shape[-1]
        st = broadcast_strides(c.mask_shape, (b_, hq, sq, ml))
        idx = " + ".join(f"{v} * {s}" for v, s in zip(("b", "h", row, "j"), st) if s) or "0"
        use = (f"if (!mask[{idx}]) s = -INFINITY;" if c.mask_dtype == "bool"
               else f"s += mask[{idx}];")
        out.append(f"if (j >= {ml}) s = -INFINITY;\nelse {use}" if ml < total else use)
    pos = row if offset(c) == "0" else f"{row} + {offset(c)}"
    if c.is_causal:
        out.append(f"if (j > {pos}) s = -INFINITY;")
    left, right = c.window
    if left >= 0:
        out.append(f"if (j < {pos} - {left}) s = -INFINITY;")
    if right >= 0:
        out.append(f"if (j > {pos} + {right}) s = -INFINITY;")
    if c.nonpad:
        out.append("if (j >= nonpad[b]) s = -INFINITY;")
    return out


def score_stages(c: Attn, row: str, qkr: str = "qkr") -> str:
    """Statements taking s (the scaled dot product) through softcap and masks, copying it to
    the qk row `qkr` at the stage qk_mode names (0 to 2)."""
    keep = f"{qkr}[j] = s;"
    out = [keep] if c.qk_mode == 0 else []
    if c.softcap > 0:
        out.append(f"s = {flt(c.softcap)} * tanhf(s / {flt(c.softcap)});")
    out += [keep] if c.qk_mode == 1 else []
    out += masks(c, row)
    out += [keep] if c.qk_mode == 2 else []
    return "\n".join(out)


def qk_row(c: Attn, row: str) -> str:
    _, hq, _, sq, total = c.dims[:5]
    return f"qk + ((b * {hq} + h) * {sq} + {row}) * {total}"


def fill_present(c: Attn) -> str:
    """C statements writing present_k/present_v: the past rows, then the new ones."""
    b_, _, hk, _, total, d, dv = c.dims
    new = total - c.past
    parts = []
    for out, past, src, size in (("present_k", "past_k", "k", d), ("present_v", "past_v", "v",
                                                                    dv)):
        old = (f"const float *__restrict o = {past} + (b * {hk} + hh) * {c.past * size};\n"
               f"for (long t = 0; t < {c.past * size}; ++t) p[t] = o[t];\n" if c.past else "")
        parts.append(f"""{{
    float *__restrict p = {out} + (b * {hk} + hh) * {total * size};
{indent(old)}
    for (long t = 0; t < {new}; ++t) {{
        const float *__restrict s = {at(src, c.rank, hk, new, size, "hh", "t")};
        for (long e = 0; e < {size}; ++e) p[({c.past} + t) * {size} + e] = s[e];
    }}
}}""")
    return loop("b", 0, b_, loop("hh", 0, hk, "\n".join(parts), "long"), "long") + "\n"


def _kernel(c: Attn, body: str, workspace: int, support, split=None) -> Lowered:
    b_, hq, _, sq, total, d, dv = c.dims
    if c.present:
        body = fill_present(c) + body
    body = "\n".join(ln for ln in body.splitlines() if ln.strip())   # absent options' lines
    return Lowered(Kernel("attention", c.params(), indent(body) + "\n", workspace, support,
                          macs=b_ * hq * sq * total * (d + dv), spec=c.spec(), split=split))


def attention(c: Attn) -> Lowered:
    """Direct form: the scores of one query row in the workspace."""
    b_, hq, hk, sq, total, d, dv = c.dims
    reps = hq // hk
    kn, vn, kvr = c.kv
    qkr = f"float *__restrict qkr = {qk_row(c, 'i')};\n" if c.qk_mode >= 0 else ""
    keep3 = "qkr[j] = p;\n" if c.qk_mode == 3 else ""
    zero3 = f"for (long j = 0; j < {total}; ++j) qkr[j] = 0.0f;\n" if c.qk_mode == 3 else ""
    # keys at or past nonpad[b] are masked (their weight is exactly 0): unless the scores
    # are an output, they are not computed at all
    live = c.nonpad and c.qk_mode < 0
    jn = "live" if live else str(total)
    live_decl = (f"const long live = nonpad[b] < 0 ? 0 : nonpad[b] < {total} ? (long)nonpad[b]"
                 f" : {total};\n") if live else ""
    row = f"""const float *__restrict qi = {at("q", c.rank, hq, sq, d, "h", "i")};
float *__restrict yi = {at("y", c.rank, hq, sq, dv, "h", "i")};
{qkr}
float mx = -INFINITY;
for (long j = 0; j < {jn}; ++j) {{
    const float *__restrict kj = {at(kn, kvr, hk, total, d, f"(h / {reps})", "j")};
    float s = rvk_dot(qi, kj, {d}) * {flt(c.scale)};
{indent(score_stages(c, "i"))}
    ws[j] = s;
    mx = s > mx ? s : mx;
}}
for (long t = 0; t < {dv}; ++t) yi[t] = 0.0f;
if (mx == -INFINITY) {{   /* every key masked: zeros */
{indent(zero3)}
    continue;
}}
float sum = 0.0f;
for (long j = 0; j < {jn}; ++j) {{
    ws[j] = rvk_expf(ws[j] - mx);
    sum += ws[j];
}}
const float inv = 1.0f / sum;
for (long j = 0; j < {jn}; ++j) {{
    const float *__restrict vj = {at(vn, kvr, hk, total, dv, f"(h / {reps})", "j")};
    const float p = ws[j] * inv;
{indent(keep3)}
    for (long t = 0; t < {dv}; ++t) yi[t] += p * vj[t];
}}"""
    # one query row (a decoding step): its body runs once per head, and `continue` goes on
    # to the next head, which the loop over heads always is
    heads = f"""for (long h = 0; h < {hq}; ++h) {{
{indent(loop("i", 0, sq, row, "long", flat=True))}
}}"""
    body = loop("b", 0, b_, offset_decl(c) + live_decl + heads, "long", flat=True)
    return _kernel(c, body, total, dict(DOT))


def _head(ptr: str, rank: int, heads: int, seq: int, size: int, head: str) -> Tuple[str, int]:
    """(pointer to row 0 of head `head` of batch b, row stride) of a Q/K/V/Y tensor."""
    if rank == 4:
        return f"{ptr} + (b * {heads} + {head}) * {seq * size}", size
    return f"{ptr} + b * {seq * heads * size} + {head} * {size}", heads * size


def _softmax_row(c: Attn, total: int) -> Tuple[str, dict]:
    """(statements, their support): row `srow` of scores through the score stages (softcap,
    masks, a qk copy) and the softmax, in place. Without stages the row is the Softmax
    kernel's: its RVV form (reduce/norm.py), its x86 intrinsics (reduce/softmax_x86.py), else
    its max and sum in lanes (lanes.py; a single running max and sum are chains of dependent
    operations, which made Whisper's 1500-key rows cost as much as its QK^T)."""
    def zeros(mx: str) -> str:
        return f"""if ({mx} == -INFINITY) {{   /* every key masked: zero weights */
    for (long j = 0; j < {total}; ++j) srow[j] = 0.0f;
    continue;
}}
"""
    scale = f"const float inv = 1.0f / sum;\nfor (long j = 0; j < {total}; ++j) srow[j] *= inv;"
    stages = score_stages(c, "i")
    if not stages:
        lanes = (lane_reduce("mx", total, "srow[{k}]", init="-INFINITY",
                             step="{acc} = {v} > {acc} ? {v} : {acc};") + "\n" + zeros("mx") +
                 lane_reduce("sum", total, "rvk_expf(srow[{k}] - mx)", stmt="srow[{k}] = v;") +
                 "\n" + scale)
        x86_row = softmax_x86.row("srow", "srow", total, masked_zeros=True)
        text = rvv.guarded(softmax_row_rvv("srow", "srow", total, zeros("m")),
                           x86.guarded(x86_row, lanes))
        return text, {**softmax_x86.support(), **rvv.header(), **exp_support(4)}
    return f"""float mx = -INFINITY;
for (long j = 0; j < {total}; ++j) {{
    float s = srow[j];
{indent(stages)}
    srow[j] = s;
    mx = s > mx ? s : mx;
}}
{zeros("mx")}float sum = 0.0f;
for (long j = 0; j < {total}; ++j) {{
    srow[j] = rvk_expf(srow[j] - mx);
    sum += srow[j];
}}
{scale}""", {}


def attention_gemm(c: Attn) -> Lowered:
    """The same computation on the packed GEMM, per batch and query head: S = scale * Q.K^T
    into the workspace (Q and K read in place through strided packers, whichever layout),
    softcap, masks and softmax row by row in place, then Y = S.V written straight into y
    (row stride: the layout's)."""
    b_, hq, hk, sq, total, d, dv = c.dims
    reps = hq // hk
    kn, vn, kvr = c.kv
    q, qs = _head("q", c.rank, hq, sq, d, "h")
    k, ks = _head(kn, kvr, hk, total, d, f"h / {reps}")
    v, vs = _head(vn, kvr, hk, total, dv, f"h / {reps}")
    y, ys_ = _head("y", c.rank, hq, sq, dv, "h")
    mr, nr = choose_tile(sq, total, d)
    c1 = core("attn_qk", sq, total, d, Side("strided", si=qs, sk=1),
              Side("strided", si=ks, sk=1), Epilogue(ldy=total, alpha=c.scale), mr, nr)
    mr, nr = choose_tile(sq, dv, total)
    c2 = core("attn_pv", sq, dv, total, Side("strided", si=total, sk=1),
              Side("strided", si=1, sk=vs), Epilogue(ldy=ys_), mr, nr)
    scratch = max(c1.workspace, c2.workspace)
    cws = f"ws + {sq * total}" if scratch else "(float *)0"
    qkr = f"float *__restrict qkr = {qk_row(c, 'i')};\n" if c.qk_mode in (0, 1, 2) else ""
    probs = (f"for (long t = 0; t < {sq * total}; ++t) ({qk_row(c, '0')})[t] = ws[t];\n"
             if c.qk_mode == 3 else "")
    # (batch, head) pairs are the parts threads share (each uses the workspace alone); not
    # with present outputs, which every head of a group would write
    parts = not c.present and b_ * hq > 1
    row, row_support = _softmax_row(c, total)
    head = f"""{c1.name}({q}, {k}, ws, {cws});
for (long i = 0; i < {sq}; ++i) {{
    float *__restrict srow = ws + i * {total};
{indent(qkr)}
{indent(row)}
}}
{probs}
{c2.name}(ws, {v}, {y}, {cws});"""
    if parts:
        body = f"""for (long bh = rvk_lo; bh < rvk_hi; ++bh) {{
    const long b = bh / {hq};
{indent(offset_decl(c))}
    {{
        const long h = bh % {hq};
{indent(head, 2)}
    }}
}}"""
    else:
        body = loop("b", 0, b_, offset_decl(c) + loop("h", 0, hq, head, "long"), "long",
                    flat=True)
    split = Split(b_ * hq, b_ * hq * sq * total * (d + dv)) if parts else None
    return _kernel(c, body, sq * total + scratch, {**c1.support, **c2.support, **row_support},
                   split)
