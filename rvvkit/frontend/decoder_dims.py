"""`--max-seq N`: the static shapes of a decoder's inputs for a one-token decoding step with a
key/value cache of N positions, from the model's symbolic dimensions (onnxruntime-genai
writes [batch_size, kv_heads, past_sequence_length, head] caches and [batch_size,
sequence_length] ids). The cache length is the bound; the live length is run-time data.

Two forms: onnxruntime-genai's GroupQueryAttention shares one buffer of N positions between
past and present; everywhere else (transformers, optimum) the present cache is the past one
with the new token appended by Concat, so the past is given N - 1 positions and the present
has N (passes/kv_cache.py then keeps that present buffer as the session's cache)."""
from __future__ import annotations

import fnmatch
import re
from typing import Dict, Iterable, List, Optional, Sequence, Union

from ..errors import ModelError
from . import packed_qkv
from .proto_facts import Facts, attr

CACHE_NAME = re.compile(r"past|cache", re.IGNORECASE)
# a symbolic dimension that spans the cache (an attention mask over every position)
TOTAL_DIM = re.compile(r"total|max|past|cache|kv", re.IGNORECASE)


def _dims(vi) -> List:
    return [d.dim_value if d.HasField("dim_value") else None
            for d in vi.type.tensor_type.shape.dim]


def _head_size(facts: Facts, cache: str):
    """The head size of a cache whose head dimension is symbolic (onnxruntime-genai 0.18 writes
    `kv_cache_dim`): that of the GroupQueryAttention reading it."""
    for node in facts.proto.graph.node:
        if node.op_type == packed_qkv.GQA and cache in node.input[3:5]:
            return packed_qkv.head_size(facts, node)
    return None


def _read_as_caches(proto) -> set:
    """Inputs the graph uses as caches, whatever their names: the past key/value of a
    GroupQueryAttention or an ONNX Attention, or the first input of a Concat on the positions
    axis whose output is a graph output (present = Concat(past, new))."""
    outputs = {o.name for o in proto.graph.output}
    found = set()
    for n in proto.graph.node:
        if n.op_type == "GroupQueryAttention":
            found.update(n.input[3:5])
        elif n.op_type == "Attention" and n.domain in ("", "ai.onnx"):
            found.update(n.input[4:6])
        elif n.op_type == "Concat" and n.output[0] in outputs and attr(n, "axis") in (2, -2):
            found.add(n.input[0])
    return found - {""}


Patterns = Union[None, str, Iterable[str]]


def _patterns(given: Patterns) -> List[str]:
    """--cache-inputs/--cache-outputs: comma-separated names or shell patterns (kv_in_*)."""
    if given is None:
        return []
    items = given.split(",") if isinstance(given, str) else list(given)
    return [p.strip() for p in items if p.strip()]


