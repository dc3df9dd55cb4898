"""ConvTranspose (1-D, 2-D, 3-D). With a constant weight (the usual case): a packed GEMM per
image and group, then col2im (conv_transpose_gemm); otherwise a direct scatter: every input
element adds its products with the kernel taps into the output window it spreads over (taps
falling into the cropped padding are skipped). Output initialised with the bias.

The CUDA form (cuda/sequence.py) is a parallel gather from the spec, for either C form."""
from __future__ import annotations

import math

import numpy as np

from ...cfmt import indent
from ...kernel import Kernel, Lowered, declare_spec, make_spec
from ...loops import cdiv, loop
from .conv2d import _params as conv_params
from .conv3d import _origin, _taps
from ..gemm.core import core
from ..gemm.spec import Epilogue, Side
from ..gemm.tiling import choose_tile, pack_panels

# w_panel: the panel width of the packed weight (GEMM form; see packed_w_index), or None
declare_spec("conv_transpose", ("x_shape", "w_shape", "y_shape", "group", "strides", "pads",
                                "dilations", "bias", "w_panel"))


def packed_w_index(w_shape, group: int, pw: int, c: str, mo: str, kk: str) -> str:
    """C expression: where the GEMM form stores ONNX weight element w[c][mo][kk] (c the global
    input channel, kk the flat tap): per group the matrix A[mo * taps + kk][c - g*cg] packed
    into panels of pw rows (pack_panels)."""
    cg, mg, kv = w_shape[0] // group, w_shape[1], math.prod(w_shape[2:])
    rows = mg * kv
    wgrp = cdiv(rows, pw) * pw * cg
    row = f"({mo} * {kv} + {kk})"
    return (f"({c} / {cg}) * {wgrp} + ({row} / {pw}) * {cg * pw} + ({c} % {cg}) * {pw} + "
            f"{row} % {pw}")


def conv_transpose(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations,
                   bias: bool) -> Lowered:
    """y[n, g*mg+m, i*s - pad + k*d] += x[n, c, i] * w[c, m, k]; params x, w, [b], y."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    n, cin = xs[:2]
    mg, m = ws_[1], ys[1]
    nd = len(xs) - 2
    cg = cin // group
    xv, yv, kv = math.prod(xs[2:]), math.prod(ys[2:]), math.prod(ws_[2:])
    # taps bounded by the output extent; xo is then the flat output offset of the tap
    taps = _taps(nd, ys[2:], ws_[2:], dilations, "yc[xo] += xval * wc[ko];")
    init = "b[mm]" if bias else "0.0f"
    image = f"""for (long mm = 0; mm < {m}; ++mm) {{
    for (long o = 0; o < {yv}; ++o) y[(n * {m} + mm) * {yv} + o] = {init};
}}
for (long c = 0; c < {cin}; ++c) {{
    const float *__restrict xc = x + (n * {cin} + c) * {xv};
    for (long mo = 0; mo < {mg}; ++mo) {{
        const float *__restrict wc = w + (c * {mg} + mo) * {kv};
        float *__restrict yc = y + (n * {m} + (c / {cg}) * {mg} + mo) * {yv};
        for (long o = 0; o < {xv}; ++o) {{
            const float xval = xc[o];
{indent(_origin(nd, xs[2:], strides, pads), 3)}
{indent(taps, 3)}
        }}
    }}
}}"""
    body = loop("n", 0, n, image, "long", flat=True)
    params = conv_params(bias, residual=False)
    spec = make_spec("conv_transpose", x_shape=xs, w_shape=ws_, y_shape=ys, group=group,
                     strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations),
                     bias=bias, w_panel=None)
    return Lowered(Kernel(f"convtranspose{nd}d", params, indent(body) + "\n",
                          macs=n * cin * xv * mg * kv, spec=spec))


def conv_transpose_gemm(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations,
                        bias: bool) -> Lowered:
    """ConvTranspose with a constant weight: per image and group, the packed GEMM
    COLS[(m, tap)][i] = sum_c W[c][m, tap] X[c][i] (the weight transposed and packed at build
    time, transform of input 1), then col2im adds each column entry into the output position
    its tap reaches (skipping the cropped padding). Same params and spec as conv_transpose."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    n, cin = xs[:2]
    mg, m = ws_[1], ys[1]
    nd = len(xs) - 2
    cg = cin // group
    xv, yv, kv = math.prod(xs[2:]), math.prod(ys[2:]), math.prod(ws_[2:])
    rows = mg * kv
    mr, nr = choose_tile(rows, xv, cg)
    c = core("convt", rows, xv, cg, Side("packed"), Side("strided", si=1, sk=xv),
             Epilogue(ldy=xv), mr, nr)
    wgrp = cdiv(rows, mr) * mr * cg                # packed floats per group

    def transform(wt: np.ndarray) -> np.ndarray:
        wt = np.asarray(wt, np.float32).reshape(group, cg, rows)
        return np.concatenate([pack_panels(wt[g].T, mr) for g in range(group)])

    # col2im of one output channel: origin of input position o, taps bounded by the output
    taps = _taps(nd, ys[2:], ws_[2:], dilations, f"yc[xo] += cm[ko * {xv} + o];")
    init = "b[g * " + str(mg) + " + mo]" if bias else "0.0f"
    cols = f"ws + {c.workspace}" if c.workspace else "ws"
    core_ws = "ws" if c.workspace else "(float *)0"
    group_body = f"""{c.name}(w + g * {wgrp}, x + (n * {cin} + g * {cg}) * {xv}, cols, {core_ws});
for (long mo = 0; mo < {mg}; ++mo) {{
    float *__restrict yc = y + (n * {m} + g * {mg} + mo) * {yv};
    const float *__restrict cm = cols + mo * {kv * xv};
    for (long o = 0; o < {yv}; ++o) yc[o] = {init};
    for (long o = 0; o < {xv}; ++o) {{
{indent(_origin(nd, xs[2:], strides, pads), 2)}
{indent(taps, 2)}
    }}
}}"""
    body = f"float *__restrict cols = {cols};\n" + \
        loop("n", 0, n, loop("g", 0, group, group_body, "long"), "long", flat=True)
    params = conv_params(bias, residual=False)
    spec = make_spec("conv_transpose", x_shape=xs, w_shape=ws_, y_shape=ys, group=group,
                     strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations),
                     bias=bias, w_panel=mr)
    kern = Kernel(f"convtranspose{nd}d", params, indent(body) + "\n",
                  c.workspace + rows * xv, c.support, macs=n * cin * xv * mg * kv, spec=spec)
    return Lowered(kern, {1: transform})
