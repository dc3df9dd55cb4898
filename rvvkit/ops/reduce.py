"""Reductions and their relatives: Reduce* (ten ops), ArgMax/ArgMin, CumSum, TopK, Hardmax.

Inference canonicalises every attribute into node.attrs, so evaluation and lowering read one
form whatever the opset: Reduce* get `axes` (sorted, non-negative; the axes reduced, () when
nothing is) and `keepdims`; single-axis ops get a non-negative `axis`. Constant inputs that
carry attributes (axes from opset 18, CumSum's axis, TopK's K) are read at build time."""
from __future__ import annotations

import math

import numpy as np

from .registry import F32, bad, const_input, in_shape, norm_axis, opt_input, register

I64 = np.dtype(np.int64)
INTS = ("int64", "int32")
NUMERIC = ("float32",) + INTS

# Reduce op -> numpy form over `axes` (a tuple; () reduces each element on its own)
REDUCE_NP = {
    "ReduceSum": lambda x, a: np.sum(x, axis=a),
    "ReduceMean": lambda x, a: np.mean(x, axis=a),
    "ReduceMax": lambda x, a: np.max(x, axis=a),
    "ReduceMin": lambda x, a: np.min(x, axis=a),
    "ReduceProd": lambda x, a: np.prod(x, axis=a),
    "ReduceL1": lambda x, a: np.sum(np.abs(x), axis=a),
    "ReduceL2": lambda x, a: np.sqrt(np.sum(x * x, axis=a)),
    "ReduceSumSquare": lambda x, a: np.sum(x * x, axis=a),
    "ReduceLogSum": lambda x, a: np.log(np.sum(x, axis=a)),
    "ReduceLogSumExp": lambda x, a: np.log(np.sum(np.exp(x), axis=a)),
}
# the reductions whose kernels also take integer tensors (Max/Min also small ones, bool)
INT_REDUCE = ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd")
SMALL = ("int8", "uint8", "bool")


def _reduce_eval(node, xs):
    x, axes = xs[0], node.attrs["axes"]
    y = REDUCE_NP[node.op](x.astype(np.float64) if x.dtype.kind == "f" else x, axes)
    if node.attrs["keepdims"]:
        y = np.reshape(y, [1 if d in axes else s for d, s in enumerate(x.shape)])
    return [np.asarray(y).astype(x.dtype)]


def reduce_axes(node, g, rank: int):
    """The canonical axes of a Reduce* node: attribute (before opset 18; ReduceSum before 13)
    or constant input 1; empty means all axes unless noop_with_empty_axes."""
    from_input = g.opset >= (13 if node.op == "ReduceSum" else 18) or g.opset == 0
    if from_input:
        given = const_input(node, g, 1, "axes")
        axes = [] if given is None else [int(a) for a in np.asarray(given).reshape(-1)]
    else:
        if opt_input(node, 1):
            raise bad(node, f"axes as an input needs opset >= 18 (model opset {g.opset})")
        axes = [int(a) for a in node.attrs.get("axes", [])]
    if not axes:
        return () if node.attrs.get("noop_with_empty_axes", 0) else tuple(range(rank))
    norm = sorted({norm_axis(node, a, rank) for a in axes})
    if len(norm) != len(axes):
        raise bad(node, f"repeated axes {axes}")
    return tuple(norm)


def _reduce(node, g):
    x = g.t(node.inputs[0])
    takes = ("float32",) + (INTS if node.op in INT_REDUCE else ()) + \
        (SMALL if node.op in ("ReduceMax", "ReduceMin") else ())
    if x.dtype.name not in takes and not g.is_const(node.inputs[0]):   # (constants fold)
        raise bad(node, f"input dtype {x.dtype} is not supported ({', '.join(takes)} only)")
    if "canonical" not in node.attrs:   # inference may run again on a canonical node
        node.attrs["axes"] = reduce_axes(node, g, len(x.shape))
        node.attrs["keepdims"] = int(node.attrs.get("keepdims", 1))
        node.attrs["canonical"] = 1
    axes, keep = node.attrs["axes"], node.attrs["keepdims"]
    shape = tuple(1 if d in axes else s for d, s in enumerate(x.shape)
                  if keep or d not in axes)
    return [(shape, x.dtype)]


for _op in REDUCE_NP:
    register(_op, _reduce_eval, dtypes=NUMERIC + SMALL * (_op in ("ReduceMax", "ReduceMin"))
             )(_reduce)


# ArgMax / ArgMin


