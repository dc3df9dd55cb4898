"""Convolution and pooling of any spatial rank (3-D models: video, medical volumes), and the
mapping of 1-D ops onto the 2-D kernels (H = 1) so that 1-D convolutions (speech front ends)
run on the packed GEMM and depthwise paths of conv2d.py.

3-D convolution with a constant weight: explicit im2col and the packed GEMM (conv_nd_gemm);
otherwise, and for pooling, direct loop nests favouring correctness and small code: per output
element the window taps are bounds-checked, the innermost loop along the last kernel axis."""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ....ops.activations import Act, act_expr
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import cdiv, loop, strides_of
from ..gemm.core import core
from ..gemm.spec import Epilogue, Side
from ..gemm.tiling import choose_tile, pack_panels
from ..reduce.pool import MAX_INIT, max_step, padded_extent

# w_panel: panel width of the packed weight (GEMM form, as conv's), None: ONNX layout
declare_spec("conv_nd", ("x_shape", "w_shape", "y_shape", "group", "strides", "pads",
                         "dilations", "bias", "residual", "act", "w_panel"))
declare_spec("pool_nd", ("kind", "x_shape", "y_shape", "kernel", "strides", "pads",
                         "dilations", "count_include_pad"))

XY = (Param("x"), Param("y", False))


def as_2d(x_shape, y_shape, kernel, strides, pads, dilations, w_shape=None):
    """The 2-D (H = 1) form of a 1-D window op: shapes, kernel, strides, pads, dilations."""
    def lift(s):
        return None if s is None else tuple(s[:2]) + (1,) + tuple(s[2:])
    return (lift(x_shape), lift(y_shape), (1,) + tuple(kernel), (1,) + tuple(strides),
            (0, pads[0], 0, pads[1]), (1,) + tuple(dilations), lift(w_shape))


def _origin(nd: int, ys, strides, pads) -> str:
    """Declarations of the window origin b<d> of flat output position `o`, per spatial axis."""
    ost = strides_of(ys)
    lines = []
    for d in range(nd):
        idx = f"o / {ost[d]}" if ost[d] > 1 else "o"
        idx = f"({idx}) % {ys[d]}" if d > 0 else idx
        lines.append(f"const long b{d} = ({idx}) * {strides[d]} - {pads[d]};")
    return "\n".join(lines)


def _taps(nd: int, xs, kernel, dil, inner: str) -> str:
    """Loops over the kernel taps i<d> whose input position p<d> lies inside the input; the
    flat offsets of the tap in the input (xo) and in the kernel (ko) are defined for `inner`."""
    xst, kst = strides_of(xs), strides_of(kernel)
    xo = " + ".join(f"p{d} * {xst[d]}" if xst[d] > 1 else f"p{d}" for d in range(nd))
    ko = " + ".join(f"i{d} * {kst[d]}" if kst[d] > 1 else f"i{d}" for d in range(nd))
    text = f"const long xo = {xo};\nconst long ko = {ko};\n{inner}"
    for d in reversed(range(nd)):
        text = f"""for (long i{d} = 0; i{d} < {kernel[d]}; ++i{d}) {{
    const long p{d} = b{d} + i{d} * {dil[d]};
    if (p{d} < 0 || p{d} >= {xs[d]}) continue;
{indent(text)}
}}"""
    return text


