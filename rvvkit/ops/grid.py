"""GridSample (opset 16: 4-D input, bilinear/nearest/bicubic; opset 20+: any number of spatial
axes, linear/nearest/cubic), float32, with the grid a run-time or constant tensor.

Output location p of batch n reads the normalised coordinates grid[n, p, :] (the last grid
axis lists the spatial axes innermost first: x is the width). Per spatial axis of size d the
coordinate is denormalised (align_corners: -1..1 spans the first to the last sample's centre,
else their outer edges), rounded half to even for nearest, and brought inside the axis's
borders by the padding mode when it lies outside them; then each axis reads 1 (nearest), 2
(linear) or 4 (cubic, Keys with A = -0.75) neighbours, whose indices the padding mode maps
again (zeros: a neighbour outside reads 0; border: clamped; reflection: reflected). The output
is the sum over every neighbour combination of the product of the axes' weights times the
element. `axis_taps` is that per-axis step in numpy, used for folding; the C kernel
(codegen/kernels/movement/grid.py) computes the same per output location."""
from __future__ import annotations

import itertools
import math

import numpy as np

from .registry import bad, in_shape, register

F = np.float32
MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
         "nearest": "nearest"}
PADDINGS = ("zeros", "border", "reflection")
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
FIRST_TAP = {"nearest": 0, "linear": 0, "cubic": -1}   # the first neighbour, from floor(x)
CUBIC_A = -0.75
# Coordinates further than this outside an axis read only padding: clamping them there keeps
# every index computation in range (huge, infinite or NaN grid values) without changing it.
GUARD = 8


def borders(d: int, align: bool):
    """The lowest and highest coordinate inside an axis of d samples."""
    return (0.0, float(d - 1)) if align else (-0.5, d - 0.5)


def denormalise(g: np.ndarray, d: int, align: bool) -> np.ndarray:
    if align:
        return (g + F(1)) / F(2) * F(d - 1)
    return ((g + F(1)) * F(d) - F(1)) / F(2)


def reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """x folded back into [lo, hi] by reflecting at the borders as often as needed."""
    lo, hi = F(lo), F(hi)
    rng = hi - lo
    below, above = x < lo, x > hi
    if rng <= 0:
        return np.where(below | above, lo, x).astype(F)
    dx = np.where(below, lo - x, x - hi)
    n = np.floor(dx / rng)
    r = dx - n * rng
    odd = np.fmod(n, F(2)) != 0
    inward = np.where(below, lo + r, hi - r)     # an even number of reflections
    outward = np.where(below, hi - r, lo + r)
    return np.where(below | above, np.where(odd, outward, inward), x).astype(F)


def cubic_weights(t: np.ndarray) -> np.ndarray:
    a = F(CUBIC_A)

    def near(s):
        return ((a + F(2)) * s - (a + F(3))) * s * s + F(1)

    def far(s):
        return ((a * s - F(5) * a) * s + F(8) * a) * s - F(4) * a
    return np.stack([far(t + F(1)), near(t), near(F(1) - t), far(F(2) - t)], axis=-1)


def axis_taps(x: np.ndarray, d: int, gs: dict):
    """(indices, weights, valid) of the neighbours of denormalised coordinates x along an axis
    of size d, each with a trailing axis of TAPS[mode] neighbours."""
    mode, pad = gs["mode"], gs["padding"]
    lo, hi = borders(d, gs["align_corners"])
    x = x.astype(F)
    if mode == "nearest":
        x = np.rint(x)
    if pad == "border":
        x = np.where(x < lo, F(0), np.where(x > hi, F(d - 1), x))
    elif pad == "reflection":
        x = reflect(x, lo, hi)
    x = np.minimum(np.where(x >= -GUARD, x, F(-GUARD)), F(d + GUARD))
    base = np.floor(x)
    t = (x - base).astype(F)
    idx = base.astype(np.int64)[..., None] + FIRST_TAP[mode] + np.arange(TAPS[mode])
    if mode == "nearest":
        w = np.ones(t.shape + (1,), F)
    elif mode == "linear":
        w = np.stack([F(1) - t, t], axis=-1)
    else:
        w = cubic_weights(t)
    valid = np.ones(idx.shape, bool)
    if pad == "zeros":
        valid = (idx >= 0) & (idx < d)
        idx = np.where(valid, idx, 0)
    elif pad == "border":
        idx = np.clip(idx, 0, d - 1)
    else:
        idx = np.trunc(reflect(idx.astype(F), lo, hi)).astype(np.int64)
    return idx, w.astype(F), valid


def _evaluate(node, xs):
    gs = node.attrs["_gs"]
    x, grid = xs[0].astype(F), xs[1].astype(F)
    n, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    k, out_sp = len(sp), grid.shape[1:-1]
    pts = grid.reshape(n, -1, k)
    taps = [axis_taps(denormalise(pts[..., k - 1 - j], d, gs["align_corners"]), d, gs)
            for j, d in enumerate(sp)]
    strides = [math.prod(sp[j + 1:]) for j in range(k)]
    flat = x.reshape(n, c, -1)
    y = np.zeros((n, c, pts.shape[1]), F)
    for combo in itertools.product(range(TAPS[gs["mode"]]), repeat=k):
        off = sum(t[0][..., q] * s for t, q, s in zip(taps, combo, strides))
        w = np.prod([t[1][..., q] for t, q in zip(taps, combo)], axis=0)
        ok = np.all([t[2][..., q] for t, q in zip(taps, combo)], axis=0)
        vals = np.take_along_axis(flat, off[:, None, :], axis=2)
        y += np.where(ok[:, None, :], w[:, None, :] * vals, F(0))
    return [y.reshape((n, c) + tuple(out_sp))]


@register("GridSample", _evaluate)
def _grid_sample(node, g):
    x, grid = in_shape(node, g, 0), in_shape(node, g, 1)
    a = node.attrs
    mode = a.get("mode", "bilinear" if g.opset < 20 else "linear")
    pad = a.get("padding_mode", "zeros")
    if mode not in MODES or pad not in PADDINGS:
        raise bad(node, f"mode {mode!r} / padding_mode {pad!r} is not supported")
    if len(x) < 3 or (g.opset < 20 and len(x) != 4):
        raise bad(node, f"input of rank {len(x)}: opset {g.opset} takes "
                        + ("4-D input" if g.opset < 20 else "rank 3 or more"))
    if len(grid) != len(x) or grid[0] != x[0] or grid[-1] != len(x) - 2:
        raise bad(node, f"grid {list(grid)} does not fit input {list(x)}: "
                        f"[{x[0]}, *output spatial shape, {len(x) - 2}] expected")
    if min(x[2:]) < 1 and math.prod(grid[1:-1]):
        raise bad(node, f"sampling an empty input {list(x)}")
    if g.t(node.inputs[1]).dtype != np.float32:
        raise bad(node, f"grid of dtype {g.t(node.inputs[1]).dtype}; float32 expected")
    a["_gs"] = {"x_shape": tuple(x), "grid_shape": tuple(grid), "mode": MODES[mode],
                "padding": pad, "align_corners": int(a.get("align_corners", 0))}
    return [((x[0], x[1]) + tuple(grid[1:-1]), g.t(node.inputs[0]).dtype)]
