"""Data-movement operators on any element type: Slice, Split, Expand, Tile, Pad, DepthToSpace,
SpaceToDepth, Trilu, Range, OneHot. Their shape-like inputs (starts, pads, repeats, ...) must
be build-time constants; only the data inputs listed in BOUND_INPUTS reach the kernel.
Index ops (Gather & co.) are in ops/index.py, Resize/Upsample in ops/resize.py."""
from __future__ import annotations

import numpy as np

from .registry import ANY, FOLD_ONLY, bad, broadcast_shapes, const_input, in_shape, \
    norm_axis, opt_input, register

# op -> indices of the node inputs bound to kernel parameters (the others are build-time
# attributes in disguise); codegen/lower/core.py kernel_inputs reads it
BOUND_INPUTS = {"Slice": (0,), "Split": (0,), "Expand": (0,), "Tile": (0,), "Pad": (0,),
                "Trilu": (0,), "OneHot": (0, 2), "Resize": (0,), "Upsample": (0,)}


def _ints(v) -> list:
    return [int(a) for a in np.asarray(v).reshape(-1)]


def _dtype(node, g, i=0):
    return g.t(node.inputs[i]).dtype


# -- Slice -----------------------------------------------------------------------------------

def _slice_eval(node, xs):
    # the triples are range() arguments; as a slice, a negative stop (a reversed slice that
    # runs to the start) would count from the end, so it becomes None
    return [xs[0][tuple(slice(a, None if b < 0 else b, c) for a, b, c in node.attrs["_slices"])]]


@register("Slice", _slice_eval, dtypes=ANY)
def _slice(node, g):
    x = in_shape(node, g, 0)
    if g.opset < 10:
        a = node.attrs
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(const_input(node, g, 1, "starts")), _ints(const_input(node, g, 2,
                                                                                 "ends"))
        ax = const_input(node, g, 3, "axes")
        axes = list(range(len(starts))) if ax is None else _ints(ax)
        st = const_input(node, g, 4, "steps")
        steps = [1] * len(starts) if st is None else _ints(st)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise bad(node, "starts, ends, axes and steps differ in length")
    slices = [(0, d, 1) for d in x]
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise bad(node, "step 0")
        slices[norm_axis(node, a, len(x))] = (s, e, st)
    # (start, stop, step) per axis in Python's clamped form: range(*triple) is exact
    node.attrs["_slices"] = tuple(slice(*t).indices(d) for t, d in zip(slices, x))
    out = tuple(len(range(*t)) for t in node.attrs["_slices"])
    return [(out, _dtype(node, g))]


# -- Split -----------------------------------------------------------------------------------

def _split_eval(node, xs):
    cuts = np.cumsum(node.attrs["_sizes"])[:-1]
    return np.split(xs[0], cuts, axis=node.attrs["axis"])


