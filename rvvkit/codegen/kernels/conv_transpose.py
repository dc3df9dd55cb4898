"""ConvTranspose (1-D, 2-D, 3-D) as a direct scatter: every input element adds its products
with the kernel taps into the output window it spreads over (taps falling into the cropped
padding are skipped). Output initialised with the bias."""
from __future__ import annotations

import math

from ..cfmt import indent
from ..kernel import Kernel, Lowered, Param, declare_spec, make_spec
from .conv3d import _origin, _taps

declare_spec("conv_transpose", ("x_shape", "w_shape", "y_shape", "group", "strides", "pads",
                                "dilations", "bias"))


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
    body = f"""for (long n = 0; n < {n}; ++n) {{
    for (long mm = 0; mm < {m}; ++mm) {{
        for (long o = 0; o < {yv}; ++o) y[(n * {m} + mm) * {yv} + o] = {init};
    }}
    for (long c = 0; c < {cin}; ++c) {{
        const float *__restrict xc = x + (n * {cin} + c) * {xv};
        for (long mo = 0; mo < {mg}; ++mo) {{
            const float *__restrict wc = w + (c * {mg} + mo) * {kv};
            float *__restrict yc = y + (n * {m} + (c / {cg}) * {mg} + mo) * {yv};
            for (long o = 0; o < {xv}; ++o) {{
                const float xval = xc[o];
{indent(_origin(nd, xs[2:], strides, pads), 4)}
{indent(taps, 4)}
            }}
        }}
    }}
}}"""
    params = tuple([Param("x"), Param("w")] + ([Param("b")] if bias else []) +
                   [Param("y", False)])
    spec = make_spec("conv_transpose", x_shape=xs, w_shape=ws_, y_shape=ys, group=group,
                     strides=tuple(strides), pads=tuple(pads), dilations=tuple(dilations),
                     bias=bias)
    return Lowered(Kernel(f"convtranspose{nd}d", params, indent(body) + "\n",
                          macs=n * cin * xv * mg * kv, spec=spec))
