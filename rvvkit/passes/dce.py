"""Dead-code removal: nodes none of whose outputs reach a graph output or the session's state
(a key/value cache written in place: by a node whose output names it, or by an attention
switched to update its cache inputs, `kv_state`; a decoder's prefill plan has no graph
outputs at all, only cache writes)."""
from __future__ import annotations

from ..ir import Graph


def remove_dead(g: Graph) -> int:
    live = set(g.outputs) | {name for pair in g.state for name in pair}
    keep = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outputs if o) or n.attrs.get("kv_state"):
            keep.append(n)
            live.update(i for i in n.inputs if i)
    removed = len(g.nodes) - len(keep)
    g.nodes = keep[::-1]
    g.prune_tensors()
    return removed
