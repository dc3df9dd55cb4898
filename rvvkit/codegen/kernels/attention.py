"""Attention (ai.onnx opset 23) as one direct kernel: per batch, query head and query row, the
scores against every key (scaled dot products, optional softcap, then the mask: boolean
(false = masked) or additive float, broadcast to (B, Hq, Sq, Skv), and the top-left causal
mask), a softmax with fully masked rows giving zeros, and the weighted sum of the values.
Grouped-query attention: query head h reads key/value head h / (Hq / Hkv). Q, K, V, Y are
either (B, H, S, D) or (B, S, H*D). Workspace: one row of scores.

`attention_gemm` (used by the lowering) does the same with both products on the packed GEMM
and the scores of one head in the workspace; `attention` (direct) stays for the unusual
shapes where that workspace would be large."""
from __future__ import annotations

from typing import Optional, Tuple

from ..cfmt import flt, indent
from ..kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ..loops import broadcast_strides
from .gemm_core import core
from .gemm_emit import Epilogue, Side
from .gemm_tiling import choose_tile
from .rnn import DOT

declare_spec("attention", ("dims", "rank", "scale", "softcap", "is_causal", "mask_shape",
                           "mask_dtype"))


def at(ptr: str, rank: int, heads: int, seq: int, size: int, head: str, row: str) -> str:
    """Pointer to row `row` of head `head` (batch b) of a Q/K/V/Y tensor."""
    if rank == 4:
        return f"{ptr} + ((b * {heads} + {head}) * {seq} + {row}) * {size}"
    return f"{ptr} + (b * {seq} + {row}) * {heads * size} + {head} * {size}"


def score_terms(dims, scale: float, softcap: float, is_causal: bool, mask_shape, mask_dtype,
                row: str = "i"):
    """(expression of the score s of query `row` and key j from the dot product `sc`,
    statements applying the masks to s), shared with the CUDA generator; they read b, h, row,
    j and mask."""
    b_, hq, _, sq, skv = dims[:5]
    score = f"sc * {flt(scale)}"
    if softcap > 0:
        score = f"{flt(softcap)} * tanhf(({score}) / {flt(softcap)})"
    masks = []
    if mask_shape is not None:
        st = broadcast_strides(mask_shape, (b_, hq, sq, skv))
        off = " + ".join(f"{v} * {s}" for v, s in zip(("b", "h", row, "j"), st) if s) or "0"
        if mask_dtype == "bool":
            masks.append(f"if (!mask[{off}]) s = -INFINITY;")
        else:
            masks.append(f"s += mask[{off}];")
    if is_causal:
        masks.append(f"if (j > {row}) s = -INFINITY;")
    return score, "\n".join(masks)


def attention(dims: Tuple[int, ...], rank: int, scale: float, softcap: float, is_causal: bool,
              mask_shape: Optional[Tuple[int, ...]], mask_dtype: Optional[str]) -> Lowered:
    """dims = (B, Hq, Hkv, Sq, Skv, D, Dv); params q, k, v, [mask], y."""
    b_, hq, hk, sq, skv, d, dv = dims
    reps = hq // hk
    score, masks = score_terms(dims, scale, softcap, is_causal, mask_shape, mask_dtype)
    q = at("q", rank, hq, sq, d, "h", "i")
    k = at("k", rank, hk, skv, d, f"(h / {reps})", "j")
    v = at("v", rank, hk, skv, dv, f"(h / {reps})", "j")
    y = at("y", rank, hq, sq, dv, "h", "i")
    body = f"""for (long b = 0; b < {b_}; ++b) {{
    for (long h = 0; h < {hq}; ++h) {{
        for (long i = 0; i < {sq}; ++i) {{
            const float *__restrict qi = {q};
            float *__restrict yi = {y};
            float mx = -INFINITY;
            for (long j = 0; j < {skv}; ++j) {{
                const float *__restrict kj = {k};
                const float sc = rvk_dot(qi, kj, {d});
                float s = {score};
{indent(masks, 4)}
                ws[j] = s;
                mx = s > mx ? s : mx;
            }}
            for (long t = 0; t < {dv}; ++t) yi[t] = 0.0f;
            if (mx == -INFINITY) continue;   /* every key masked: zeros */
            float sum = 0.0f;
            for (long j = 0; j < {skv}; ++j) {{
                ws[j] = expf(ws[j] - mx);
                sum += ws[j];
            }}
            const float inv = 1.0f / sum;
            for (long j = 0; j < {skv}; ++j) {{
                const float *__restrict vj = {v};
                const float p = ws[j] * inv;
                for (long t = 0; t < {dv}; ++t) yi[t] += p * vj[t];
            }}
        }}
    }}
}}"""
    params = [Param("q"), Param("k"), Param("v")]
    if mask_shape is not None:
        params.append(Param("mask", dtype=mask_dtype))
    params.append(Param("y", False))
    spec = make_spec("attention", dims=dims, rank=rank, scale=scale, softcap=softcap,
                     is_causal=is_causal, mask_shape=mask_shape, mask_dtype=mask_dtype)
    macs = b_ * hq * sq * skv * (d + dv)
    return Lowered(Kernel("attention", tuple(params), indent(body) + "\n", skv, dict(DOT),
                          macs=macs, spec=spec))


