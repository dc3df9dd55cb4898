"""Less common window and matrix ops: LpPool (1-D, 2-D, 3-D; attributes canonicalised as
MaxPool's, rvvkit.ops.nn._spatial) and Det (determinant of the trailing 2-D matrices)."""
from __future__ import annotations

import numpy as np

from .nn import _spatial
from .registry import F32, bad, in_shape, register


def _lppool_eval(node, xs):
    """numpy LpPool: per tap, the strided window of |x|^p zero-padded (ceil_mode windows may
    run past the end padding: pad enough for them)."""
    a = node.attrs
    x = np.abs(np.asarray(xs[0], np.float64)) ** a["p"]
    nd = x.ndim - 2
    k, st, dil, pads = a["kernel"], a["strides"], a["dilations"], a["pads"]
    out = a["out"]
    ends = [max(pads[nd + d], (out[d] - 1) * st[d] + (k[d] - 1) * dil[d] + 1
                - x.shape[2 + d] - pads[d]) for d in range(nd)]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[d], ends[d]) for d in range(nd)])
    y = np.zeros(x.shape[:2] + tuple(out))
    for tap in np.ndindex(*k):
        y += xp[(slice(None), slice(None)) + tuple(
            slice(t * dil[d], t * dil[d] + (out[d] - 1) * st[d] + 1, st[d])
            for d, t in enumerate(tap))]
    return [(y ** (1.0 / a["p"])).astype(np.float32)]


@register("LpPool", _lppool_eval)
def _lppool(node, g):
    x = in_shape(node, g, 0)
    if "kernel_shape" not in node.attrs:
        raise bad(node, "kernel_shape is required")
    p = float(node.attrs.get("p", 2))
    if p <= 0:
        raise bad(node, f"p must be positive, got {p}")
    out = _spatial(node, x, tuple(node.attrs["kernel_shape"]))
    node.attrs["p"], node.attrs["out"] = p, out
    return [((x[0], x[1]) + out, F32)]


@register("Det", lambda n, xs: [np.linalg.det(np.asarray(xs[0], np.float64)).astype(F32)])
def _det(node, g):
    x = in_shape(node, g, 0)
    if len(x) < 2 or x[-1] != x[-2]:
        raise bad(node, f"input shape {list(x)}: square matrices [..., M, M] expected")
    return [(tuple(x[:-2]), F32)]
