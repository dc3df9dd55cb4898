"""GridSample kernel (semantics: rvvkit/ops/grid.py): per output location, each spatial axis
turns its grid coordinate into TAPS neighbour offsets (o<j>[]), weights (w<j>[], linear and
cubic) and, with zeros padding, validity flags (v<j>[]); every channel then sums its
neighbours, innermost axis first (as the reference interpolates). The statements are shared
with the CUDA generator (codegen/cuda/grid.py), which runs one output element per thread."""
from __future__ import annotations

import math
from typing import Dict, List

from ....ops.grid import FIRST_TAP, GUARD, TAPS, borders
from ...cfmt import flt
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop, strides_of

GS_KEYS = ("x_shape", "grid_shape", "mode", "padding", "align_corners")
declare_spec("gridsample", GS_KEYS)

# Helpers shared by the C and CUDA units ("hd_": RVK_HD is __host__ __device__ in CUDA).
HELPERS: Dict[str, str] = {
    "hd_rvk_gs_reflect": """\
/* GridSample: x folded into [lo, hi] by reflecting at the borders as often as needed */
static RVK_HD inline float rvk_gs_reflect(float x, float lo, float hi) {
    const float range = hi - lo;
    if (!(x < lo) && !(x > hi))
        return x;
    if (!(range > 0.0f))
        return lo;
    const float dx = x < lo ? lo - x : x - hi;
    const float n = floorf(dx / range);
    const float r = dx - n * range;
    const int odd = n < 16777216.0f && ((long)n & 1);   /* (floats from 2^24 are even) */
    return (x < lo) != odd ? lo + r : hi - r;
}""",
    "hd_rvk_gs_round": """\
/* GridSample: x rounded half to even, without libm (nearbyintf reads the FP environment) */
static RVK_HD inline float rvk_gs_round(float x) {
    if (!(x > -8388608.0f && x < 8388608.0f))
        return x;   /* from 2^23 on (and NaN) nothing to round */
    float r = floorf(x);
    const float frac = x - r;   /* exact */
    if (frac > 0.5f || (frac == 0.5f && ((long)r & 1)))
        r += 1.0f;
    return r;
}""",
    "hd_rvk_gs_cubic": """\
/* GridSample: Keys cubic weights (A = -0.75) of the 4 neighbours at fraction t */
static RVK_HD inline void rvk_gs_cubic(float t, float *w) {
    const float s0 = t + 1.0f, s3 = 2.0f - t, u = 1.0f - t;
    w[0] = ((-0.75f * s0 + 3.75f) * s0 - 6.0f) * s0 + 3.0f;
    w[1] = (1.25f * t - 2.25f) * t * t + 1.0f;
    w[2] = (1.25f * u - 2.25f) * u * u + 1.0f;
    w[3] = ((-0.75f * s3 + 3.75f) * s3 - 6.0f) * s3 + 3.0f;
}""",
}


def helpers(gs: dict) -> Dict[str, str]:
    """The HELPERS a kernel of this spec calls."""
    want = {"hd_rvk_gs_reflect": gs["padding"] == "reflection",
            "hd_rvk_gs_cubic": gs["mode"] == "cubic",
            "hd_rvk_gs_round": gs["mode"] == "nearest"}
    return {k: v for k, v in HELPERS.items() if want[k]}


def _denormalise(src: str, d: int, align: bool) -> str:
    if align:
        return f"({src} + 1.0f) * 0.5f * {flt(float(d - 1))}"
    return f"(({src} + 1.0f) * {flt(float(d))} - 1.0f) * 0.5f"


