"""Element-wise operators: broadcasting binaries, variadic Sum, activations, and the internal
per-channel affine op that BatchNormalization and constant Mul/Add become."""
from __future__ import annotations

import numpy as np

from .registry import F32, bad, broadcast_shapes, const_input, in_shape, register, same_as_input

BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


def _binary_infer(node, g):
    if len(node.inputs) != 2:
        raise bad(node, "expects two inputs")
    shapes = [in_shape(node, g, i) for i in range(2)]
    dtype = np.result_type(g.t(node.inputs[0]).dtype, g.t(node.inputs[1]).dtype)
    return [(broadcast_shapes(node, shapes), dtype)]


def _binary_eval(node, xs):
    a, b = xs
    out = BINARY[node.op](a, b)
    if node.op == "Div" and np.issubdtype(a.dtype, np.integer):
        out = np.floor_divide(a, b)
    return [np.asarray(out).astype(np.result_type(a, b))]


for _op in BINARY:
    register(_op, _binary_eval)(_binary_infer)


@register("Sum", lambda node, xs: [np.asarray(sum(xs[1:], xs[0]))])
def _sum(node, g):
    shapes = [in_shape(node, g, i) for i in range(len(node.inputs))]
    return [(broadcast_shapes(node, shapes), g.t(node.inputs[0]).dtype)]


def _clip_bounds(node, g):
    """Clip's bounds are attributes before opset 11 and optional inputs after."""
    if "min" in node.attrs or "max" in node.attrs or len(node.inputs) == 1:
        lo = node.attrs.get("min", float("-inf"))
        hi = node.attrs.get("max", float("inf"))
    else:
        lo_v = const_input(node, g, 1, "min")
        hi_v = const_input(node, g, 2, "max")
        lo = float(lo_v) if lo_v is not None else float("-inf")
        hi = float(hi_v) if hi_v is not None else float("inf")
    # y = min(max(x, lo), hi): when lo > hi every value becomes hi, which is what (hi, hi) does
    # in every lowering (the fused epilogue tests `< lo` first).
    return min(float(lo), float(hi)), float(hi)


@register("Clip", lambda node, xs: [np.clip(xs[0], *node.attrs["bounds"]).astype(xs[0].dtype)])
def _clip(node, g):
    node.attrs["bounds"] = _clip_bounds(node, g)
    return same_as_input(node, g)


def _leaky(node, xs):
    a = node.attrs.get("alpha", 0.01)
    return [np.where(xs[0] >= 0, xs[0], xs[0] * a).astype(xs[0].dtype)]


UNARY = {
    "Relu": lambda node, xs: [np.maximum(xs[0], 0).astype(xs[0].dtype)],
    "Sigmoid": lambda node, xs: [(1 / (1 + np.exp(-xs[0]))).astype(xs[0].dtype)],
    "Tanh": lambda node, xs: [np.tanh(xs[0]).astype(xs[0].dtype)],
    "LeakyRelu": _leaky,
    "Identity": lambda node, xs: [xs[0]],
}
for _op, _fn in UNARY.items():
    register(_op, _fn)(same_as_input)


def _dropout_eval(node, xs):
    return [xs[0], np.ones(xs[0].shape, np.bool_)][:len(node.outputs)]


@register("Dropout", _dropout_eval)
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


@register("ChannelAffine", _affine_eval)
def _affine(node, g):
    """rvvkit-internal: y[n, c, ...] = x[n, c, ...] * scale[c] + shift[c]."""
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


@register("BatchNormalization", _bn_eval)
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
