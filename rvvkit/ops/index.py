"""Index operators on any element type, with run-time indices (int64 or int32): Gather,
GatherElements, GatherND, ScatterND, ScatterElements. Negative indices count from the end; an
index out of range is a data error their kernels report at run time (and a build error when
folding)."""
from __future__ import annotations

import itertools

import numpy as np

from .registry import ANY, bad, in_shape, norm_axis, register

INDEX_DTYPES = ("int64", "int32")
REDUCTIONS = ("none", "add", "mul", "max", "min")


def _wrap(node, idx, dims):
    """`idx` with negative entries counted from the end. `dims` is one axis's size, or, for
    the index tuples of GatherND and ScatterND, the sizes of the axes along idx's last axis
    (broadcast against it)."""
    idx = np.asarray(idx).astype(np.int64)
    dim = np.asarray(dims, np.int64)
    if idx.size and ((idx < -dim).any() or (idx >= dim).any()):
        what = f"axes of {list(dims)}" if dim.ndim else f"an axis of {dims}"
        raise bad(node, f"index out of range for {what}")
    return np.where(idx < 0, idx + dim, idx)


def _index_dtype(node, g, i):
    dt = g.t(node.inputs[i]).dtype
    if dt.name not in INDEX_DTYPES:
        raise bad(node, f"indices of dtype {dt}; int64 or int32 expected")


def _gather_eval(node, xs):
    axis = node.attrs["axis"]
    return [np.take(xs[0], _wrap(node, xs[1], xs[0].shape[axis]), axis=axis)]


@register("Gather", _gather_eval, dtypes=ANY)
def _gather(node, g):
    x, i = in_shape(node, g, 0), in_shape(node, g, 1)
    _index_dtype(node, g, 1)
    axis = norm_axis(node, node.attrs.get("axis", 0), len(x))
    node.attrs["axis"] = axis
    return [(x[:axis] + i + x[axis + 1:], g.t(node.inputs[0]).dtype)]


def _ge_eval(node, xs):
    axis = node.attrs["axis"]
    return [np.take_along_axis(xs[0], _wrap(node, xs[1], xs[0].shape[axis]), axis=axis)]


@register("GatherElements", _ge_eval, dtypes=ANY)
def _gather_elements(node, g):
    x, i = in_shape(node, g, 0), in_shape(node, g, 1)
    _index_dtype(node, g, 1)
    axis = norm_axis(node, node.attrs.get("axis", 0), len(x))
    if len(i) != len(x) or any(a > b for k, (a, b) in enumerate(zip(i, x)) if k != axis):
        raise bad(node, f"indices {list(i)} do not fit data {list(x)} off axis {axis}")
    node.attrs["axis"] = axis
    return [(i, g.t(node.inputs[0]).dtype)]


def _gnd_eval(node, xs):
    data, idx, b = xs[0], np.asarray(xs[1]).astype(np.int64), node.attrs["batch_dims"]
    k = idx.shape[-1]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    d = data.reshape((batch,) + data.shape[b:])
    ix = idx.reshape((batch, -1, k))
    rows = [d[n][tuple(_wrap(node, ix[n, j], d.shape[1:1 + k]))]
            for n in range(batch) for j in range(ix.shape[1])]
    out = np.stack(rows) if rows else np.zeros((0,) + data.shape[b + k:], data.dtype)
    return [out.reshape(idx.shape[:-1] + data.shape[b + k:])]


@register("GatherND", _gnd_eval, dtypes=ANY)
def _gather_nd(node, g):
    x, i = in_shape(node, g, 0), in_shape(node, g, 1)
    _index_dtype(node, g, 1)
    b = int(node.attrs.get("batch_dims", 0))
    if not i or i[-1] > len(x) - b or x[:b] != i[:b]:
        raise bad(node, f"indices {list(i)} do not fit data {list(x)} with batch_dims {b}")
    node.attrs["batch_dims"] = b
    return [(i[:-1] + x[b + i[-1]:], g.t(node.inputs[0]).dtype)]


def _apply(red, old, new):
    return {"none": lambda: new, "add": lambda: old + new, "mul": lambda: old * new,
            "max": lambda: np.maximum(old, new), "min": lambda: np.minimum(old, new)}[red]()


def _snd_eval(node, xs):
    y, idx, upd = xs[0].copy(), np.asarray(xs[1]).astype(np.int64), xs[2]
    k, red = idx.shape[-1], node.attrs["reduction"]
    ix, up = idx.reshape(-1, k), upd.reshape((-1,) + y.shape[k:])
    for j in range(ix.shape[0]):
        at = tuple(_wrap(node, ix[j], y.shape[:k]))
        y[at] = _apply(red, y[at], up[j])
    return [y]


def _reduction(node, allowed):
    red = node.attrs.get("reduction", "none")
    if red not in allowed:
        raise bad(node, f"reduction {red!r} is not one of {allowed}")
    node.attrs["reduction"] = red


@register("ScatterND", _snd_eval, dtypes=ANY)
def _scatter_nd(node, g):
    x, i, u = (in_shape(node, g, j) for j in range(3))
    _index_dtype(node, g, 1)
    _reduction(node, REDUCTIONS)
    if not i or i[-1] > len(x) or u != i[:-1] + x[i[-1]:]:
        raise bad(node, f"indices {list(i)} / updates {list(u)} do not fit data {list(x)}")
    return [(x, g.t(node.inputs[0]).dtype)]


def _se_eval(node, xs):
    y, axis, red = xs[0].copy(), node.attrs["axis"], node.attrs["reduction"]
    idx = _wrap(node, xs[1], y.shape[axis])
    for pos in itertools.product(*(range(d) for d in idx.shape)):
        at = list(pos)
        at[axis] = idx[pos]
        y[tuple(at)] = _apply(red, y[tuple(at)], xs[2][pos])
    return [y]


@register("ScatterElements", _se_eval, dtypes=ANY)
def _scatter_elements(node, g):
    x, i, u = (in_shape(node, g, j) for j in range(3))
    _index_dtype(node, g, 1)
    _reduction(node, REDUCTIONS)
    axis = norm_axis(node, node.attrs.get("axis", 0), len(x))
    if len(i) != len(x) or u != i or any(a > b for k, (a, b) in enumerate(zip(i, x))
                                         if k != axis):
        raise bad(node, f"indices {list(i)} / updates {list(u)} do not fit data {list(x)}")
    node.attrs["axis"] = axis
    return [(x, g.t(node.inputs[0]).dtype)]


# Scatter (opsets 9-10) is ScatterElements without reduction
register("Scatter", _se_eval, dtypes=ANY)(_scatter_elements)