def _matching(flag: str, patterns: List[str], names: List[str]) -> List[str]:
    """The names any pattern matches, in graph order; a pattern that matches none is an error
    naming what there is."""
    for p in patterns:
        if not fnmatch.filter(names, p):
            raise ModelError(f"{flag} {p!r} matches none of the model's "
                             f"{'inputs' if 'input' in flag else 'outputs'}: "
                             f"{', '.join(names) or 'none'}")
    return [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def named_caches(proto, given: Patterns) -> Optional[List[str]]:
    """The inputs `--cache-inputs` names (every one a rank-4 [batch, kv_heads, positions,
    head] tensor), or None where it was not given and the heuristics below decide."""
    patterns = _patterns(given)
    if not patterns:
        return None
    inits = {i.name for i in proto.graph.initializer}
    inputs = {vi.name: vi for vi in proto.graph.input if vi.name not in inits}
    names = _matching("--cache-inputs", patterns, list(inputs))
    odd = [f"{n} {_dims(inputs[n])}" for n in names if len(_dims(inputs[n])) != 4]
    if odd:
        raise ModelError(f"--cache-inputs names inputs that are not rank-4 [batch, kv_heads, "
                         f"positions, head] caches: {', '.join(odd)}")
    return names


def check_cache_outputs(proto, given: Patterns, kept: Sequence[str]) -> None:
    """Every output `--cache-outputs` names must have become an in-place cache (`kept`: the
    presents passes/kv_cache.py turned into session state); else one line on what rvvkit
    recognises."""
    patterns = _patterns(given)
    if not patterns:
        return
    names = _matching("--cache-outputs", patterns, [o.name for o in proto.graph.output])
    missed = [n for n in names if n not in kept]
    if missed:
        raise ModelError(
            f"--cache-outputs: {', '.join(missed)} could not be kept as in-place caches: "
            "rvvkit keeps a present output that is Concat(past, new) on the positions axis "
            "of a cache input, or the present key/value of a GroupQueryAttention or ONNX "
            "Attention (build with --max-seq; name the pasts with --cache-inputs)")


def cache_inputs(proto, names: Optional[Sequence[str]] = None) -> list:
    """The rank-4 key/value cache inputs: those `names` lists where given (named_caches), else
    named past*/...cache..., or read as caches."""
    inits = {i.name for i in proto.graph.initializer}
    if names is not None:
        return [vi for vi in proto.graph.input if vi.name in names and vi.name not in inits]
    used = _read_as_caches(proto)
    return [vi for vi in proto.graph.input
            if vi.name not in inits and len(_dims(vi)) == 4 and
            (CACHE_NAME.search(vi.name) or vi.name in used)]


def unbounded_caches(proto, given: Optional[Dict[str, Sequence[int]]] = None,
                     names: Optional[Sequence[str]] = None) -> List[str]:
    """The cache inputs whose length is symbolic and not given."""
    return [vi.name for vi in cache_inputs(proto, names)
            if _dims(vi)[2] is None and vi.name not in (given or {})]


def grows_by_concat(proto) -> bool:
    """True unless onnxruntime-genai's GroupQueryAttention keeps past and present one size."""
    return not any(n.op_type == "GroupQueryAttention" for n in proto.graph.node)


def decoder_shapes(proto, max_seq: int, new_tokens: int = 1,
                   given: Optional[Dict[str, Sequence[int]]] = None,
                   head_size: Optional[int] = None,
                   names: Optional[Sequence[str]] = None) -> Dict[str, List[int]]:
    """{input name: static shape} for every input with a symbolic dimension, for a step that
    takes `new_tokens` tokens (1: decoding; more: a prompt chunk of the prefill plan); a cache
    in `given` (--input-shape) takes its head size from there, else from the attention reading
    it, else `head_size` (genai_config.json's); `names`: the caches --cache-inputs named."""
    given = dict(given or {})
    grows = grows_by_concat(proto)
    if max_seq < new_tokens + grows:
        raise ModelError(f"--max-seq {max_seq}: at least {new_tokens + grows} expected")
    past_len = max_seq - new_tokens if grows else max_seq
    inits = {i.name for i in proto.graph.initializer}
    inputs = [vi for vi in proto.graph.input if vi.name not in inits]
    caches = cache_inputs(proto, names)
    if not caches:
        looked = ", ".join(f"{vi.name} {_dims(vi)}" for vi in inputs) or "none"
        raise ModelError("--max-seq: found no key/value cache among the inputs (looked for "
                         "rank-4 inputs named past*/…cache…, or read as a past key/value by "
                         "an attention or by a Concat making a graph output; the inputs are "
                         f"{looked}); name them with --cache-inputs PATTERN")
    shapes: Dict[str, List[int]] = {}
    facts = Facts(proto)
    for vi in caches:
        dims = _dims(vi)
        if dims[2] is not None and dims[2] != past_len:
            raise ModelError(f"--max-seq {max_seq}: cache input {vi.name!r} has a fixed length "
                             f"of {dims[2]} positions (build without --max-seq, or re-export)")
        head = dims[3] if dims[3] is not None else \
            (list(given[vi.name])[3] if len(given.get(vi.name, ())) == 4 else
             _head_size(facts, vi.name) or head_size)
        shapes[vi.name] = [1 if dims[0] is None else dims[0], dims[1], past_len, head]
        if None in shapes[vi.name]:
            raise ModelError(f"cache input {vi.name!r} {dims}: only its batch and length "
                             "may be symbolic (a symbolic head size is read from the attention "
                             "reading the cache where the graph states its width; else give it: "
                             f"--input-shape {vi.name}=1,{dims[1]},{past_len},HEAD)")
    for vi in inputs:
        dims = _dims(vi)
        if vi.name in shapes or None not in dims:
            continue
        # the cache's length (an attention mask, with a 1 at each live position), else the
        # batch and the new tokens of one decoding step
        names = [d.dim_param for d in vi.type.tensor_type.shape.dim]
        shapes[vi.name] = [d if d is not None else
                           max_seq if axis and TOTAL_DIM.search(name) else
                           new_tokens if axis else 1
                           for axis, (d, name) in enumerate(zip(dims, names))]
    return shapes