def axis_stmts(gs: dict, j: int, gp: str) -> List[str]:
    """C: axis j's neighbours (o<j>, w<j>, v<j>) for the grid point at pointer `gp`."""
    mode, pad, align = gs["mode"], gs["padding"], bool(gs["align_corners"])
    sp = gs["x_shape"][2:]
    d, k, st, taps = sp[j], len(sp), strides_of(sp)[j], TAPS[mode]
    lo, hi = (flt(v) for v in borders(d, align))
    out = [f"long o{j}[{taps}];"]
    out += [f"float w{j}[{taps}];"] if taps > 1 else []
    out += [f"int v{j}[{taps}];"] if pad == "zeros" else []
    out.append("{")
    body = [f"float c = {_denormalise(f'{gp}[{k - 1 - j}]', d, align)};"]
    if mode == "nearest":
        body.append("c = rvk_gs_round(c);")
    if pad == "border":
        body.append(f"c = c < {lo} ? 0.0f : (c > {hi} ? {flt(float(d - 1))} : c);")
    elif pad == "reflection":
        body.append(f"c = rvk_gs_reflect(c, {lo}, {hi});")
    body += [f"if (!(c >= {flt(-GUARD)})) c = {flt(-GUARD)};   /* also NaN */",
             f"if (c > {flt(float(d + GUARD))}) c = {flt(float(d + GUARD))};",
             "const float f = floorf(c);"]
    if mode == "linear":
        body += [f"w{j}[1] = c - f;", f"w{j}[0] = 1.0f - w{j}[1];"]
    elif mode == "cubic":
        body.append(f"rvk_gs_cubic(c - f, w{j});")
    first = FIRST_TAP[mode]
    i = f"(long)f + q - {-first}" if first else "(long)f + q"
    if pad == "zeros":
        tap = [f"const long i = {i};", f"v{j}[q] = i >= 0 && i < {d};",
               f"o{j}[q] = v{j}[q] ? i{_times(st)} : 0;"]
    elif pad == "border":
        tap = [f"const long i = {i};",
               f"o{j}[q] = (i < 0 ? 0 : (i > {d - 1} ? {d - 1} : i)){_times(st)};"]
    else:
        tap = [f"o{j}[q] = (long)rvk_gs_reflect((float)({i}), {lo}, {hi}){_times(st)};"]
    body += loop("q", 0, taps, "\n".join(tap)).split("\n")
    return out + ["    " + b for b in body] + ["}"]


def _times(st: int) -> str:
    return "" if st == 1 else f" * {st}"


def sample_stmts(gs: dict, xc: str, dst: str) -> List[str]:
    """C: `dst = ` the interpolated value of channel data `xc` from the axes' neighbours."""
    k, taps, zeros = len(gs["x_shape"]) - 2, TAPS[gs["mode"]], gs["padding"] == "zeros"
    if taps == 1:
        off = " + ".join(f"o{j}[0]" for j in range(k))
        if not zeros:
            return [f"{dst} = {xc}[{off}];"]
        ok = " && ".join(f"v{j}[0]" for j in range(k))
        return [f"{dst} = ({ok}) ? {xc}[{off}] : 0.0f;"]
    lines: List[str] = []
    for j in range(k):   # open one loop per axis, outermost first
        pad = "    " * j
        lines += [f"{pad}float s{j} = 0.0f;", f"{pad}for (int a{j} = 0; a{j} < {taps}; ++a{j}) {{"]
        if zeros:
            lines.append(f"{pad}    if (!v{j}[a{j}]) continue;")
    off = " + ".join(f"o{j}[a{j}]" for j in range(k))
    inner = "    " * k
    lines.append(f"{inner}s{k - 1} += w{k - 1}[a{k - 1}] * {xc}[{off}];")
    for j in range(k - 1, -1, -1):
        pad = "    " * j
        lines.append(f"{pad}}}")
        if j:
            lines.append(f"{pad}s{j - 1} += w{j - 1}[a{j - 1}] * s{j};")
    return lines + [f"{dst} = s0;"]


def gridsample(gs: dict) -> Lowered:
    x_shape, grid_shape = gs["x_shape"], gs["grid_shape"]
    n, c, k = x_shape[0], x_shape[1], len(x_shape) - 2
    s, p = math.prod(x_shape[2:]), math.prod(grid_shape[1:-1])
    per_c = [f"const float *xc = x + (n * {c} + c) * {s};"] + \
        sample_stmts(gs, "xc", f"y[(n * {c} + c) * {p} + p]")
    per_p = [f"const float *gp = grid + (n * {p} + p) * {k};"] + \
        [t for j in range(k) for t in axis_stmts(gs, j, "gp")] + \
        [loop("c", 0, c, "\n".join(per_c), "long")]
    body = loop("n", 0, n, loop("p", 0, p, "\n".join(per_p), "long"), "long",
                flat=True).split("\n")
    if n * c * p == 0:
        body = ["(void)x; (void)grid; (void)y;"]
    params = (Param("x"), Param("grid"), Param("y", const=False))
    taps = TAPS[gs["mode"]] ** k
    return Lowered(Kernel(f"gridsample_{gs['mode']}", params,
                          "\n".join("    " + b for b in body),
                          support=helpers(gs), spec=make_spec("gridsample", **gs),
                          macs=taps * n * c * p if taps > 1 else 0))