@register("Split", _split_eval, dtypes=ANY)
def _split(node, g):
    x = in_shape(node, g, 0)
    axis = norm_axis(node, int(node.attrs.get("axis", 0)), len(x))
    n = len(node.outputs)
    if "split" in node.attrs:
        sizes = [int(s) for s in node.attrs["split"]]
    elif opt_input(node, 1):
        sizes = _ints(const_input(node, g, 1, "split"))
    elif "num_outputs" in node.attrs:
        k = int(node.attrs["num_outputs"])
        each = -(-x[axis] // k)
        sizes = [min(each, x[axis] - each * j) for j in range(k)]
    else:
        if x[axis] % n:
            raise bad(node, f"axis of size {x[axis]} does not split into {n} equal parts")
        sizes = [x[axis] // n] * n
    if len(sizes) != n or sum(sizes) != x[axis] or min(sizes) < 0:
        raise bad(node, f"split sizes {sizes} do not cut an axis of {x[axis]} into {n}")
    node.attrs["axis"], node.attrs["_sizes"] = axis, tuple(sizes)
    return [(x[:axis] + (s,) + x[axis + 1:], _dtype(node, g)) for s in sizes]


# -- Expand, Tile ----------------------------------------------------------------------------

@register("Expand", lambda node, xs: [np.broadcast_to(xs[0], node.attrs["_out"]).copy()],
          dtypes=ANY)
def _expand(node, g):
    shape = _ints(const_input(node, g, 1, "shape"))
    out = broadcast_shapes(node, [in_shape(node, g, 0), tuple(shape)])
    node.attrs["_out"] = out
    return [(out, _dtype(node, g))]


@register("Tile", lambda node, xs: [np.tile(xs[0], node.attrs["_repeats"])], dtypes=ANY)
def _tile(node, g):
    x = in_shape(node, g, 0)
    reps = _ints(const_input(node, g, 1, "repeats"))
    if len(reps) != len(x) or min(reps, default=1) < 0:
        raise bad(node, f"repeats {reps} do not fit rank {len(x)}")
    node.attrs["_repeats"] = tuple(reps)
    return [(tuple(d * r for d, r in zip(x, reps)), _dtype(node, g))]


# -- Pad -------------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_eval(node, xs):
    a = node.attrs
    x, pads = xs[0], a["_pads"]
    r = x.ndim
    crop = tuple(slice(max(0, -b), x.shape[k] - max(0, -e))
                 for k, (b, e) in enumerate(zip(pads[:r], pads[r:])))
    x = x[crop]
    width = [(max(0, b), max(0, e)) for b, e in zip(pads[:r], pads[r:])]
    mode = {"edge": "edge", "reflect": "reflect", "wrap": "wrap"}.get(a["mode"], "constant")
    if mode == "constant":
        return [np.pad(x, width, constant_values=np.asarray(a["_value"]).astype(x.dtype))]
    return [np.pad(x, width, mode=mode)]


@register("Pad", _pad_eval, dtypes=ANY)
def _pad(node, g):
    x = in_shape(node, g, 0)
    a, r = node.attrs, len(x)
    mode = a.get("mode", "constant")
    if mode not in PAD_MODES:
        raise bad(node, f"mode {mode!r} is not one of {PAD_MODES}")
    if g.opset < 11:
        pads, value = [int(p) for p in a["pads"]], float(a.get("value", 0.0))
    else:
        pads = _ints(const_input(node, g, 1, "pads"))
        v = const_input(node, g, 2, "constant_value")
        value = 0 if v is None else np.asarray(v).reshape(-1)[0].item()
        ax = const_input(node, g, 3, "axes")
        if ax is not None:
            axes = [norm_axis(node, i, r) for i in _ints(ax)]
            full = [0] * (2 * r)
            for j, k in enumerate(axes):
                full[k], full[r + k] = pads[j], pads[len(axes) + j]
            pads = full
    if len(pads) != 2 * r:
        raise bad(node, f"{len(pads)} pads for rank {r}")
    out = tuple(d + b + e for d, b, e in zip(x, pads[:r], pads[r:]))
    for k, d in enumerate(x):
        if mode != "constant" and (d == 0 or (mode == "reflect" and max(pads[k], pads[r + k])
                                               >= d)):
            raise bad(node, f"{mode} padding of {max(pads[k], pads[r + k])} on an axis of {d}")
    if min(out) < 0:
        raise bad(node, f"pads {pads} crop more than the input {list(x)}")
    a["mode"], a["_pads"], a["_value"] = mode, tuple(pads), value
    return [(out, _dtype(node, g))]


# -- DepthToSpace, SpaceToDepth: reshape + transpose views ------------------------------------

def d2s_view(x, b, mode):
    """(6-D shape x is viewed as, permutation) such that DepthToSpace = transpose of the view."""
    n, c, h, w = x
    if mode == "DCR":
        return (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
    return (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)


def s2d_view(x, b, mode="DCR"):
    n, c, h, w = x
    return (n, c, h // b, b, w // b, b), \
        (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)


def _view_eval(node, xs):
    view, perm = node.attrs["_view"]
    return [np.transpose(xs[0].reshape(view), perm).reshape(node.attrs["_out"])]


def _d2s_check(node, g):
    x = in_shape(node, g, 0)
    b = int(node.attrs["blocksize"])
    if len(x) != 4 or b < 1:
        raise bad(node, f"needs a 4-D input and blocksize >= 1, got {list(x)}, {b}")
    return x, b


@register("DepthToSpace", _view_eval, dtypes=ANY)
def _d2s(node, g):
    (n, c, h, w), b = _d2s_check(node, g)
    mode = node.attrs.get("mode", "DCR")
    if c % (b * b) or mode not in ("DCR", "CRD"):
        raise bad(node, f"{c} channels, blocksize {b}, mode {mode!r}")
    node.attrs["_view"] = d2s_view((n, c, h, w), b, mode)
    node.attrs["_out"] = (n, c // (b * b), h * b, w * b)
    return [(node.attrs["_out"], _dtype(node, g))]


@register("SpaceToDepth", _view_eval, dtypes=ANY)
def _s2d(node, g):
    (n, c, h, w), b = _d2s_check(node, g)
    mode = node.attrs.get("mode", "DCR")   # (mode: opset 25+)
    if h % b or w % b or mode not in ("DCR", "CRD"):
        raise bad(node, f"spatial size {h}x{w}, blocksize {b}, mode {mode!r}")
    node.attrs["_view"] = s2d_view((n, c, h, w), b, mode)
    node.attrs["_out"] = (n, c * b * b, h // b, w // b)
    return [(node.attrs["_out"], _dtype(node, g))]


# -- Trilu, Range, OneHot ----------------------------------------------------------------------

def _trilu_eval(node, xs):
    f = np.triu if node.attrs["upper"] else np.tril
    return [f(xs[0], node.attrs["_k"])]


@register("Trilu", _trilu_eval, dtypes=ANY)
def _trilu(node, g):
    x = in_shape(node, g, 0)
    if len(x) < 2:
        raise bad(node, "needs rank >= 2")
    k = const_input(node, g, 1, "k")
    node.attrs["_k"] = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    node.attrs["upper"] = int(node.attrs.get("upper", 1))
    return [(x, _dtype(node, g))]


def _range_value(xs):
    start, limit, delta = (np.asarray(v).reshape(()) for v in xs)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return (start + np.arange(n) * delta).astype(start.dtype)


@register("Range", lambda node, xs: [_range_value(xs)], without_kernel=FOLD_ONLY)
def _range(node, g):
    vals = [const_input(node, g, i, what) for i, what in enumerate(("start", "limit", "delta"))]
    return [(_range_value(vals).shape, np.asarray(vals[0]).dtype)]


def _onehot_eval(node, xs):
    idx, depth = xs[0].astype(np.int64), node.attrs["_depth"]
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    y = np.where(hot, xs[2].reshape(-1)[1], xs[2].reshape(-1)[0])
    return [np.moveaxis(y, -1, node.attrs["axis"])]


@register("OneHot", _onehot_eval, dtypes=ANY)
def _onehot(node, g):
    x = in_shape(node, g, 0)
    depth = int(np.asarray(const_input(node, g, 1, "depth")).reshape(-1)[0])
    axis = norm_axis(node, int(node.attrs.get("axis", -1)), len(x) + 1)
    if in_shape(node, g, 2) != (2,):
        raise bad(node, "values must hold [off, on]")
    node.attrs["axis"], node.attrs["_depth"] = axis, depth
    return [(x[:axis] + (depth,) + x[axis:], _dtype(node, g, 2))]


from . import index, resize  # noqa: E402,F401  (register Gather & co., Resize/Upsample)
