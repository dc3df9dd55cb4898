"""Kernels of the quantized pooling family: QLinearGlobalAveragePool, QLinearAveragePool,
QLinearSoftmax, and max pooling on int8/uint8 tensors. Numerics: rvvkit/ops/quant/numerics.py and
the ops' docstrings (onnxruntime's order of operations: float sums stay sequential, in the
order onnxruntime adds, so they are never reassociated).

Threads: split kernels (codegen/parallel.py) over parts of whole planes (pools) or rows
(softmax), about BLOCK operations each (quant_ew.part_range)."""
from __future__ import annotations

import math
from typing import Tuple

from ....ops.quant.numerics import qrange
from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop
from .elementwise import part_range, rint_int, round_sat, rows_per_part, table_literal, void

declare_spec("qgap", ("x_shape", "dtype", "x_zp", "y_zp", "scale"))
declare_spec("qavgpool", ("x_shape", "y_shape", "kernel", "strides", "pads",
                          "count_include_pad", "dtype", "table", "y_scale", "y_zp"))
declare_spec("qsoftmax", ("outer", "n", "inner", "dtype", "table", "y_mult", "y_zp"))
declare_spec("maxpool_int", ("x_shape", "y_shape", "kernel", "strides", "pads", "dilations",
                             "dtype"))


def _ct(dtype: str) -> str:
    from .... import dtypes
    return dtypes.TABLE[dtype].ctype


def gap_finish(acc: str, x_zp: int, inner: int, scale: float, y_zp: int, dtype: str) -> str:
    """C statements: float `v` (then rounded, saturated) from the int32 plane sum `acc`."""
    lo, hi = qrange(dtype)
    return (f"float v = (float)({acc} - {x_zp * inner}) * {flt(scale)};\n"
            f"{round_sat('v', lo - y_zp, hi - y_zp)}")


def qgap(x_shape, dtype: str, x_zp: int, y_zp: int, scale: float,
         params: Tuple[Param, ...]) -> Lowered:
    """Per (n, c) plane: the integer sum, minus zp * size, times x_scale / (y_scale * size),
    rounded and saturated, plus y_zp."""
    nc, inner = x_shape[0] * x_shape[1], math.prod(x_shape[2:])
    body = f"""const {_ct(dtype)} *__restrict xp = x + nc * {inner};
int acc = 0;
{loop("i", 0, inner, "acc += xp[i];", "long")}
{gap_finish("acc", x_zp, inner, scale, y_zp, dtype)}
y[nc] = ({_ct(dtype)})(q + {y_zp});"""
    planes, split = part_range("nc", nc, rows_per_part(inner), body, flat=True)
    code = void(params, ("x", "y")) + indent(planes)
    spec = make_spec("qgap", x_shape=x_shape, dtype=dtype, x_zp=x_zp, y_zp=y_zp, scale=scale)
    return Lowered(Kernel(f"qgap_{dtype}", params, code, spec=spec, split=split(nc * inner)))


def avgpool_window(spec: dict, ty: str = "long") -> str:
    """C statements for one output (oh, ow) of a plane `xp` into `out`: the dequantized taps
    summed row by row (the order onnxruntime adds in), then the quantized average."""
    n, c, h, w = spec["x_shape"]
    kh, kw = spec["kernel"]
    sh, sw = spec["strides"]
    pt, pl = spec["pads"][:2]
    lo, hi = qrange(spec["dtype"])
    count = f"{kh * kw}" if spec["count_include_pad"] else "(h1 - h0) * (w1 - w0)"
    return f"""const {ty} hs = oh * {sh} - {pt}, ws0 = ow * {sw} - {pl};
const {ty} h0 = hs > 0 ? hs : 0, h1 = hs + {kh} < {h} ? hs + {kh} : {h};
const {ty} w0 = ws0 > 0 ? ws0 : 0, w1 = ws0 + {kw} < {w} ? ws0 + {kw} : {w};
float acc = 0.0f;
for ({ty} hh = h0; hh < h1; ++hh)
    for ({ty} ww = w0; ww < w1; ++ww) acc += tab[(uint8_t)xp[hh * {w} + ww]];
float v = acc / (float)({count}) / {flt(spec['y_scale'])} + {flt(spec['y_zp'])};
{round_sat('v', lo, hi)}"""


def qavgpool(x_shape, y_shape, kernel, strides, pads, cip: bool, dtype: str, table,
             y_scale: float, y_zp: int, params: Tuple[Param, ...]) -> Lowered:
    spec = make_spec("qavgpool", x_shape=x_shape, y_shape=y_shape, kernel=kernel,
                     strides=strides, pads=pads, count_include_pad=cip, dtype=dtype,
                     table=tuple(float(v) for v in table), y_scale=y_scale, y_zp=y_zp)
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    ct = _ct(dtype)
    plane = f"""const {ct} *__restrict xp = x + nc * {h * w};
{ct} *__restrict yp = y + nc * {ho * wo};
""" + loop("oh", 0, ho, loop("ow", 0, wo, avgpool_window(spec) +
                             f"\nyp[oh * {wo} + ow] = ({ct})q;", "long"), "long")
    ops = ho * wo * kernel[0] * kernel[1]
    planes, split = part_range("nc", n * c, rows_per_part(ops), plane, flat=True)
    code = indent(table_literal(spec["table"], "float", "tab")) + "\n" + \
        void(params, ("x", "y")) + indent(planes)
    return Lowered(Kernel(f"qavgpool_{dtype}", params, code, spec=spec,
                          split=split(n * c * ops)))


