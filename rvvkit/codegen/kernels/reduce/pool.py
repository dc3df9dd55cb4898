"""Pooling kernels (LRN and softmax are in norm.py, re-exported here).

Under RVV intrinsics (see rvv.py): 2-D pooling is vectorised along the output width over the
columns whose window lies inside the input (unit-stride loads for stride 1, strided loads
otherwise; the few border columns keep the scalar code), global pooling uses vector max/sum
reductions."""
from __future__ import annotations

import math

import numpy as np

from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, make_spec
from ...parallel import parts_loop, split_of
from ...loops import loop
from ...rvv import (all_lanes, guarded, header, keep_numbers, nan_unless, vbool, vle, vlse, vop,
                   vse, vsetvl, vsplat, vt)
from .norm import XY, lrn, softmax
from .vreduce import reduce_rvv

__all__ = ["pool_terms", "pool2d", "global_pool", "lrn", "softmax", "MAX_INIT", "max_step"]

# Max pooling, NaN and -inf: a window holding a NaN gives NaN, and the fold starts from
# -FLT_MAX, so a window of -inf gives -FLT_MAX. onnxruntime (1.32, x86) is not consistent here
# (measured): its MLAS kernels start from numeric_limits<float>::lowest() (hence -FLT_MAX,
# which we match), but whether a NaN survives depends on the kernel MLAS picks (generic, 2-D
# vector, global) and on where the NaN sits in the window (std::max and _mm_max_ps each drop
# a NaN on one side). We take the one rule that does not depend on either: any NaN -> NaN,
# which is what onnxruntime gives for an all-NaN window in its vector and global kernels, and
# what numpy and the ONNX reference give everywhere.
MAX_INIT = flt(-float(np.finfo(np.float32).max))


def max_step(v: str, acc: str = "acc") -> str:
    """The max fold's C step over tap value `v` into `acc`: a NaN v enters acc, and a NaN acc
    then stays (no comparison with it is true)."""
    return f"{acc} = ({v} > {acc} || {v} != {v}) ? {v} : {acc};"


def padded_extent(origin: str, k: int, end: int, dilation: int = 1) -> str:
    """C expression: how many of a window's k taps from `origin`, `dilation` apart, lie before
    `end`, the far edge of the padded input (an average's divisor with count_include_pad, per
    axis). With ceil_mode the last window may reach past that edge: its taps there are not
    counted, and with a dilation that is fewer than the span past the edge."""
    if dilation == 1:
        return f"(({origin} + {k} < {end} ? {origin} + {k} : {end}) - {origin})"
    return (f"(({origin}) + {(k - 1) * dilation} < {end} ? {k} : "
            f"({end} - ({origin}) + {dilation - 1}) / {dilation})")


def pool_terms(kind: str, h: int, w: int, kh: int, kw: int, pads, count_include_pad: bool,
               dilations=(1, 1)):
    """(init, update, finish) of one output's window, shared by the C and CUDA kernels: `update`
    folds tap value `v` into `acc` (and counts taps in `cnt` for averages), `finish` is the
    output, reading the window origin (h0, w0). Average divisors follow ONNX: the window's
    taps inside the padded input when padding counts, else the number of real input elements."""
    if kind == "max":
        return MAX_INIT, max_step("v"), "acc"
    _, _, pb, pr = pads
    if count_include_pad:
        dh, dw = dilations
        finish = (f"acc / (float)({padded_extent('h0', kh, h + pb, dh)}"
                  f" * {padded_extent('w0', kw, w + pr, dw)})")
    else:
        finish = "acc / (float)cnt"
    return "0.0f", "acc += v; ++cnt;", finish