def conv_nd(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations, bias: bool,
            residual: bool, act: Optional[Act]) -> Lowered:
    """Direct convolution, any spatial rank: y = act(conv(x, w) + b[m] + r).
    Params: x, w, [b], [r], y (w in its ONNX layout)."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    n, cin = xs[:2]
    m, cg = ws_[:2]
    nd = len(xs) - 2
    mg = m // group
    xv, yv, kv = math.prod(xs[2:]), math.prod(ys[2:]), math.prod(ws_[2:])
    tap = "acc += xc[xo] * wc[ko];"
    taps = _taps(nd, xs[2:], ws_[2:], dilations, tap)
    init = "b[m]" if bias else "0.0f"
    res = f"acc += r[(n * {m} + m) * {yv} + o];\n" if residual else ""
    image = f"""for (long m = 0; m < {m}; ++m) {{
    const float *__restrict xg = x + (n * {cin} + (m / {mg}) * {cg}) * {xv};
    const float *__restrict wm = w + m * {cg * kv};
    for (long o = 0; o < {yv}; ++o) {{
{indent(_origin(nd, ys[2:], strides, pads), 2)}
        float acc = {init};
        for (long c = 0; c < {cg}; ++c) {{
            const float *__restrict xc = xg + c * {xv};
            const float *__restrict wc = wm + c * {kv};
{indent(taps, 3)}
        }}
{indent(res, 2)}        y[(n * {m} + m) * {yv} + o] = {act_expr(act, "acc")};
    }}
}}"""
    body = loop("n", 0, n, image, "long", flat=True)
    params = tuple([Param("x"), Param("w")] + ([Param("b")] if bias else []) +
                   ([Param("r")] if residual else []) + [Param("y", False)])
    spec = make_spec("conv_nd", x_shape=xs, w_shape=ws_, y_shape=ys, group=group,
                     strides=strides, pads=pads, dilations=dilations, bias=bias,
                     residual=residual, act=act, w_panel=None)
    return Lowered(Kernel(f"conv{nd}d", params, indent(body) + "\n", macs=n * m * yv * cg * kv,
                          spec=spec))


def pool_nd(kind: str, x_shape, y_shape, kernel: Sequence[int], strides, pads, dilations,
            count_include_pad: bool) -> Lowered:
    """Direct max/average pooling, any spatial rank (divisors as ONNX: see pool.pool_terms)."""
    xs, ys = tuple(int(v) for v in x_shape), tuple(int(v) for v in y_shape)
    nd = len(xs) - 2
    nc, xv, yv = xs[0] * xs[1], math.prod(xs[2:]), math.prod(ys[2:])
    if kind == "max":
        init, upd, fin = MAX_INIT, max_step("xc[xo]"), "acc"   # NaN and -inf: see reduce/pool.py
    else:
        init, upd = "0.0f", "acc += xc[xo];\n++cnt;"
        fin = "acc / (float)cnt"
        if count_include_pad:   # the window's taps inside the padded input
            ext = " * ".join(padded_extent(f"b{d}", kernel[d], xs[2 + d] + pads[nd + d],
                                           dilations[d]) for d in range(nd))
            fin = f"acc / (float)({ext})"
    # `ko` is unused by pooling: the void cast keeps -Wextra quiet
    taps = _taps(nd, xs[2:], kernel, dilations, f"(void)ko;\n{upd}")
    cnt = "" if kind == "max" else "long cnt = 0;\n"
    cnt_use = "(void)cnt;\n" if kind != "max" and count_include_pad else ""
    body = f"""for (long nc = 0; nc < {nc}; ++nc) {{
    const float *__restrict xc = x + nc * {xv};
    for (long o = 0; o < {yv}; ++o) {{
{indent(_origin(nd, ys[2:], strides, pads), 2)}
        float acc = {init};
{indent(cnt + taps, 2)}
{indent(cnt_use, 2)}        y[nc * {yv} + o] = {fin};
    }}
}}"""
    spec = make_spec("pool_nd", kind=kind, x_shape=xs, y_shape=ys, kernel=tuple(kernel),
                     strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations),
                     count_include_pad=count_include_pad)
    return Lowered(Kernel(f"{kind}pool{nd}d", XY, indent(body) + "\n", spec=spec))




def conv_nd_gemm(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations,
                 bias: bool, residual: bool, act: Optional[Act]) -> Lowered:
    """conv_nd with a constant weight: per image and group, an explicit im2col of the input
    into the workspace ([cg * taps][positions]), then the packed GEMM with bias, residual and
    activation in its epilogue. The weight is packed at build time (transform of input 1)."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    n, cin = xs[:2]
    m, cg = ws_[:2]
    nd = len(xs) - 2
    mg = m // group
    xv, yv, kv = math.prod(xs[2:]), math.prod(ys[2:]), math.prod(ws_[2:])
    k = cg * kv
    mr, nr = choose_tile(mg, yv, k)
    adds = ((("b", "{m}", None),) if bias else ()) + \
        ((("r", f"{{m}} * {yv} + {{n}}", None),) if residual else ())
    c = core("convnd", mg, yv, k, Side("packed"), Side("strided", si=1, sk=yv),
             Epilogue(ldy=yv, addends=adds, act=act), mr, nr)
    wgrp = cdiv(mg, mr) * mr * k

    def transform(wt: np.ndarray) -> np.ndarray:
        wt = np.asarray(wt, np.float32).reshape(group, mg, k)
        return np.concatenate([pack_panels(wt[g], mr) for g in range(group)])

    kst, xst = strides_of(ws_[2:]), strides_of(xs[2:])
    tap = [f"const long k{d} = kk / {kst[d]} % {ws_[2 + d]};" for d in range(nd)]
    # one tap's row: loops over the output axes (no divisions), `inside` carried outwards-in
    fill = f"*col++ = in{nd - 1} ? xc[{' + '.join(f'p{d} * {xst[d]}' for d in range(nd))}] " \
        ": 0.0f;"
    for d in reversed(range(nd)):
        outer = f"in{d - 1} && " if d else ""
        fill = f"""for (long o{d} = 0; o{d} < {ys[2 + d]}; ++o{d}) {{
    const long p{d} = o{d} * {strides[d]} - {pads[d]} + k{d} * {dilations[d]};
    const int in{d} = {outer}p{d} >= 0 && p{d} < {xs[2 + d]};
{indent(fill)}
}}"""
    cols = f"ws + {c.workspace}" if c.workspace else "ws"
    rest = ("b + g * %d, " % mg if bias else "") + \
        (f"r + (n * {m} + g * {mg}) * {yv}, " if residual else "")
    channel = f"""const float *__restrict xc = x + (n * {cin} + g * {cg} + c) * {xv};
for (long kk = 0; kk < {kv}; ++kk) {{
{indent(chr(10).join(tap))}
    float *__restrict col = cols + (c * {kv} + kk) * {yv};
{indent(fill)}
}}"""
    product = f"{c.name}(w + g * {wgrp}, cols, {rest}y + (n * {m} + g * {mg}) * {yv}, " \
        f"{'ws' if c.workspace else '(float *)0'});"
    per_group = "/* im2col: row (c, tap), column o */\n" + \
        loop("c", 0, cg, channel, "long") + "\n" + product
    body = f"float *__restrict cols = {cols};\n" + \
        loop("n", 0, n, loop("g", 0, group, per_group, "long"), "long", flat=True)
    params = tuple([Param("x"), Param("w")] + ([Param("b")] if bias else []) +
                   ([Param("r")] if residual else []) + [Param("y", False)])
    spec = make_spec("conv_nd", x_shape=xs, w_shape=ws_, y_shape=ys, group=group,
                     strides=strides, pads=pads, dilations=dilations, bias=bias,
                     residual=residual, act=act, w_panel=mr)
    kern = Kernel(f"conv{nd}d", params, indent(body) + "\n", c.workspace + k * yv, c.support,
                  macs=n * m * yv * k, spec=spec)
    return Lowered(kern, {1: transform})
