"""A decoder's prefill plan: the same model built a second time for a chunk of prompt tokens
per call, so that a prompt's tokens go through each weight matrix together (a matrix product
per chunk instead of a matrix-vector product per token).

It shares the artifact's weights and the session's key/value caches with the decoding plan
(codegen/plan.py's `base`), writes the chunk's keys and values into the caches in place, and
computes no logits: the graph's logits output is dropped once the graph is optimised (and
the weights' layouts pinned while the LM head is still there), so the final norm and the LM
head, a large share of a small model's work, are not run for prompt tokens.
The prompt's last token goes through the decoding plan, which makes the logits the first
generated token is picked from."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from ..codegen.lower.llm import GBQ, gather_layout
from ..codegen.plan import Plan, build_plan
from .decoder import CACHE_WRITERS
from ..errors import ModelError
from ..frontend.decoder_dims import decoder_shapes, grows_by_concat
from ..frontend.onnx import from_onnx
from ..passes import optimize
from ..passes.dce import remove_dead
from ..passes.kv_cache import caches_to_state


def chunk_for(proto, max_seq: int, tokens: int) -> int:
    """The chunk a bound of `max_seq` positions allows: a cache that grows by Concat keeps at
    least one past position beside the chunk."""
    return max(0, min(tokens, max_seq - grows_by_concat(proto)))


def _share_layouts(g, chunk: int) -> None:
    """Weights laid out as the decoding plan lays them out, so that the blob holds one copy:
    a float MatMul's (or Gemm's) constant B packed as for one row of A (the decoding step's),
    a table tied to the LM head kept in the head's layout (decided while the head is still in
    the graph)."""
    for n in g.nodes:
        if n.op == GBQ:
            n.attrs["layout"] = gather_layout(n, g)
        elif n.op in ("MatMul", "Gemm") and g.is_const(n.inputs[1]) and \
                len(g.t(n.inputs[0]).shape) >= 2 and g.t(n.inputs[0]).shape[-2] == chunk:
            n.attrs["pack_rows"] = 1


def _unaware_readers(g) -> List[str]:
    """Nodes that read a session cache without knowing where the live prefix ends: only the
    cache writes and the attentions that take the live length place a chunk right."""
    state = {name for pair in g.state for name in pair}
    odd = []
    for n in g.nodes:
        if not state.intersection(n.inputs) or n.op in CACHE_WRITERS:
            continue
        if n.op == "Attention" and n.attrs.get("is_causal") and len(n.inputs) > 6 \
                and n.inputs[6]:
            continue
        odd.append(f"{n.op} {n.name!r}")
    return odd


def _unshareable(g, base: Plan, made) -> str:
    """Why the chunk's graph `g` (whose caches `made` became state) cannot run beside the
    decoding plan `base` on its caches, or ''."""
    odd = _unaware_readers(g)
    if odd:
        return f"the caches are read by {odd}, which would take the chunk for the last " \
               "positions of the bound"
    if len(made) != len(base.state):
        return f"it keeps {len(made)} key/value caches in the session, the decoding plan " \
               f"{len(base.state)}"
    ins = [n for n, _, _ in base.inputs]
    if g.inputs != ins or g.outputs:
        return f"it takes {g.inputs} and gives {g.outputs}, the decoding plan takes {ins}"
    return ""


def prefill_plan(proto, base: Plan, dec: Dict, tokens: int,
                 input_shapes: Optional[Dict[str, Sequence[int]]], *, opt_level: int,
                 name: Optional[str], vlen: Optional[int],
                 say: Callable[[str], None], precision: str = "fp32",
                 caches: Optional[Sequence[str]] = None) -> Optional[Plan]:
    """The prefill plan of the decoder `proto` built on `base` (its decoding plan, whose roles
    `dec` are decoder.decoder_meta's), or None when a chunk would hold one token. `caches`:
    the cache inputs --cache-inputs named."""
    chunk = chunk_for(proto, dec["max_seq"], tokens)
    if chunk < 2:
        return None
    shapes = decoder_shapes(proto, dec["max_seq"], chunk, given=input_shapes, names=caches)
    # the user's shapes pin what the model left open; the chunk's own dimensions stay
    shapes = {**{k: v for k, v in dict(input_shapes or {}).items() if k not in shapes},
              **shapes}
    try:
        g = from_onnx(proto, input_shapes=shapes, name=name)
    except ModelError as exc:
        # e.g. a mask subgraph written for one new token at a time: decoding still works
        say(f"no prefill plan of {chunk} tokens (the graph does not take {chunk} tokens at "
            f"once: {str(exc).splitlines()[0]}): prompts run a token at a time")
        return None
    optimize(g, opt_level)
    _share_layouts(g, chunk)
    g.outputs.remove(dec["logits"])   # prompt tokens need no logits
    remove_dead(g)   # the LM head, the final norm, the last layer's MLP
    made = caches_to_state(g, bounded=True)
    why = _unshareable(g, base, made)
    if why:
        # e.g. an ONNX Attention with is_causal over a past cache, whose causal mask ONNX
        # aligns to the first key: decoding still works, prompts go a token at a time
        say(f"no prefill plan of {chunk} tokens ({why}): prompts run a token at a time")
        return None
    plan = build_plan(g, vlen=vlen, base=base, scope="prefill/", precision=precision)
    plan.chunk = chunk
    say(f"planned a prefill plan of {chunk} tokens per call: {len(plan.steps)} steps")
    return plan