def pool2d(kind: str, x_shape, y_shape, kernel, strides, pads, dilations,
           count_include_pad: bool = False) -> Lowered:
    """Max or average pooling over NCHW (divisors: see pool_terms)."""
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    kh, kw = kernel
    sh, sw = strides
    pt, pl = pads[:2]
    init, update, finish = pool_terms(kind, h, w, kh, kw, pads, count_include_pad, dilations)
    count_decl = "long cnt = 0;\n" if kind != "max" else ""
    count_use = "(void)cnt;\n" if kind != "max" and count_include_pad else ""
    # One output's window, bounds-checked per tap: the whole portable kernel, and the border
    # columns of the RVV one.
    window = f"""const long w0 = ow * {sw} - {pl};
float acc = {init};
{count_decl}{_taps(x_shape, kernel, dilations, update)}
{count_use}yp[oh * {wo} + ow] = {finish};"""
    spec = make_spec("pool", kind=kind, x_shape=x_shape, y_shape=y_shape, kernel=kernel,
                     strides=strides, pads=pads, dilations=dilations,
                     count_include_pad=count_include_pad)
    rvv = _pool2d_rvv(kind, x_shape, y_shape, kernel, strides, pads, dilations,
                      count_include_pad, init, window)
    row = f"const long h0 = oh * {sh} - {pt};\n" + loop("ow", 0, wo, window, "long")
    if kh * kw > 1 and w <= MAX_ROW:
        row = _rows_pool(kind, x_shape, y_shape, kernel, strides, pads, dilations,
                         count_include_pad, init)
    code = _planes(n * c, h * w, ho * wo, loop("oh", 0, ho, row, "long", flat=True))
    split = split_of(n * c, n * c * ho * wo * kh * kw)   # the parts: _planes's planes
    if rvv is None:
        return Lowered(Kernel(f"{kind}pool", XY, code, spec=spec, split=split))
    return Lowered(Kernel(f"{kind}pool", XY, guarded(rvv, code), support=header(), spec=spec,
                          split=split))


MAX_ROW = 4096   # floats of the folded row on the stack (a wider 1-D pool keeps the window)
# Outputs per row from which the columns are folded tap by tap over the row (measured here:
# 55 outputs 0.28 ms against 0.39 per output; 13 outputs 0.42 against 0.16, the short
# vector loops re-reading what the previous tap's pass just stored)
WIDE_ROW = 32


def _row_fold(kind: str, init: str, h: int, w: int, kh: int, dh: int, count: bool) -> str:
    """The window's input rows of output row oh folded into t[w] from `init` (element-wise
    over whole rows: vectorised, no bounds checks), counted in `nrow` when `count`."""
    step = max_step("v", "t[j]") if kind == "max" else "t[j] += v;"
    rows = _skip_loop("i", kh, f"const long hh = h0 + i * {dh};", f"hh < 0 || hh >= {h}",
                      f"""const float *__restrict r = xp + hh * {w};
{"++nrow;" + chr(10) if count else ""}for (long j = 0; j < {w}; ++j) {{
    const float v = r[j];
    {step}
}}""")
    decl = "long nrow = 0;\n" if count else ""
    return f"""float t[{w}];
for (long j = 0; j < {w}; ++j) t[j] = {init};
{decl}{rows}"""


