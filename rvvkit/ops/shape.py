"""Data-movement and shape operators. Most fold away at build time (shape arithmetic, constant
weights); Reshape/Flatten/Squeeze/Unsqueeze on activations become buffer aliases."""
from __future__ import annotations

import numpy as np

from .registry import ANY, FOLD_ONLY, bad, const_input, in_shape, norm_axis, opt_input, register

ALIAS_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")


def _reshape_target(node, g):
    x = in_shape(node, g, 0)
    if "shape" in node.attrs and len(node.inputs) < 2:  # opset < 5
        spec = list(node.attrs["shape"])
    else:
        spec = [int(v) for v in const_input(node, g, 1, "shape").reshape(-1)]
    allow_zero = node.attrs.get("allowzero", 0)
    out = [x[i] if (d == 0 and not allow_zero) else d for i, d in enumerate(spec)]
    if out.count(-1) > 1:
        raise bad(node, f"more than one -1 in shape {spec}")
    total = int(np.prod(x, dtype=np.int64))
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        if rest == 0 or total % rest:
            raise bad(node, f"cannot reshape {list(x)} to {spec}")
        out[out.index(-1)] = total // rest
    if int(np.prod(out, dtype=np.int64)) != total:
        raise bad(node, f"cannot reshape {list(x)} ({total} elements) to {spec}")
    return tuple(int(d) for d in out)


def _reshape_eval(node, xs):
    return [xs[0].reshape(node.attrs["_out_shape"])]


@register("Reshape", _reshape_eval, dtypes=ANY)
def _reshape(node, g):
    out = _reshape_target(node, g)
    node.attrs["_out_shape"] = out
    return [(out, g.t(node.inputs[0]).dtype)]


@register("Flatten", _reshape_eval, dtypes=ANY)
def _flatten(node, g):
    x = in_shape(node, g, 0)
    axis = int(node.attrs.get("axis", 1))
    if not -len(x) <= axis <= len(x):  # axis == rank is valid: (N, 1); negative counts from rank
        raise bad(node, f"axis {axis} out of range for rank {len(x)}")
    axis = axis + len(x) if axis < 0 else axis
    out = (int(np.prod(x[:axis], dtype=np.int64)), int(np.prod(x[axis:], dtype=np.int64)))
    node.attrs["_out_shape"] = out
    return [(out, g.t(node.inputs[0]).dtype)]


def _axes(node, g, rank_for_norm):
    if "axes" in node.attrs:
        axes = list(node.attrs["axes"])
    else:
        v = const_input(node, g, 1, "axes")
        axes = [] if v is None else [int(a) for a in v.reshape(-1)]
    return sorted(norm_axis(node, a, rank_for_norm) for a in axes)


@register("Unsqueeze", _reshape_eval, dtypes=ANY)
def _unsqueeze(node, g):
    x = list(in_shape(node, g, 0))
    if "axes" in node.attrs:  # opset < 13
        raw = [int(a) for a in node.attrs["axes"]]
    else:
        raw = [int(a) for a in const_input(node, g, 1, "axes").reshape(-1)]
    for a in sorted(norm_axis(node, a, len(x) + len(raw)) for a in raw):
        x.insert(a, 1)
    node.attrs["_out_shape"] = tuple(x)
    return [(tuple(x), g.t(node.inputs[0]).dtype)]


@register("Squeeze", _reshape_eval, dtypes=ANY)
def _squeeze(node, g):
    x = in_shape(node, g, 0)
    axes = _axes(node, g, len(x)) if ("axes" in node.attrs or opt_input(node, 1)) else \
        [i for i, d in enumerate(x) if d == 1]
    for a in axes:
        if x[a] != 1:
            raise bad(node, f"cannot squeeze axis {a} of size {x[a]}")
    out = tuple(d for i, d in enumerate(x) if i not in axes)
    node.attrs["_out_shape"] = out
    return [(out, g.t(node.inputs[0]).dtype)]


def _perm(node, rank):
    perm = node.attrs.get("perm")
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise bad(node, f"perm {perm} is not a permutation of {rank} axes")
    return tuple(perm)


@register("Transpose", lambda node, xs: [np.transpose(xs[0], node.attrs["perm"])],
          dtypes=ANY)
def _transpose(node, g):
    x = in_shape(node, g, 0)
    perm = _perm(node, len(x))
    node.attrs["perm"] = perm
    return [(tuple(x[p] for p in perm), g.t(node.inputs[0]).dtype)]


@register("Concat", lambda node, xs: [np.concatenate(xs, axis=node.attrs["axis"])],
          dtypes=ANY)
def _concat(node, g):
    shapes = [in_shape(node, g, i) for i in range(len(node.inputs))]
    rank = len(shapes[0])
    axis = norm_axis(node, node.attrs.get("axis", 1), rank)
    for s in shapes[1:]:
        if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0]))
                                 if i != axis):
            raise bad(node, f"input shapes {list(map(list, shapes))} differ off axis {axis}")
    node.attrs["axis"] = axis
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [(tuple(out), g.t(node.inputs[0]).dtype)]


def _constant_value(node):
    a = node.attrs
    for key, conv in (("value", np.asarray), ("value_float", lambda v: np.float32(v)),
                      ("value_floats", lambda v: np.asarray(v, np.float32)),
                      ("value_int", lambda v: np.int64(v)),
                      ("value_ints", lambda v: np.asarray(v, np.int64))):
        if key in a:
            return np.asarray(conv(a[key]))
    raise bad(node, "Constant without a supported value attribute")


@register("Constant", lambda node, xs: [_constant_value(node)], without_kernel=FOLD_ONLY)
def _constant(node, g):
    v = _constant_value(node)
    return [(v.shape, v.dtype)]


def _cos_eval(node, xs):
    value = node.attrs.get("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return [np.full(tuple(int(d) for d in xs[0].reshape(-1)), fill[0], dtype=fill.dtype)]


@register("ConstantOfShape", _cos_eval, without_kernel=FOLD_ONLY)
def _cos(node, g):
    shape = const_input(node, g, 0, "shape")
    value = node.attrs.get("value")
    dtype = np.float32 if value is None else np.asarray(value).dtype
    return [(tuple(int(d) for d in shape.reshape(-1)), np.dtype(dtype))]


def _shape_value(node, shape):
    # start/end (opset 15) follow Python slice rules: negative counts from the end, clamped.
    return np.asarray(shape[node.attrs.get("start", 0):node.attrs.get("end", None)], np.int64)


@register("Shape", lambda node, xs: [_shape_value(node, xs[0].shape)], shape_only=True,
          without_kernel=FOLD_ONLY)
def _shape(node, g):
    return [(_shape_value(node, in_shape(node, g, 0)).shape, np.dtype(np.int64))]


@register("Size", lambda node, xs: [np.asarray(xs[0].size, np.int64)], shape_only=True,
          without_kernel=FOLD_ONLY)
def _size(node, g):
    return [((), np.dtype(np.int64))]


# Gather: ops/index.py (run-time indices, folds when constant)


# Cast, CastLike: ops/logic.py (run-time kernels, fold when constant)

