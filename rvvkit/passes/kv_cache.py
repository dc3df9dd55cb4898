"""Key/value caches become session state: a GroupQueryAttention whose past key/value are graph
inputs and whose present key/value are graph outputs of the same shape (onnxruntime-genai's
shared past/present buffer) is switched to work in place on one arena buffer per cache.

The pair leaves the graph's inputs and outputs and is recorded in `graph.state` as
(cache tensor, present output name); the planner keeps the buffer for the whole plan, so it
survives from one run to the next, and no run copies the cache in or out: a decoding step
writes its new keys and values at their positions and reads the live prefix."""
from __future__ import annotations

from typing import List, Tuple

from ..ir import Graph

GQA = "com.microsoft.GroupQueryAttention"


def _pairs(g: Graph, node) -> List[Tuple[int, int]]:
    """(input index, output index) of the past/present pairs of `node` that can be state."""
    uses = g.consumers()
    out = []
    for i, o in ((3, 1), (4, 2)):
        past = node.inputs[i] if len(node.inputs) > i else ""
        present = node.outputs[o] if len(node.outputs) > o else ""
        if not past or not present or past not in g.inputs or present not in g.outputs:
            return []
        if len(uses.get(past, [])) != 1 or g.use_count(present) != 1 or \
                g.t(past).shape != g.t(present).shape:
            return []
        out.append((i, o))
    return out


def caches_to_state(g: Graph) -> List[Tuple[str, str]]:
    """Turn every eligible past/present pair into in-place state; returns the new pairs."""
    made = []
    for node in g.nodes:
        if node.op != GQA:
            continue
        pairs = _pairs(g, node)
        for i, o in pairs:
            past, present = node.inputs[i], node.outputs[o]
            g.inputs.remove(past)
            g.outputs.remove(present)
            node.outputs[o] = ""
            made.append((past, present))
        if pairs:
            node.attrs["kv_state"] = True
            while node.outputs and not node.outputs[-1]:
                node.outputs.pop()
    g.state.extend(made)
    g.prune_tensors()
    return made
