"""Dead-code removal: nodes none of whose outputs reach a graph output."""
from __future__ import annotations

from ..ir import Graph


def remove_dead(g: Graph) -> int:
    live = set(g.outputs)
    keep = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs if o):
            keep.append(n)
            live.update(i for i in n.inputs if i)
    removed = len(g.nodes) - len(keep)
    g.nodes = keep[::-1]
    g.prune_tensors()
    return removed
