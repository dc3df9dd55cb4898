"""The two integer kernels every quantized convolution and matrix product becomes
(passes/quant.py writes them; codegen/lower/quant.py lowers them):

    rvvkit.QConv   (x, w, bias, [scale], [w_zp])   NCHW 1-D/2-D convolution
    rvvkit.QMatMul (a, b, bias, [scale], [b_zp])   a [..., M, K] x b [(batch,) K, N]

Both compute in the signed domain: a uint8 run-time operand is read as int8 by flipping its top
bit (x ^ 0x80 = x - 128) and its zero point shifted by 128 to match, so one int8 x int8 -> int32
kernel serves uint8 and int8 models alike. Constant operands are stored already shifted.

    total = sum_k (x' - x_zp')(w' - w_zp') + bias
          = sum_k x'w' - x_zp' * rowsum(w') - w_zp' * colsum(x') + K x_zp' w_zp' + bias

The terms that depend only on constants are folded into `bias` at build time; a run-time
column sum is computed only when some w_zp' is not 0 (`w_zp` input present).

Outputs: attrs["out"] is "int8"/"uint8" (requantised with `scale`, per output channel, then
saturated to [lo, hi] — a fused Relu narrows it), "int32" (the total) or "float32"
(float(total) * scale)."""
from __future__ import annotations

import numpy as np

from ..registry import bad, in_shape, register

QCONV = "rvvkit.QConv"
QMATMUL = "rvvkit.QMatMul"
OUT_TYPES = ("int8", "uint8", "int32", "float32")


def _out(node):
    out = node.attrs["out"]
    if out not in OUT_TYPES:
        raise bad(node, f"output type {out!r}")
    return np.dtype(out)


@register(QCONV, dtypes=("int8", "uint8", "int32", "float32"))
def _qconv(node, g):
    x, w = in_shape(node, g, 0), in_shape(node, g, 1)
    a = node.attrs
    shape = (x[0], w[0]) + tuple(a["out_spatial"])
    return [(shape, _out(node))]


@register(QMATMUL, dtypes=("int8", "uint8", "int32", "float32"))
def _qmatmul(node, g):
    a, b = in_shape(node, g, 0), in_shape(node, g, 1)
    batch = tuple(a[:-2]) if len(a) >= len(b) else tuple(b[:-2])
    return [(batch + (a[-2], b[-1]), _out(node))]