def softmax_row(spec: dict, ty: str = "long") -> str:
    """C statements for one row (pointer xp / yp, element k at k * inner): the integer max,
    the sum of table[255 - max + x] in order, then each output."""
    n, inner, ct = spec["n"], spec["inner"], _ct(spec["dtype"])
    st = "" if inner == 1 else f" * {inner}"
    return f"""int mx = xp[0];
for ({ty} k = 1; k < {n}; ++k) mx = xp[k{st}] > mx ? xp[k{st}] : mx;
const float *__restrict e = tab + 255 - mx;
float sum = 0.0f;
for ({ty} k = 0; k < {n}; ++k) sum += e[xp[k{st}]];
for ({ty} k = 0; k < {n}; ++k) {{
    float v = e[xp[k{st}]] * {flt(spec['y_mult'])} / sum;
    v = v < 1024.0f ? v : 1024.0f;
{indent(rint_int("v", "r"))}
    const int q = r + {spec['y_zp']};
    yp[k{st}] = ({ct})(uint8_t)(q < 255 ? q : 255);
}}"""


def qsoftmax(outer: int, n: int, inner: int, dtype: str, table, y_mult: float, y_zp: int,
             params: Tuple[Param, ...]) -> Lowered:
    """onnxruntime's QLinearSoftmax: e^x from a table; outputs capped at 255 and stored as
    their low byte (what onnxruntime does for int8 too)."""
    spec = make_spec("qsoftmax", outer=outer, n=n, inner=inner, dtype=dtype,
                     table=tuple(float(v) for v in table), y_mult=y_mult, y_zp=y_zp)
    ct = _ct(dtype)
    row = softmax_row(spec)   # int8 and uint8 alike: entry k is for x - max = k - 255
    body = f"""const long base = (r / {inner}) * {n * inner} + r % {inner};
const {ct} *__restrict xp = x + base;
{ct} *__restrict yp = y + base;
{row}"""
    rows, split = part_range("r", outer * inner, rows_per_part(3 * n), body, flat=True)
    code = indent(table_literal(spec["table"], "float", "tab")) + "\n" + \
        void(params, ("x", "y")) + indent(rows)
    return Lowered(Kernel(f"qsoftmax_{dtype}", params, code, spec=spec,
                          split=split(outer * inner * n * 3)))


def maxpool_window(spec: dict, ty: str = "long") -> str:
    """C statements: `acc` = the max of one output's taps inside the input (origin h0, w0)."""
    n, c, h, w = spec["x_shape"]
    kh, kw = spec["kernel"]
    dh, dw = spec["dilations"]
    lo, _ = qrange(spec["dtype"])
    return f"""int acc = {lo};
for ({ty} ki = 0; ki < {kh}; ++ki) {{
    const {ty} hh = h0 + ki * {dh};
    if (hh < 0 || hh >= {h}) continue;
    for ({ty} kj = 0; kj < {kw}; ++kj) {{
        const {ty} ww = w0 + kj * {dw};
        if (ww < 0 || ww >= {w}) continue;
        const int v = xp[hh * {w} + ww];
        acc = v > acc ? v : acc;
    }}
}}"""


def maxpool_int(x_shape, y_shape, kernel, strides, pads, dilations, dtype: str) -> Lowered:
    """Per output row, tap by tap: the outputs whose tap lies inside the input are a range
    known from the tap alone, so each tap is one max over a (strided) run of the input row,
    which compilers vectorise (the window-at-a-time form with bounds checks did not)."""
    spec = make_spec("maxpool_int", x_shape=x_shape, y_shape=y_shape, kernel=kernel,
                     strides=strides, pads=pads, dilations=dilations, dtype=dtype)
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    kh, kw = kernel
    (sh, sw), (dh, dw) = strides, dilations
    ct = _ct(dtype)
    lo, _ = qrange(dtype)
    plane = f"""const {ct} *__restrict xp = x + nc * {h * w};
for (long oh = 0; oh < {ho}; ++oh) {{
    {ct} *__restrict yr = y + nc * {ho * wo} + oh * {wo};
    for (long ow = 0; ow < {wo}; ++ow) yr[ow] = ({ct}){lo};
    for (long ki = 0; ki < {kh}; ++ki) {{
        const long hh = oh * {sh} - {pads[0]} + ki * {dh};
        if (hh < 0 || hh >= {h}) continue;
        const {ct} *__restrict xr = xp + hh * {w};
        for (long kj = 0; kj < {kw}; ++kj) {{
            const long off = kj * {dw} - {pads[1]};   /* input column of ow: ow * {sw} + off */
            long a = off < 0 ? (-off + {sw - 1}) / {sw} : 0;
            long b = ({w} - off + {sw - 1}) / {sw};
            b = b > {wo} ? {wo} : b;
            for (long ow = a; ow < b; ++ow) {{
                const {ct} v = xr[ow * {sw} + off];
                yr[ow] = v > yr[ow] ? v : yr[ow];
            }}
        }}
    }}
}}"""
    ops = ho * wo * kh * kw
    planes, split = part_range("nc", n * c, rows_per_part(ops), plane)
    params = (Param("x", dtype=dtype), Param("y", const=False, dtype=dtype))
    return Lowered(Kernel(f"maxpool_{dtype}", params, indent(planes), spec=spec,
                          split=split(n * c * ops)))


__all__ = ["qgap", "qavgpool", "qsoftmax", "maxpool_int", "avgpool_window", "softmax_row",
           "maxpool_window", "gap_finish"]
