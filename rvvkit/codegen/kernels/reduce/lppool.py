"""LpPool of any spatial rank (1-D, 2-D, 3-D): y = (sum over the window of |x|^p)^(1/p), the
padding contributing nothing. One output element is a short loop nest over its window taps,
each bounds-checked; the same per-element statements serve the C kernel (a loop over the
outputs) and the CUDA form (one thread per output, cuda/pool_extra.py). p = 1 and p = 2 need
no powf (|x| and x * x, then sqrtf)."""
from __future__ import annotations

import math

from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import strides_of

declare_spec("lppool", ("p", "x_shape", "y_shape", "kernel", "strides", "pads", "dilations"))


def _power(p: float):
    """(C expression of |v|^p, C expression of acc^(1/p))."""
    if p == 1.0:
        return "fabsf(v)", "acc"
    if p == 2.0:
        return "v * v", "sqrtf(acc)"
    return f"powf(fabsf(v), {flt(p)})", f"powf(acc, {flt(1.0 / p)})"


def _times(var: str, k: int) -> str:
    return var if k == 1 else f"{var} * {k}"


def per_output(spec: dict, q: str) -> str:
    """Statements computing y[q] for the flat output index `q` (a long long expression)."""
    xs, ys, kernel = spec["x_shape"], spec["y_shape"], spec["kernel"]
    st, pads, dil = spec["strides"], spec["pads"], spec["dilations"]
    nd = len(xs) - 2
    xv, yv = math.prod(xs[2:]), math.prod(ys[2:])
    ost, xst = strides_of(ys[2:]), strides_of(xs[2:])
    term, fin = _power(float(spec["p"]))
    xo = " + ".join(_times(f"p{d}", xst[d]) for d in range(nd))
    text = f"const float v = x[xc + {xo}];\nacc += {term};"
    for d in reversed(range(nd)):
        pos = _times(f"o{d}", st[d]) + (f" - {pads[d]}" if pads[d] else "") + \
            " + " + _times(f"k{d}", dil[d])
        text = f"""for (long long k{d} = 0; k{d} < {kernel[d]}; ++k{d}) {{
    const long long p{d} = {pos};
    if (p{d} < 0 || p{d} >= {xs[2 + d]}) continue;
{indent(text)}
}}"""
    pos = "\n".join(f"const long long o{d} = {q}{f' / {ost[d]}' if ost[d] > 1 else ''}"
                    f" % {ys[2 + d]};" for d in range(nd))   # q also runs over (n, c)
    return f"""const long long xc = {q} / {yv} * {xv};
{pos}
float acc = 0.0f;
{text}
y[{q}] = {fin};"""


def lppool(p: float, x_shape, y_shape, kernel, strides, pads, dilations) -> Lowered:
    """Params: x, y. Attributes canonical (rvvkit.ops.nn._spatial): pads (begins..., ends...)."""
    xs, ys = tuple(int(v) for v in x_shape), tuple(int(v) for v in y_shape)
    spec = make_spec("lppool", p=float(p), x_shape=xs, y_shape=ys, kernel=tuple(kernel),
                     strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations))
    n = math.prod(ys)
    body = f"for (long long q = 0; q < {n}; ++q) {{\n{indent(per_output(spec, 'q'))}\n}}"
    return Lowered(Kernel(f"lppool{len(xs) - 2}d", (Param("x"), Param("y", False)),
                          indent(body) + "\n", spec=spec))
