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
    if op.evaluate is None or not all(g.is_const(i) for i in node.inputs if i):
        return False
    if not node.inputs and node.op not in ("Constant",):
        return False
    values = op.evaluate(node, [g.const(i) if i else None for i in node.inputs])
    for name, value in zip(node.outputs, values):
        if not name:
            continue
        t = g.t(name)
        value = np.ascontiguousarray(np.asarray(value, dtype=t.dtype))
        if tuple(value.shape) != tuple(t.shape):
            raise ModelError(f"{node.op} node {node.name!r}: folded value has shape "
                             f"{list(value.shape)}, inferred {list(t.shape)}")
        t.data = value
    return True


def fold_constants(g: Graph) -> int:
    """Fold every foldable node still in the graph; returns how many were removed."""
    folded = [n for n in g.nodes if try_fold(g, n)]
    g.remove_nodes(folded)
    return len(folded)
