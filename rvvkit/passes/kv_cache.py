"""Key/value caches become session state, in either form a decoder is exported in:
- a GroupQueryAttention whose past key/value are graph inputs and whose present key/value are
  graph outputs of the same shape (onnxruntime-genai's shared past/present buffer) is switched
  to work in place on one arena buffer per cache;
- a cache that grows by Concat (transformers, optimum: present = Concat(past, new) on the
  positions axis, past a graph input, present a graph output, built with N - 1 past positions
  by frontend/decoder_dims.py) becomes one buffer of the N present positions, which an
  rvvkit.CacheWrite updates in place at the position the attention mask says (its ones); what
  read the Concat's output reads that buffer. An ONNX Attention with past/present likewise.

The pair leaves the graph's inputs and outputs and is recorded in `graph.state` as
(cache tensor, present output name); the planner keeps the buffer for the whole plan, so it
survives from one run to the next, and no run copies the cache in or out: a decoding step
writes its new keys and values at their positions and reads the live prefix."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Node, Tensor
from ..ops.llm.cache_write import CACHE_WRITE
from ..ops.registry import REGISTRY
from . import half_state
from .cached_attention import fuse_cached_attention

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


def _mask_input(g: Graph, pairs: int) -> str:
    """The attention mask that says where a growing cache's new tokens go (its count of ones)
    and gives the positions past the live length no weight. Without one the cache cannot be
    kept at its bound: the attention would weigh the unused positions."""
    hits = [i for i in g.inputs if "mask" in i.lower() and g.t(i).dtype == np.int64 and
            len(g.t(i).shape) == 2]
    if len(hits) != 1:
        raise ModelError(
            f"{pairs} key/value caches grow by concatenation, which rvvkit keeps at the "
            "--max-seq bound; that needs exactly one int64 [batch, total] attention_mask "
            f"input (found {hits or 'none'} among {', '.join(g.inputs)}): export the model "
            "with its attention mask")
    return hits[0]


def _grown_pair(g: Graph, node, uses) -> bool:
    """Is `node` present = Concat(past, new) on the positions axis of a past/present pair?"""
    if node.op != "Concat" or len(node.inputs) != 2:
        return False
    past, present = node.inputs[0], node.outputs[0]
    shape = g.t(present).shape
    return (len(shape) == 4 and node.attrs.get("axis") in (2, -2) and past in g.inputs and
            present in g.outputs and len(uses.get(past, [])) == 1 and
            g.outputs.count(present) == 1 and g.t(past).shape[:2] == shape[:2])


def _to_cache_write(g: Graph, node, past: str, new: str, present: str, live: str) -> None:
    """Make `node` the in-place write of `new` into `past`, which becomes the whole cache, at
    the positions before the live length `live`."""
    g.t(past).shape = g.t(present).shape
    node.op, node.inputs, node.outputs = CACHE_WRITE, [past, new, live], [present]
    node.attrs = {}
    REGISTRY[CACHE_WRITE].infer(node, g)
    g.inputs.remove(past)
    g.outputs.remove(present)


def _live_length(g: Graph, mask: str) -> str:
    """int64 [batch]: the mask's count of ones, the live length of the caches (made once,
    first in the graph: the mask is a graph input)."""
    name = g.fresh_name(f"{mask}/live_length")
    node = Node("ReduceSum", name, [mask], [name],
                {"axes": (1,), "keepdims": 0, "canonical": 1})
    (shape, dtype), = REGISTRY["ReduceSum"].infer(node, g)
    g.add_tensor(Tensor(name, shape, np.dtype(dtype)))
    g.nodes.insert(0, node)
    return name


def _attention_pairs(g: Graph, node, uses) -> bool:
    """Is `node` an ONNX Attention that appends to a past/present pair (4-D, masked, one
    query position or not causal) whose caches can become state?"""
    ins, outs = list(node.inputs) + [""] * 7, list(node.outputs) + [""] * 4
    if node.op != "Attention" or not ins[3] or outs[3] or ins[6] or \
            len(g.t(ins[1]).shape) != 4:
        return False
    if node.attrs.get("is_causal") and g.t(ins[0]).shape[2] != 1:
        return False
    return all(ins[i] in g.inputs and len(uses.get(ins[i], [])) == 1 and
               outs[o] in g.outputs and g.outputs.count(outs[o]) == 1
               for i, o in ((4, 1), (5, 2)))


def _grown_to_state(g: Graph) -> List[Tuple[str, str]]:
    uses = g.consumers()
    concats = [n for n in g.nodes if _grown_pair(g, n, uses)]
    attentions = [n for n in g.nodes if _attention_pairs(g, n, uses)]
    if not concats and not attentions:
        return []
    live = _mask_input(g, 2 * len(attentions) + len(concats))
    made, lengths = [], []

    def length() -> str:   # the live length, made once, when a cache or attention first reads it
        if not lengths:
            lengths.append(_live_length(g, live))
        return lengths[0]

    for node in concats:
        made.append((node.inputs[0], node.outputs[0]))
        _to_cache_write(g, node, node.inputs[0], node.inputs[1], node.outputs[0], length())
    g.state.extend(made)   # state from here on: what removes dead code keeps its writers
    if concats:   # the exported attention over them reads only the live prefix
        fuse_cached_attention(g, length)
        _chunk_causal(g, length())
    for node in attentions:
        # Attention(q, k, v, mask, past_k, past_v) -> y, present_k, present_v becomes two
        # cache writes and an Attention over the whole caches, which the mask limits to the
        # live positions (and, with one query, causality adds nothing to it)
        q, k, v, mask, pk, pv = node.inputs[:6]
        y, prk, prv = node.outputs[:3]
        length()   # made first: it goes to the graph's start, which moves the nodes after
        at = g.nodes.index(node)
        writes = [Node(node.op, f"{node.name}/cache_{kind}", [], [])
                  for kind in ("key", "value")]
        for w, (past, new, present) in zip(writes, ((pk, k, prk), (pv, v, prv))):
            _to_cache_write(g, w, past, new, present, length())
            made.append((past, present))
            g.state.append((past, present))
        g.nodes[at:at] = writes
        # nonpad_kv_seqlen = the live length: the attention reads only the keys before it
        node.inputs, node.outputs = [q, prk, prv, mask, "", "", length()], [y]
        node.attrs.pop("is_causal", None)
        REGISTRY["Attention"].infer(node, g)
    if attentions:
        _chunk_causal(g, length())
    return made


def _chunk_causal(g: Graph, live: str) -> None:
    """Attention over the session caches for several new tokens at once (a decoder's prefill
    plan): the exported mask was made for the caches' static shapes, as if the new tokens sat
    at the end of the bound; they sit just before the live length. So such an attention drops
    that mask and is causal from the live length (query i at position live - S + i), which is
    what the exported mask says of a contiguous live prefix, the only kind generation feeds."""
    for n in g.nodes:
        if n.op == "Attention" and len(n.inputs) > 6 and n.inputs[6] == live and \
                n.attrs["dims"][3] > 1:
            n.inputs[3] = ""
            n.attrs["is_causal"] = 1
            REGISTRY["Attention"].infer(n, g)


def caches_to_state(g: Graph, bounded: bool = False) -> List[Tuple[str, str]]:
    """Turn every eligible past/present pair into in-place state; returns the new pairs.
    Caches that grow (Concat, Attention) only when `bounded`: built with --max-seq, whose past
    is one position short of the bound; anywhere else past + new -> present is just what the
    model computes, once."""
    halves = half_state.unwrap(g, bounded)   # float16 caches: float32 state, no Casts
    made = _grown_to_state(g) if bounded else []   # added to g.state as made
    grown = len(made)
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
    half_state.rewrap(g, halves)
    if made:
        half_state.float_outputs(g)
    g.state.extend(made[grown:])
    g.prune_tensors()
    return made