def _rows_pool(kind, x_shape, y_shape, kernel, strides, pads, dilations, cip: bool,
               init: str) -> str:
    """Portable pool of output row oh in two folds: the window's rows into t (_row_fold), then
    the columns of t: tap by tap over a wide row's inside outputs, else per output (bounds
    checked only in the border columns). The per-output window with a bounds check per tap
    was scalar code (squeezenet's first MaxPool: 8 % of its host latency; inception_v2's 3x3
    AveragePools: 8 %). Max is exact and any NaN still gives NaN, so the fold order does not
    matter for it; an average sums the same taps, rows first (within rounding of the window
    order). Divisors as pool_terms: the clipped padded window with cip, else the real taps."""
    h, w = x_shape[2:]
    wo = y_shape[3]
    (kh, kw), (sh, sw), (dh, dw), pt, pl = kernel, strides, dilations, pads[0], pads[1]
    pb, pr = pads[2], pads[3]
    lo = min(wo, -(-pl // sw))                                   # first ow with w0 >= 0
    hi = max(lo, min(wo, (w - 1 - (kw - 1) * dw + pl) // sw + 1))  # past the last inside
    is_max = kind == "max"
    counted = not is_max and not cip        # an average of the real taps counts them

    def step(acc: str) -> str:
        return max_step("v", acc) if is_max else f"{acc} += v;"

    def div(cols: str) -> str:
        """The divisor of a row's output over `cols` window columns."""
        if is_max:
            return ""
        rows = "nrow" if counted else padded_extent("h0", kh, h + pb, dh)
        return f" / (float)({rows} * {cols})"
    # inside columns: tap by tap over the whole run of outputs (vectorised, strided loads)
    at = " + ".join([f"ow * {sw}" if sw > 1 else "ow"] + (["j"] if dw == 1 else [f"j * {dw}"])) \
        + (f" - {pl}" if pl else "")
    scale = "" if is_max else f"\nfor (long ow = {lo}; ow < {hi}; ++ow) yr[ow] = yr[ow]{div(kw)};"
    inner = f"""for (long ow = {lo}; ow < {hi}; ++ow) yr[ow] = {init};
for (long j = 0; j < {kw}; ++j) {{
    for (long ow = {lo}; ow < {hi}; ++ow) {{
        const float v = t[{at}];
        {step("yr[ow]")}
    }}
}}{scale}"""
    # a border column's window columns: those inside the input (counted), else those inside
    # the padded input
    bcols = "ncol" if counted else padded_extent("w0", kw, w + pr, dw)
    border = f"""const long w0 = ow * {sw} - {pl};
float acc = {init};
{"long ncol = 0;" + chr(10) if counted else ""}{_skip_loop(
        "j", kw, f"const long ww = w0 + j * {dw};", f"ww < 0 || ww >= {w}",
        f"const float v = t[ww];{chr(10)}{step('acc')}" + (f"{chr(10)}++ncol;" if counted else ""))}
yr[ow] = acc{div(bcols)};"""
    window = f"""const long w0 = ow * {sw} - {pl};
float acc = {init};
for (long j = 0; j < {kw}; ++j) {{
    const float v = t[w0 + j * {dw}];
    {step("acc")}
}}
yr[ow] = acc{div(kw)};"""
    cols = [loop("ow", a, b, border, "long") for a, b in ((0, lo), (hi, wo)) if b > a]
    if hi - lo >= WIDE_ROW:
        cols.append(inner)
    elif hi > lo:
        cols.append(loop("ow", lo, hi, window, "long"))
    return f"""const long h0 = oh * {sh} - {pt};
float *__restrict yr = yp + oh * {wo};
{_row_fold(kind, init, h, w, kh, dh, counted)}
""" + "\n".join(cols)


def _skip_loop(var: str, n: int, decl: str, outside: str, body: str) -> str:
    """for var in [0, n): `decl`, skip when `outside`, else `body` (statements). One trip:
    no loop, and the skip becomes a guard (`continue` needs a loop)."""
    if n == 1:
        return f"{{\n    const long {var} = 0;\n    {decl}\n    if (!({outside})) {{\n" \
               f"{indent(body, 2)}\n    }}\n}}"
    return f"""for (long {var} = 0; {var} < {n}; ++{var}) {{
    {decl}
    if ({outside}) continue;
{indent(body)}
}}"""


def _taps(x_shape, kernel, dilations, update: str) -> str:
    """The scalar loop over one output's window taps inside the input (origin h0, w0)."""
    h, w = x_shape[2:]
    (kh, kw), (dh, dw) = kernel, dilations
    tap = f"const float v = xp[hh * {w} + ww];\n{update}"
    cols = _skip_loop("j", kw, f"const long ww = w0 + j * {dw};", f"ww < 0 || ww >= {w}", tap)
    return _skip_loop("i", kh, f"const long hh = h0 + i * {dh};", f"hh < 0 || hh >= {h}", cols)


def _planes(nc: int, xsize: int, ysize: int, body: str) -> str:
    """`body` per (image, channel) plane, with xp/yp pointing at the plane's input/output."""
    return indent(parts_loop("nc", nc, f"""const float *__restrict xp = x + nc * {xsize};
float *__restrict yp = y + nc * {ysize};
{body}""", flat=True)[0])


def _pool2d_rvv(kind, x_shape, y_shape, kernel, strides, pads, dilations, cip, init, scalar):
    """RVV pooling: per output row, the interior columns [olo, ohi) (every tap inside the
    input) are strips of vl outputs; each valid window row adds kw vector loads (stride sw);
    the border columns run the scalar per-output code. None when there is no interior."""
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, _ = pads
    olo = -(-pl // sw)
    ohi = min(wo, (w - 1 - (kw - 1) * dw + pl) // sw + 1)
    if ohi <= olo:
        return None
    L = 4   # m8 spills: clang hoists the loads of the unrolled window columns
    vred = vop("vfmax_vv" if kind == "max" else "vfadd_vv", L)
    load = (vle(L, "r + j * " + str(dw)) if sw == 1 else
            vlse(L, "r + j * " + str(dw), sw))
    if kind == "max":
        fin = f"acc = {nan_unless(L, 'ok', 'acc')};\n"
    elif cip:   # interior: the window's width inside the padded input is kw
        window = f"{padded_extent('h0', kh, h + pb, dh)} * {kw}"
        fin = f"acc = {vop('vfdiv_vf', L)}(acc, (float)({window}), vl);\n"
    else:
        fin = f"acc = {vop('vfdiv_vf', L)}(acc, (float)(rows * {kw}), vl);\n"
    count_rows = "" if kind == "max" or cip else "++rows;\n"
    rows_decl = f"{vbool(L)} ok = {all_lanes(L)};\n" if kind == "max" else \
        "" if cip else "long rows = 0;\n"
    # max: lanes that load a NaN leave `ok`, and are made NaN at the end (vfmax drops NaN)
    tap = f"acc = {vred}(acc, {load}, vl);" if kind != "max" else \
        f"const {vt(L)} t = {load};\n{keep_numbers(L, 'ok', 't')}\nacc = {vred}(acc, t, vl);"
    rowsum = f"const float *__restrict r = xp + hh * {w} + (long)o * {sw} - {pl};\n" \
        + count_rows + loop("j", 0, kw, tap, "long")
    taps = _skip_loop("i", kh, f"const long hh = h0 + i * {dh};", f"hh < 0 || hh >= {h}",
                      rowsum)
    strip = f"""const size_t vl = {vsetvl(L, f'{ohi} - o')};
{vt(L)} acc = {vsplat(L, init)};
{rows_decl}{taps}
{fin}{vse(L, f'yp + oh * {wo} + o', 'acc')}"""
    if ohi - olo == 1:      # one interior column: one strip, no loop
        interior = f"{{\n    const size_t o = {olo};\n{indent(strip)}\n}}"
    else:
        interior = f"for (size_t o = {olo}; o < {ohi};) {{\n{indent(strip)}\n    o += vl;\n}}"
    left = loop("ow", 0, olo, scalar, "long") + "\n" if olo > 0 else ""
    right = "\n" + loop("ow", ohi, wo, scalar, "long") if ohi < wo else ""
    row = f"const long h0 = oh * {sh} - {pt};\n{left}{interior}{right}"
    return _planes(n * c, h * w, ho * wo, loop("oh", 0, ho, row, "long", flat=True))


def global_pool(kind: str, x_shape) -> Lowered:
    nc, inner = x_shape[0] * x_shape[1], math.prod(x_shape[2:])
    if kind == "max":
        init, upd, fin = MAX_INIT, max_step("xp[i]"), "acc"
    else:
        init, upd, fin = "0.0f", "acc += xp[i];", f"acc * {flt(1.0 / inner)}"
    planes, split = parts_loop("nc", nc, f"""const float *__restrict xp = x + nc * {inner};
float acc = {init};
{loop("i", 0, inner, upd, "long")}
y[nc] = {fin};""", flat=True)
    code = indent(planes)
    vfin = "red" if kind == "max" else f"red * {flt(1.0 / inner)}"
    red = reduce_rvv(kind, "xp", str(inner), MAX_INIT if kind == "max" else "0.0f",
                     nan=kind == "max")
    rvv = indent(parts_loop("nc", nc, f"""const float *__restrict xp = x + nc * {inner};
{red}
y[nc] = {vfin};""", flat=True)[0])
    return Lowered(Kernel(f"global{kind}pool", XY, guarded(rvv, code), support=header(),
                          spec=make_spec("global_pool", kind=kind, x_shape=x_shape),
                          split=split(nc * inner)))
