"""C lowerings of the data-movement, index and resize ops (semantics: rvvkit/ops/movement.py,
index.py, resize.py; kernels: codegen/kernels/movement/strided.py, index.py, resize.py). The view
ops (Slice, Expand, Tile, DepthToSpace, SpaceToDepth) are one strided-copy kernel each: the
op decides which view of the output reads which strides of the input."""
from __future__ import annotations

from ...ir import Graph, Node
from ...ops.registry import lowering
from ..kernel import Lowered
from ..kernels.movement import index as idx
from ..kernels.movement import strided as mv
from ..kernels.movement.resize import resize
from ..loops import broadcast_strides, strides_of


def _dt(g: Graph, name: str) -> str:
    return g.t(name).dtype.name


def _shape(g: Graph, name: str):
    return g.t(name).shape


@lowering("Slice")
def _slice(n: Node, g: Graph) -> Lowered:
    st = strides_of(_shape(g, n.inputs[0]))
    triples = n.attrs["_slices"]
    dims = [len(range(*t)) for t in triples]
    strides = [s * t[2] for s, t in zip(st, triples)]
    offset = sum(s * t[0] for s, t, d in zip(st, triples, dims) if d)
    return mv.strided("slice", dims, strides, offset, _dt(g, n.inputs[0]))


@lowering("Expand")
def _expand(n: Node, g: Graph) -> Lowered:
    out = _shape(g, n.outputs[0])
    return mv.strided("expand", out, broadcast_strides(_shape(g, n.inputs[0]), out), 0,
                      _dt(g, n.inputs[0]))


@lowering("Tile")
def _tile(n: Node, g: Graph) -> Lowered:
    x = _shape(g, n.inputs[0])
    dims, strides = [], []
    for d, r, s in zip(x, n.attrs["_repeats"], strides_of(x)):
        dims += [r, d]
        strides += [0, s]
    return mv.strided("tile", dims, strides, 0, _dt(g, n.inputs[0]))


@lowering("DepthToSpace", "SpaceToDepth")
def _depth_space(n: Node, g: Graph) -> Lowered:
    view, perm = n.attrs["_view"]
    st = strides_of(view)
    return mv.strided(n.op.lower(), [view[p] for p in perm], [st[p] for p in perm], 0,
                      _dt(g, n.inputs[0]))


@lowering("Split")
def _split(n: Node, g: Graph) -> Lowered:
    return mv.split(_shape(g, n.inputs[0]), n.attrs["axis"], n.attrs["_sizes"],
                    _dt(g, n.inputs[0]))


@lowering("Pad")
def _pad(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    return mv.pad(_shape(g, n.inputs[0]), a["_pads"], a["mode"], a["_value"],
                  _dt(g, n.inputs[0]))


@lowering("Trilu")
def _trilu(n: Node, g: Graph) -> Lowered:
    return mv.trilu(_shape(g, n.inputs[0]), bool(n.attrs["upper"]), n.attrs["_k"],
                    _dt(g, n.inputs[0]))


@lowering("OneHot")
def _onehot(n: Node, g: Graph) -> Lowered:
    return mv.onehot(_shape(g, n.inputs[0]), n.attrs["_depth"], n.attrs["axis"],
                     _dt(g, n.inputs[0]), _dt(g, n.inputs[2]))


@lowering("Resize", "Upsample")
def _resize(n: Node, g: Graph) -> Lowered:
    return resize(n.attrs["_rz"], _dt(g, n.inputs[0]))


def _data_idx(n: Node, g: Graph):
    return _shape(g, n.inputs[0]), _shape(g, n.inputs[1]), _dt(g, n.inputs[0]), \
        _dt(g, n.inputs[1])


@lowering("Gather")
def _gather(n: Node, g: Graph) -> Lowered:
    data, ind, dt, it = _data_idx(n, g)
    return idx.gather(data, g.t(n.inputs[1]).size, n.attrs["axis"], dt, it)


@lowering("GatherElements")
def _gather_elements(n: Node, g: Graph) -> Lowered:
    data, ind, dt, it = _data_idx(n, g)
    return idx.gather_elements(data, ind, n.attrs["axis"], dt, it)


@lowering("GatherND")
def _gather_nd(n: Node, g: Graph) -> Lowered:
    data, ind, dt, it = _data_idx(n, g)
    return idx.gather_nd(data, ind, n.attrs["batch_dims"], dt, it)


@lowering("ScatterND")
def _scatter_nd(n: Node, g: Graph) -> Lowered:
    data, ind, dt, it = _data_idx(n, g)
    return idx.scatter_nd(data, ind, n.attrs["reduction"], dt, it)


@lowering("ScatterElements", "Scatter")
def _scatter_elements(n: Node, g: Graph) -> Lowered:
    data, ind, dt, it = _data_idx(n, g)
    return idx.scatter_elements(data, ind, n.attrs["axis"], n.attrs["reduction"], dt, it)
