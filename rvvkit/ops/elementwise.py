"""Element-wise operators: broadcasting binaries, variadic Sum, Identity/Dropout, and the internal
per-channel affine op that BatchNormalization and constant Mul/Add become. Activations have
their own table (activations.py)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as dtype_table
from .registry import ANY, F32, bad, broadcast_shapes, const_input, in_shape, register, same_as_input

BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


def _binary_infer(node, g):
    if len(node.inputs) != 2:
        raise bad(node, "expects two inputs")
    shapes = [in_shape(node, g, i) for i in range(2)]
    dtype = np.result_type(g.t(node.inputs[0]).dtype, g.t(node.inputs[1]).dtype)
    return [(broadcast_shapes(node, shapes), dtype)]


def _binary_eval(node, xs):
    a, b = xs
    if node.op == "Div" and np.issubdtype(a.dtype, np.integer):
        # integer Div truncates toward zero (C, onnxruntime); x / 0 is 0 (the kernel guards)
        with np.errstate(all="ignore"):
            q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
        out = np.where(b == 0, 0, np.where((a < 0) != (b < 0), -q, q))
    else:
        out = BINARY[node.op](a, b)
    return [np.asarray(out).astype(np.result_type(a, b))]


# the integer forms are the typed element-wise kernel (codegen/lower/logic.py)
NUMERIC = ("float32", "int64", "int32", "int8", "uint8")

for _op in BINARY:
    register(_op, _binary_eval, act_epilogue=True, dtypes=NUMERIC)(_binary_infer)


@register("Sum", lambda node, xs: [np.asarray(sum(xs[1:], xs[0]))], act_epilogue=True)
def _sum(node, g):
    shapes = [in_shape(node, g, i) for i in range(len(node.inputs))]
    return [(broadcast_shapes(node, shapes), g.t(node.inputs[0]).dtype)]


# a copy of bytes: float16/float64 too (the planner copies a constant graph output out of the
# weights with one, and a float16 constant output stays float16)
register("Identity", lambda node, xs: [xs[0]], dtypes=dtype_table.NAMES)(same_as_input)


def _dropout_eval(node, xs):
    return [xs[0], np.ones(xs[0].shape, np.bool_)][:len(node.outputs)]


@register("Dropout", _dropout_eval, dtypes=ANY)
def _dropout(node, g):
    # Inference only: Dropout is the identity and its optional mask is all true.
    training = const_input(node, g, 2, "training_mode")
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        raise bad(node, "training_mode=true is not supported (inference only)")
    t = g.t(node.inputs[0])
    return [(t.shape, t.dtype), (t.shape, np.dtype(np.bool_))][:len(node.outputs)]


def _affine_eval(node, xs):
    x, s, t = xs
    shape = [1] * x.ndim
    shape[1] = -1
    return [(x * s.reshape(shape) + t.reshape(shape)).astype(x.dtype)]


# rvvkit-internal (passes/simplify.py makes it; no model may name it): a qualified name that
# no ONNX op type can collide with.
CHANNEL_AFFINE = "rvvkit.ChannelAffine"


@register(CHANNEL_AFFINE, _affine_eval, act_epilogue=True)
def _affine(node, g):
    """y[n, c, ...] = x[n, c, ...] * scale[c] + shift[c]; inputs x, scale, shift."""
    return same_as_input(node, g)


def _bn_eval(node, xs):
    x, scale, bias, mean, var = xs[:5]
    s, t = bn_affine(scale, bias, mean, var, node.attrs.get("epsilon", 1e-5))
    return _affine_eval(node, [x, s, t])


def bn_affine(scale, bias, mean, var, eps):
    """BatchNormalization (inference) as y = x * s + t, computed in float64 then rounded."""
    s = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    t = bias.astype(np.float64) - mean.astype(np.float64) * s
    return s.astype(np.float32), t.astype(np.float32)


@register("BatchNormalization", _bn_eval, without_kernel="becomes rvvkit.ChannelAffine "
         "(passes/simplify.py to_affine) unless folded")
def _bn(node, g):
    if len([o for o in node.outputs if o]) > 1:
        raise bad(node, "training-mode BatchNormalization (extra outputs) is not supported")
    if node.attrs.get("training_mode", 0):
        raise bad(node, "training_mode=1 is not supported")
    x = in_shape(node, g, 0)
    if len(x) < 2:
        raise bad(node, f"input rank {len(x)} < 2")
    for i in range(1, 5):
        if not g.is_const(node.inputs[i]):
            raise bad(node, f"parameter {node.inputs[i]!r} must be a constant")
        if g.t(node.inputs[i]).size != x[1]:
            raise bad(node, f"parameter {node.inputs[i]!r} has {g.t(node.inputs[i]).size} "
                            f"elements, expected {x[1]} (channels)")
    return [(x, F32)]

