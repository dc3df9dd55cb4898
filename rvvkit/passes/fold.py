"""Constant folding: a node whose inputs are all constants is evaluated with numpy at build time
and its outputs become constants."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Node
from ..ops import REGISTRY


def try_fold(g: Graph, node: Node) -> bool:
    """Evaluate `node` if it is foldable; return True when its outputs are now constants."""
    op = REGISTRY[node.op]
    if op.evaluate is None:
        return False
    needed = [i for k, i in enumerate(node.inputs)
              if i and (op.value_inputs is None or k in op.value_inputs)]
    if not op.shape_only and not all(g.is_const(i) for i in needed):
        return False
    if not node.inputs and node.op not in ("Constant",):
        return False
    inputs = [_value(g, i) for i in node.inputs]
    values = op.evaluate(node, inputs)
    for name, value in zip(node.outputs, values):
        if not name:
            continue
        t = g.t(name)
        value = np.asarray(value, dtype=t.dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
        if tuple(value.shape) != tuple(t.shape):
            raise ModelError(f"{node.op} node {node.name!r}: folded value has shape "
                             f"{list(value.shape)}, inferred {list(t.shape)}")
        t.data = value
    if op.source is not None:
        g.t(node.outputs[0]).qsource = op.source(node, inputs)
    return True


def _value(g: Graph, name: str):
    """A constant's data; for a run-time tensor (read by shape-only ops), a zero-stride
    placeholder with the right shape and dtype that allocates nothing."""
    if not name:
        return None
    if g.is_const(name):
        return g.const(name)
    t = g.t(name)
    return np.broadcast_to(np.zeros((), t.dtype), t.shape)


def fold_constants(g: Graph) -> int:
    """Fold every foldable node still in the graph; returns how many were removed."""
    folded = [n for n in g.nodes if try_fold(g, n)]
    g.remove_nodes(folded)
    return len(folded)