def _arg_eval(node, xs):
    x, axis = xs[0], node.attrs["axis"]
    f = np.argmax if node.op == "ArgMax" else np.argmin
    if node.attrs["select_last_index"]:
        y = x.shape[axis] - 1 - f(np.flip(x, axis), axis=axis)
    else:
        y = f(x, axis=axis)
    if node.attrs["keepdims"]:
        y = np.expand_dims(y, axis)
    return [np.asarray(y, np.int64)]


def _arg(node, g):
    x = in_shape(node, g, 0)
    a = node.attrs
    a["axis"] = norm_axis(node, int(a.get("axis", 0)), len(x))
    a["keepdims"] = int(a.get("keepdims", 1))
    a["select_last_index"] = int(a.get("select_last_index", 0))
    shape = tuple(1 if d == a["axis"] else s for d, s in enumerate(x)
                  if a["keepdims"] or d != a["axis"])
    return [(shape, I64)]


register("ArgMax", _arg_eval, dtypes=NUMERIC)(_arg)
register("ArgMin", _arg_eval, dtypes=NUMERIC)(_arg)


# CumSum


def _cumsum_eval(node, xs):
    x, axis = xs[0], node.attrs["axis"]
    a = np.flip(x, axis) if node.attrs["reverse"] else x
    y = np.cumsum(a, axis=axis, dtype=x.dtype)
    if node.attrs["exclusive"]:
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis)),
                            np.take(y, range(x.shape[axis] - 1), axis)], axis)
    if node.attrs["reverse"]:
        y = np.flip(y, axis)
    return [np.ascontiguousarray(y)]


@register("CumSum", _cumsum_eval, dtypes=NUMERIC)
def _cumsum(node, g):
    x = g.t(node.inputs[0])
    ax = const_input(node, g, 1, "axis")
    if ax is None or np.asarray(ax).size != 1:
        raise bad(node, "axis must be a one-element constant")
    a = node.attrs
    a["axis"] = norm_axis(node, int(np.asarray(ax).reshape(-1)[0]), len(x.shape))
    a["exclusive"] = int(a.get("exclusive", 0))
    a["reverse"] = int(a.get("reverse", 0))
    return [(x.shape, x.dtype)]


# TopK


def _topk_eval(node, xs):
    x, a = xs[0], node.attrs
    axis, k = a["axis"], a["k"]
    # stable sort keeps the lower index first among equal values, as ONNX asks
    order = np.argsort(-x if a["largest"] else x, axis=axis, kind="stable")
    idx = np.take(order, range(k), axis)
    return [np.take_along_axis(x, idx, axis), idx.astype(np.int64)]


@register("TopK", _topk_eval, dtypes=NUMERIC)
def _topk(node, g):
    x = g.t(node.inputs[0])
    a = node.attrs
    if g.opset and g.opset < 10:
        k = int(a["k"])
    else:
        kv = const_input(node, g, 1, "K")
        if kv is None or np.asarray(kv).size != 1:
            raise bad(node, "K must be a one-element constant")
        k = int(np.asarray(kv).reshape(-1)[0])
    a["axis"] = norm_axis(node, int(a.get("axis", -1)), len(x.shape))
    a["largest"] = int(a.get("largest", 1))
    a["sorted"] = int(a.get("sorted", 1))
    n = x.shape[a["axis"]]
    if not 0 < k <= n:
        raise bad(node, f"K={k} out of range for axis of size {n}")
    a["k"] = k
    shape = tuple(k if d == a["axis"] else s for d, s in enumerate(x.shape))
    return [(shape, x.dtype), (shape, I64)]


# Hardmax


def hardmax_rows(node, shape):
    """(outer, n, inner) of a Hardmax node (before opset 13: over the 2-D coercion)."""
    axis = node.attrs["axis"]
    if node.attrs["coerce"]:
        return math.prod(shape[:axis]), math.prod(shape[axis:]), 1
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _hardmax_eval(node, xs):
    x = xs[0]
    outer, n, inner = hardmax_rows(node, x.shape)
    r = x.reshape(outer, n, inner)
    y = np.zeros_like(r)
    np.put_along_axis(y, np.argmax(r, axis=1)[:, None, :], 1.0, axis=1)
    return [y.reshape(x.shape)]


@register("Hardmax", _hardmax_eval)
def _hardmax(node, g):
    x = in_shape(node, g, 0)
    if "coerce" not in node.attrs:
        coerce = 0 < g.opset < 13
        axis = node.attrs.get("axis", 1 if coerce else -1)
        node.attrs["axis"], node.attrs["coerce"] = norm_axis(node, axis, len(x)), coerce
    return [(x, F32)]
