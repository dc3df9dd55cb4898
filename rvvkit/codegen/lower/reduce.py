"""C lowerings of reductions (rvvkit/ops/reduce.py) and normalisations (rvvkit/ops/norm.py).
Constant inputs that carry attributes (Reduce axes, CumSum axis, TopK K) are bound to the
kernel like every input, so the kernels take them as parameters and ignore them."""
from __future__ import annotations

import math

import numpy as np

from ...ir import Graph, Node
from ...ops.reduce import REDUCE_NP, hardmax_rows
from ...ops.registry import bad, lowering, opt_input
from ..kernel import Lowered
from ..kernels.reduce import normalize, lines as reduce_lines
from ..kernels.reduce import reductions as rk


def _x(n: Node, g: Graph):
    t = g.t(n.inputs[0])
    return t.shape, t.dtype.name


def _rows(shape, axis: int):
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


@lowering(*REDUCE_NP)
def _reduce(n: Node, g: Graph) -> Lowered:
    shape, dtype = _x(n, g)
    axes = opt_input(n, 1)
    return rk.reduce(n.op, dtype, shape, n.attrs["axes"],
                     g.t(axes).dtype.name if axes else "")


@lowering("ArgMax", "ArgMin")
def _arg(n: Node, g: Graph) -> Lowered:
    shape, dtype = _x(n, g)
    return reduce_lines.lines(n.op, dtype, _rows(shape, n.attrs["axis"]),
                              flag=n.attrs["select_last_index"])


@lowering("TopK")
def _topk(n: Node, g: Graph) -> Lowered:
    shape, dtype = _x(n, g)
    if len([o for o in n.outputs if o]) != 2:
        raise bad(n, "both outputs (Values, Indices) must be used")
    k = opt_input(n, 1)
    return reduce_lines.lines("TopK", dtype, _rows(shape, n.attrs["axis"]), k=n.attrs["k"],
                              flag=n.attrs["largest"],
                              const_dtype=g.t(k).dtype.name if k else "")


@lowering("Hardmax")
def _hardmax(n: Node, g: Graph) -> Lowered:
    return reduce_lines.lines("Hardmax", "float32", hardmax_rows(n, _x(n, g)[0]))


@lowering("LpNormalization")
def _lp(n: Node, g: Graph) -> Lowered:
    shape = _x(n, g)[0]
    return reduce_lines.lines("LpNormalization", "float32", _rows(shape, n.attrs["axis"]),
                              k=n.attrs["p"])


@lowering("CumSum")
def _cumsum(n: Node, g: Graph) -> Lowered:
    shape, dtype = _x(n, g)
    return reduce_lines.cumsum(dtype, _rows(shape, n.attrs["axis"]), n.attrs["exclusive"],
                               n.attrs["reverse"], g.t(n.inputs[1]).dtype.name)


def _full(n: Node, g: Graph, i: int, size: int, norm_shape):
    """A transform broadcasting constant input i (scale, bias) to the normalised shape, or
    None when it already holds `size` values."""
    name = n.inputs[i]
    if g.t(name).size == size:
        return None
    if not g.is_const(name):
        raise bad(n, f"input {i} ({name!r}) broadcasts over the normalised axes; rvvkit "
                     "supports that only for a constant")
    return lambda a: np.ascontiguousarray(np.broadcast_to(a, norm_shape), np.float32)


@lowering("LayerNormalization", "RMSNormalization")
def _rownorm(n: Node, g: Graph) -> Lowered:
    # read leniently: pattern fusion (passes/patterns.py) builds these nodes too
    shape = _x(n, g)[0]
    axis = int(n.attrs.get("axis", -1)) % max(1, len(shape))
    rows, size = math.prod(shape[:axis]), math.prod(shape[axis:])
    extra = [bool(o) for o in n.outputs[1:]]
    if any(extra) and not all(extra + [len(extra) == 2]):
        raise bad(n, "the Mean and InvStdDev outputs are supported only together")
    bias = bool(opt_input(n, 2)) and n.op == "LayerNormalization"
    transforms = {}
    for i in (1, 2)[:1 + bias]:
        t = _full(n, g, i, size, shape[axis:])
        if t is not None:
            transforms[i] = t
    low = normalize.rownorm(n.op == "RMSNormalization", rows, size,
                            float(n.attrs.get("epsilon", 1e-5)), bias, any(extra))
    return Lowered(low.kernel, transforms or None)


@lowering("GroupNormalization", "InstanceNormalization")
def _groupnorm(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    return normalize.groupnorm(_x(n, g)[0], a["num_groups"], a["epsilon"],
                               bool(a["per_channel"]))


@lowering("MeanVarianceNormalization")
def _mvn(n: Node, g: Graph) -> Lowered:
    return normalize.mvn(_x(n, g)[0], n.attrs["axes"])