def attention_gemm(dims: Tuple[int, ...], rank: int, scale: float, softcap: float,
                   is_causal: bool, mask_shape: Optional[Tuple[int, ...]],
                   mask_dtype: Optional[str]) -> Lowered:
    """The same computation on the packed GEMM, per batch and query head: S = scale * Q.K^T
    into the workspace (Q and K read in place through strided packers, whichever layout),
    softcap, masks and softmax row by row in place, then Y = S.V written straight into y
    (row stride: the layout's). Params and spec as `attention`."""
    b_, hq, hk, sq, skv, d, dv = dims
    reps = hq // hk
    _, masks = score_terms(dims, scale, softcap, is_causal, mask_shape, mask_dtype)
    qs, ks, vs, ys_ = (d, d, dv, dv) if rank == 4 else (hq * d, hk * d, hk * dv, hq * dv)
    mr, nr = choose_tile(sq, skv, d)
    c1 = core("attn_qk", sq, skv, d, Side("strided", si=qs, sk=1), Side("strided", si=ks, sk=1),
              Epilogue(ldy=skv, alpha=scale), mr, nr)
    mr, nr = choose_tile(sq, dv, skv)
    c2 = core("attn_pv", sq, dv, skv, Side("strided", si=skv, sk=1),
              Side("strided", si=1, sk=vs), Epilogue(ldy=ys_), mr, nr)
    if rank == 4:
        ptr = {"q": f"q + (b * {hq} + h) * {sq * d}", "k": f"k + (b * {hk} + h / {reps}) * "
               f"{skv * d}", "v": f"v + (b * {hk} + h / {reps}) * {skv * dv}",
               "y": f"y + (b * {hq} + h) * {sq * dv}"}
    else:
        ptr = {"q": f"q + b * {sq * hq * d} + h * {d}",
               "k": f"k + b * {skv * hk * d} + (h / {reps}) * {d}",
               "v": f"v + b * {skv * hk * dv} + (h / {reps}) * {dv}",
               "y": f"y + b * {sq * hq * dv} + h * {dv}"}
    cap = f"s = {flt(softcap)} * tanhf(s / {flt(softcap)});\n" if softcap > 0 else ""
    scratch = max(c1.workspace, c2.workspace)
    cws = f"ws + {sq * skv}" if scratch else "(float *)0"
    body = f"""for (long b = 0; b < {b_}; ++b) {{
    for (long h = 0; h < {hq}; ++h) {{
        {c1.name}({ptr["q"]}, {ptr["k"]}, ws, {cws});
        for (long i = 0; i < {sq}; ++i) {{
            float *__restrict srow = ws + i * {skv};
            float mx = -INFINITY;
            for (long j = 0; j < {skv}; ++j) {{
                float s = srow[j];
{indent(cap + masks, 4)}
                srow[j] = s;
                mx = s > mx ? s : mx;
            }}
            if (mx == -INFINITY) {{   /* every key masked: zero weights */
                for (long j = 0; j < {skv}; ++j) srow[j] = 0.0f;
                continue;
            }}
            float sum = 0.0f;
            for (long j = 0; j < {skv}; ++j) {{
                srow[j] = expf(srow[j] - mx);
                sum += srow[j];
            }}
            const float inv = 1.0f / sum;
            for (long j = 0; j < {skv}; ++j) srow[j] *= inv;
        }}
        {c2.name}(ws, {ptr["v"]}, {ptr["y"]}, {cws});
    }}
}}"""
    params = [Param("q"), Param("k"), Param("v")]
    if mask_shape is not None:
        params.append(Param("mask", dtype=mask_dtype))
    params.append(Param("y", False))
    spec = make_spec("attention", dims=dims, rank=rank, scale=scale, softcap=softcap,
                     is_causal=is_causal, mask_shape=mask_shape, mask_dtype=mask_dtype)
    support = {**c1.support, **c2.support}
    return Lowered(Kernel("attention", tuple(params), indent(body) + "\n", sq * skv + scratch,
                          support, macs=b_ * hq * sq * skv * (d + dv), spec=spec))
