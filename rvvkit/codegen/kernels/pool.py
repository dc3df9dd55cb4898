"""Pooling, LRN and softmax kernels."""
from __future__ import annotations

import math
from typing import Sequence

from ..cfmt import flt
from ..kernel import Kernel, Lowered, Param

XY = (Param("x"), Param("y", const=False))


def pool2d(kind: str, x_shape, y_shape, kernel, strides, pads, dilations,
           count_include_pad: bool = False) -> Lowered:
    """Max or average pooling over NCHW. Average divisors follow ONNX: the window clipped to
    the padded input when padding counts, else the number of real input elements."""
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    if kind == "max":
        init, update = "-INFINITY", "acc = v > acc ? v : acc;"
        finish = "acc"
    else:
        init, update = "0.0f", "acc += v; ++cnt;"
        if count_include_pad:
            finish = (f"acc / (float)((({f'h0 + {kh} < {h + pb} ? h0 + {kh} : {h + pb}'}) - h0)"
                      f" * (({f'w0 + {kw} < {w + pr} ? w0 + {kw} : {w + pr}'}) - w0))")
        else:
            finish = "acc / (float)cnt"
    count_decl = "long cnt = 0;" if kind != "max" else ""
    count_use = "(void)cnt;" if kind != "max" and count_include_pad else ""
    code = f"""    for (long nc = 0; nc < {n * c}; ++nc) {{
        const float *__restrict xp = x + nc * {h * w};
        float *__restrict yp = y + nc * {ho * wo};
        for (long oh = 0; oh < {ho}; ++oh) {{
            const long h0 = oh * {sh} - {pt};
            for (long ow = 0; ow < {wo}; ++ow) {{
                const long w0 = ow * {sw} - {pl};
                float acc = {init};
                {count_decl}
                for (long i = 0; i < {kh}; ++i) {{
                    const long hh = h0 + i * {dh};
                    if (hh < 0 || hh >= {h}) continue;
                    for (long j = 0; j < {kw}; ++j) {{
                        const long ww = w0 + j * {dw};
                        if (ww < 0 || ww >= {w}) continue;
                        const float v = xp[hh * {w} + ww];
                        {update}
                    }}
                }}
                {count_use}
                yp[oh * {wo} + ow] = {finish};
            }}
        }}
    }}"""
    return Lowered(Kernel(f"{kind}pool", XY, code))


def global_pool(kind: str, x_shape) -> Lowered:
    nc, inner = x_shape[0] * x_shape[1], math.prod(x_shape[2:])
    if kind == "max":
        init, upd, fin = "-INFINITY", "acc = xp[i] > acc ? xp[i] : acc;", "acc"
    else:
        init, upd, fin = "0.0f", "acc += xp[i];", f"acc * {flt(1.0 / inner)}"
    code = f"""    for (long nc = 0; nc < {nc}; ++nc) {{
        const float *__restrict xp = x + nc * {inner};
        float acc = {init};
        for (long i = 0; i < {inner}; ++i) {{
            {upd}
        }}
        y[nc] = {fin};
    }}"""
    return Lowered(Kernel(f"global{kind}pool", XY, code))


def lrn(x_shape, size: int, alpha: float, beta: float, bias: float) -> Lowered:
    n, c = x_shape[:2]
    inner = math.prod(x_shape[2:])
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    code = f"""    for (long b = 0; b < {n}; ++b) {{
        for (long ch = 0; ch < {c}; ++ch) {{
            const long j0 = ch - {lo} < 0 ? 0 : ch - {lo};
            const long j1 = ch + {hi} > {c - 1} ? {c - 1} : ch + {hi};
            for (long i = 0; i < {inner}; ++i) ws[i] = 0.0f;
            for (long j = j0; j <= j1; ++j) {{
                const float *__restrict xp = x + (b * {c} + j) * {inner};
                for (long i = 0; i < {inner}; ++i) ws[i] += xp[i] * xp[i];
            }}
            const float *__restrict xc = x + (b * {c} + ch) * {inner};
            float *__restrict yc = y + (b * {c} + ch) * {inner};
            for (long i = 0; i < {inner}; ++i)
                yc[i] = xc[i] * powf({flt(bias)} + {flt(alpha / size)} * ws[i], {flt(-beta)});
        }}
    }}"""
    return Lowered(Kernel("lrn", XY, code, workspace=inner))


def softmax(shape: Sequence[int], axis: int, coerce: bool, log: bool = False) -> Lowered:
    """Softmax over one axis (or, pre-opset-13, over all axes from `axis` on)."""
    outer = math.prod(shape[:axis])
    if coerce:
        n, inner = math.prod(shape[axis:]), 1
    else:
        n, inner = shape[axis], math.prod(shape[axis + 1:])
    out = "v - m - logf(s)" if log else "expf(v - m) * r"
    code = f"""    for (long o = 0; o < {outer}; ++o) {{
        for (long i = 0; i < {inner}; ++i) {{
            const float *__restrict xp = x + o * {n * inner} + i;
            float *__restrict yp = y + o * {n * inner} + i;
            float m = -INFINITY, s = 0.0f;
            for (long k = 0; k < {n}; ++k) m = xp[k * {inner}] > m ? xp[k * {inner}] : m;
            for (long k = 0; k < {n}; ++k) s += expf(xp[k * {inner}] - m);
            const float r = 1.0f / s;
            (void)r;
            for (long k = 0; k < {n}; ++k) {{
                const float v = xp[k * {inner}];
                yp[k * {inner}] = {out};
            }}
        }}
    }}"""
    return Lowered(Kernel("logsoftmax" if log else "softmax", XY, code))
