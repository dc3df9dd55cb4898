"""C lowering of GridSample (semantics: rvvkit/ops/grid.py; kernel:
codegen/kernels/movement/grid.py). Kernel parameters: x, grid, then y."""
from __future__ import annotations

from ...ir import Graph, Node
from ...ops.registry import lowering
from ..kernel import Lowered
from ..kernels.movement.grid import gridsample


@lowering("GridSample")
def _grid_sample(n: Node, g: Graph) -> Lowered:
    return gridsample(n.attrs["_gs"])
