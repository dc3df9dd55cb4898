"""Key/value caches become session state, in either form a decoder is exported in:
- a GroupQueryAttention whose past key/value are graph inputs and whose present key/value are
  graph outputs of the same shape (onnxruntime-genai's shared past/present buffer) is switched
  to work in place on one arena buffer per cache;
- a cache that grows by Concat (transformers, optimum: present = Concat(past, new) on the
  positions axis, past a graph input, present a graph output, built with N - 1 past positions
  by frontend/decoder_dims.py) becomes one buffer of the N present positions, which an
  rvvkit.CacheWrite updates in place at the position the attention mask (or the position ids)
  says; what read the Concat's output reads that buffer.

The pair leaves the graph's inputs and outputs and is recorded in `graph.state` as
(cache tensor, present output name); the planner keeps the buffer for the whole plan, so it
survives from one run to the next, and no run copies the cache in or out: a decoding step
writes its new keys and values at their positions and reads the live prefix."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..ir import Graph
from ..ops.cache_write import CACHE_WRITE
from ..ops.registry import REGISTRY

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


def _live_source(g: Graph) -> Tuple[str, str]:
    """(source, input) telling a growing cache where the new tokens go: the attention mask,
    else the position ids; ("", "") if the model takes neither."""
    for source, key in (("mask", "mask"), ("positions", "position")):
        hits = [i for i in g.inputs if key in i.lower() and g.t(i).dtype == np.int64 and
                len(g.t(i).shape) == 2]
        if len(hits) == 1:
            return source, hits[0]
    return "", ""


def _grown_pair(g: Graph, node, uses) -> bool:
    """Is `node` present = Concat(past, new) on the positions axis of a past/present pair?"""
    if node.op != "Concat" or len(node.inputs) != 2:
        return False
    past, present = node.inputs[0], node.outputs[0]
    shape = g.t(present).shape
    return (len(shape) == 4 and node.attrs.get("axis") in (2, -2) and past in g.inputs and
            present in g.outputs and len(uses.get(past, [])) == 1 and
            g.outputs.count(present) == 1 and g.t(past).shape[:2] == shape[:2])


def _grown_to_state(g: Graph) -> List[Tuple[str, str]]:
    uses = g.consumers()
    pairs = [n for n in g.nodes if _grown_pair(g, n, uses)]
    source, live = _live_source(g) if pairs else ("", "")
    if not live:
        return []
    made = []
    for node in pairs:
        past, present = node.inputs[0], node.outputs[0]
        # the past input becomes the whole cache, which the write updates in place
        g.t(past).shape = g.t(present).shape
        node.op, node.inputs, node.attrs = CACHE_WRITE, [past, node.inputs[1], live], \
            {"source": source}
        REGISTRY[CACHE_WRITE].infer(node, g)
        g.inputs.remove(past)
        g.outputs.remove(present)
        made.append((past, present))
    return made


def caches_to_state(g: Graph) -> List[Tuple[str, str]]:
    """Turn every eligible past/present pair into in-place state; returns the new pairs."""
    made = _grown_to_state(g)
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
