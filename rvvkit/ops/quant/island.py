"""rvvkit.QDQAdd: the float island DQ(a), DQ(b) -> Add/Sum [-> Relu] -> Q in one pass.
onnxruntime's QOperator models keep such joins in float: resnet50's residual stream runs as
DequantizeLinear, Sum, Relu and QuantizeLinear nodes, the float sum feeding both the Q and the
next block's Sum. onnxruntime does not fuse them into QLinearAdd, so neither does rvvkit: the
kernel does the same float operations in the same order, each rounded on its own, and so
writes onnxruntime's integers (and floats) exactly:

    f = relu?(da + db)     dx = (float)(x - zx) * sx for a quantized operand, x for a float one
    y = Q(f, sy, zy)

Inputs: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp (QLinearAdd's order; a float operand
has "" for its scale and zero point), a and b of one shape, at least one of them quantized.
Outputs: y, and f when the float value has other readers. attrs["relu"] 0/1.
passes/qdq.py writes it."""
from __future__ import annotations

import numpy as np

from . import numerics as qm
from .linear import Q_TYPES, _scalar
from ..registry import F32, bad, in_shape, opt_input, register

QDQ_ADD = "rvvkit.QDQAdd"


def _value(node, xs, i: int) -> np.ndarray:
    q = node.attrs["q"]
    return qm.dequantize(xs[i], q[i + 1], q[i + 2]) if i + 1 in q else np.asarray(xs[i], F32)


def _eval(node, xs):
    f = (_value(node, xs, 0) + _value(node, xs, 3)).astype(F32)
    if node.attrs.get("relu"):
        f = np.maximum(f, F32(0))
    q = node.attrs["q"]
    return [qm.quantize(f, q[6], q[7], q[7].dtype), f][:len(node.outputs)]


@register(QDQ_ADD, _eval, dtypes=("float32", "int8", "uint8"))
def _infer(node, g):
    shape = in_shape(node, g, 0)
    if in_shape(node, g, 3) != shape:
        raise bad(node, "a and b must have one shape")
    q = {}
    for i in (0, 3):
        dt = g.t(node.inputs[i]).dtype
        if dt.name in Q_TYPES:
            q[i + 1] = _scalar(node, g, i + 1, "scale")
            q[i + 2] = _scalar(node, g, i + 2, "zero point", dt)
        elif dt != F32 or opt_input(node, i + 1):
            raise bad(node, f"input {i}: a quantized operand with its scale, or float32 alone")
    if len(q) == 0:
        raise bad(node, "at least one operand must be quantized")
    q[6], q[7] = _scalar(node, g, 6, "y_scale"), _scalar(node, g, 7, "y_zero_point")
    node.attrs["q"] = q
    return [(shape, q[7].dtype), (shape, F32)][:len(node.outputs)]
