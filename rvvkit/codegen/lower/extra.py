"""C lowerings of LpPool (any spatial rank), Det, SwiGLU and RotaryEmbedding (semantics:
rvvkit/ops/pool_extra.py and rvvkit/ops/transformer_extra.py)."""
from __future__ import annotations

import math

from ...ir import Graph, Node
from ...ops.registry import lowering
from ..kernel import Lowered
from ..kernels.math.det import det
from ..kernels.reduce.lppool import lppool
from ..kernels.llm.rope import rope, swiglu


@lowering("LpPool")
def _lppool(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    return lppool(a["p"], g.t(n.inputs[0]).shape, g.t(n.outputs[0]).shape, a["kernel"],
                  a["strides"], a["pads"], a["dilations"])


@lowering("Det")
def _det(n: Node, g: Graph) -> Lowered:
    return det(g.t(n.inputs[0]).shape)


@lowering("SwiGLU")
def _swiglu(n: Node, g: Graph) -> Lowered:
    return swiglu(math.prod(g.t(n.inputs[0]).shape), n.attrs["alpha"])


@lowering("RotaryEmbedding")
def _rope(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    positions = len(n.inputs) > 3 and bool(n.inputs[3])
    return rope(g.t(n.inputs[0]).shape, g.t(n.inputs[1]).shape[0] if positions else 0,
                a["heads"], a["head"], a["rot"], a["interleaved"], a["layout4d"], positions)
