"""What a decoder artifact's generation loop needs to know, found once at build time and kept in
the meta: which graph input takes the token ids and which the cache lengths, which output is
the logits, the cache bound and the vocabulary. Only artifacts with key/value caches kept as
session state (passes/kv_cache.py) are decoders."""
from __future__ import annotations

from typing import Dict, List, Optional

from ..errors import ArtifactError


# Prompt tokens per call of a decoder's prefill plan (rvvkit/llm/prefill.py) by default: enough
# that a weight row loaded into a vector register serves many tokens, few enough that the
# chunk's activations stay in a board's L2.
PREFILL_TOKENS = 16


def _find(items, want) -> Optional[str]:
    hits = [name for name, shape, dtype in items if want(name, tuple(shape), dtype)]
    return hits[0] if len(hits) == 1 else None


def decoder_meta(plan) -> Optional[Dict]:
    """The roles of a planned decoder's inputs and outputs, or None (no cache in the session,
    or roles not found: `require` then says what was looked at)."""
    if not plan.state:
        return None
    bound = min(int(shape[2]) for _, _, _, shape, _ in plan.state)
    # onnxruntime-genai's form: an attention mask over the cache's positions (1: live), from
    # which the graph computes the lengths; else the lengths are inputs
    mask = _find(plan.inputs, lambda n, s, d: d == "int64" and s == (1, bound) and
                 "mask" in n.lower())
    # RoPE fed by position ids (the token's position)
    positions = _find(plan.inputs, lambda n, s, d: d == "int64" and s == (1, 1) and
                      "position" in n.lower())
    ids = _find(plan.inputs, lambda n, s, d: d == "int64" and len(s) == 2 and s[0] == 1 and
                n not in (mask, positions))
    seqlens = _find(plan.inputs, lambda n, s, d: d == "int32" and s == (1,))
    total = _find(plan.inputs, lambda n, s, d: d == "int32" and s == ())
    if not ids or not (seqlens or mask):
        return None
    seq = dict((n, s) for n, s, _ in plan.inputs)[ids][1]
    logits = _find(plan.outputs, lambda n, s, d: d == "float32" and len(s) == 3 and
                   s[:2] == (1, seq))
    if not logits:
        return None
    extra = [n for n, _, _ in plan.inputs if n not in (ids, seqlens, total, mask, positions)]
    if extra:
        return None
    return {"ids": ids, "seqlens": seqlens, "total": total, "mask": mask,
            "positions": positions, "logits": logits,
            "seq": int(seq), "vocab": int(dict((n, s) for n, s, _ in plan.outputs)[logits][2]),
            "max_seq": bound,
            "cache_steps": _cache_steps(plan)}


# the ops that write a session cache (the others bound to one only read it)
CACHE_WRITERS = ("com.microsoft.GroupQueryAttention", "rvvkit.CacheWrite")


def _cache_steps(plan) -> int:
    """How many leading steps a prompt token that is not the last needs: up to the last step
    that writes a cache (what follows only makes logits, which nobody reads then)."""
    offsets = {off for _, _, off, _, _ in plan.state}
    last = max(i for i, step in enumerate(plan.steps) if step.op in CACHE_WRITERS and
               any(a.kind == "arena" and a.offset in offsets for a in step.args))
    return last + 1


def require(meta: Dict) -> Dict:
    """The decoder roles of an artifact's meta, or one line on why it cannot generate."""
    dec = meta.get("decoder")
    if dec:
        return dec
    inputs: List[str] = [f"{i['name']} {i['dtype']}{i['shape']}" for i in meta["inputs"]]
    if not meta.get("state"):
        raise ArtifactError(
            "this artifact is not a decoder with a key/value cache: no past/present cache pair "
            "(GroupQueryAttention with past_key_values inputs and present outputs of one "
            "shape, or present = Concat(past, new)) was found; build it with --max-seq; its "
            f"inputs are {', '.join(inputs) or 'none'}")
    raise ArtifactError(
        "cannot find the decoder's token ids (int64 [1, S]), cache length (int32 [1], or an "
        "int64 attention mask over the cache) and logits (float32 [1, S, vocab]) among "
        f"inputs {', '.join(inputs)}")
