"""Text generation with a decoder artifact: feed the prompt, then pick a token from each step's
logits and feed it back, the key/value cache staying in the session between steps.

Works on any session whose arena persists between runs (host, CUDA); sessions that run each
call in a new process (QEMU, boards) run the same loop in C on the target instead
(runner --generate) and return the same `Generation`."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .decoder import require
from ..errors import InputError


@dataclass(frozen=True)
class Sampling:
    """Greedy (the default, temperature 0) or sampling from the softmax at `temperature`,
    limited to the `top_k` likeliest tokens and the smallest set reaching `top_p`."""
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def check(self) -> None:
        if self.temperature < 0 or self.top_k < 0 or not 0 < self.top_p <= 1:
            raise InputError(f"sampling: temperature {self.temperature} (>= 0), top-k "
                             f"{self.top_k} (>= 0) and top-p {self.top_p} (in (0, 1]) expected")


def pick(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    """The next token from one row of logits."""
    if sampling.temperature == 0:
        return int(np.argmax(logits))
    z = np.asarray(logits, np.float64) / sampling.temperature
    order = np.argsort(-z, kind="stable")
    if sampling.top_k:
        order = order[:sampling.top_k]
    p = np.exp(z[order] - z[order[0]])
    p /= p.sum()
    if sampling.top_p < 1:
        keep = int(np.searchsorted(np.cumsum(p), sampling.top_p)) + 1
        order, p = order[:keep], p[:keep] / p[:keep].sum()
    return int(order[rng.choice(len(order), p=p)])


@dataclass
class Generation:
    prompt: List[int]
    tokens: List[int] = field(default_factory=list)   # generated, in order
    prefill_s: float = 0.0
    decode_s: float = 0.0
    stopped: str = "max_new_tokens"   # or "bound" (the cache is full) or "eos"
    logits: List[np.ndarray] = field(default_factory=list)   # per generated token, if kept

    @property
    def prefill_tps(self) -> float:
        return len(self.prompt) / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tps(self) -> float:
        # the first generated token comes from the prefill's last step
        n = len(self.tokens) - 1
        return n / self.decode_s if n > 0 and self.decode_s else 0.0

    def summary(self) -> str:
        text = (f"prompt {len(self.prompt)} tokens at {self.prefill_tps:.1f} tokens/s, "
                f"generated {len(self.tokens)} at {self.decode_tps:.1f} tokens/s")
        if self.stopped == "bound":
            text += " (stopped early: the artifact's key/value cache is full; rebuild with " \
                    "a larger bound for longer generations)"
        elif self.stopped == "eos" and self.tokens:
            text += f" (stopped at end-of-text token {self.tokens[-1]})"
        else:
            text += " (stopped at the token limit)"
        return text


def eos_ids(dec: dict, eos=None) -> List[int]:
    """The ids that end a generation: `eos` (an id or a list of ids) where given, else the
    model's own, read from its folder at build time (llm/model_config.py; none if it had no
    such file)."""
    if eos is None:
        return [int(t) for t in dec.get("eos") or []]
    items = [eos] if isinstance(eos, (int, np.integer)) else list(eos)
    bad = [t for t in items if not 0 <= int(t) < dec["vocab"]]
    if bad:
        raise InputError(f"eos token id {bad[0]} is outside the vocabulary (0 .. "
                         f"{dec['vocab'] - 1})")
    return sorted({int(t) for t in items})


def check_prompt(dec: dict, prompt: Sequence[int], max_new_tokens: int) -> List[int]:
    ids = [int(t) for t in prompt]
    if not ids:
        raise InputError("the prompt is empty: give at least one token id")
    bad = [t for t in ids if not 0 <= t < dec["vocab"]]
    if bad:
        raise InputError(f"token id {bad[0]} is outside the vocabulary (0 .. "
                         f"{dec['vocab'] - 1})")
    if len(ids) > dec["max_seq"]:
        raise InputError(f"the prompt has {len(ids)} tokens; the artifact's cache holds "
                         f"{dec['max_seq']} (rebuild with a larger bound)")
    if max_new_tokens < 1:
        raise InputError(f"max_new_tokens {max_new_tokens}: at least 1 expected")
    if dec["seq"] != 1:
        raise InputError(f"this artifact takes {dec['seq']} tokens per step; generation needs "
                         "a one-token step (build the decoder with input_ids [1, 1])")
    return ids


def feeds_at(dec: dict, pos: int, tokens: Sequence[int]) -> dict:
    """The decoder's inputs for `tokens` at positions pos, pos + 1, ...: the cache then holds
    pos + len(tokens) live positions."""
    n = len(tokens)
    feeds = {dec["ids"]: np.array([tokens], np.int64)}
    if dec["seqlens"]:
        feeds[dec["seqlens"]] = np.array([pos + n - 1], np.int32)
    if dec["total"]:
        feeds[dec["total"]] = np.array(pos + n, np.int32)
    if dec.get("positions"):
        feeds[dec["positions"]] = np.arange(pos, pos + n, dtype=np.int64)[None]
    if dec.get("mask"):
        feeds[dec["mask"]] = (np.arange(dec["max_seq"]) < pos + n).astype(np.int64)[None]
    return feeds


def prefill_chunk(session) -> int:
    """Prompt tokens per call of the session's prefill plan; 0 when it has none (or cannot
    run it from Python)."""
    pre = session.artifact.meta.get("prefill")
    return int(pre["tokens"]) if pre and hasattr(session, "run_prefill") else 0


def chunks(n: int, chunk: int, bound: int) -> List[Tuple[int, int]]:
    """(start, real tokens) of the prefill calls for the first `n` prompt tokens (the last
    token goes through the decoding plan, which makes logits). A short last chunk is padded
    after its real tokens: causal attention keeps the padding out of their keys and values,
    and what it writes past them lies beyond the live length until a later token overwrites
    it; but padding must fit in the cache (`bound`), and one token is cheaper alone."""
    out: List[Tuple[int, int]] = []
    if chunk < 2:
        return out
    start = 0
    while n - start >= 2 and start + chunk <= bound:
        out.append((start, min(chunk, n - start)))
        start += out[-1][1]
    return out


def steps(session, prompt: Sequence[int], max_new_tokens: int,
          sampling: Sampling = Sampling(), eos=None,
          keep_logits: bool = False, result: Optional[Generation] = None) -> Iterator[int]:
    """Yield generated tokens one at a time (filling `result` as it goes); `eos`: eos_ids."""
    dec = require(session.artifact.meta)
    sampling.check()
    ids = check_prompt(dec, prompt, max_new_tokens)
    stops = set(eos_ids(dec, eos))
    out = result if result is not None else Generation(ids)
    out.prompt = ids
    rng = np.random.default_rng(sampling.seed)

    # a prompt token before the last needs only the steps up to the last cache write
    prefix = getattr(session, "run_prefix", None) if dec.get("cache_steps") else None
    chunk = prefill_chunk(session)

    def step(pos: int, token: int, logits: bool = True) -> np.ndarray:
        feeds = feeds_at(dec, pos, [token])
        if not logits and prefix:
            prefix(feeds, dec["cache_steps"])
            return None
        return session.run(feeds)[dec["logits"]][0, -1]

    t0 = time.perf_counter()
    pos = 0
    for start, count in chunks(len(ids) - 1, chunk, dec["max_seq"]):
        tokens = ids[start:start + count] + [0] * (chunk - count)
        session.run_prefill(feeds_at(dec, start, tokens))
        pos = start + count
    for pos in range(pos, len(ids)):
        logits = step(pos, ids[pos], pos + 1 == len(ids))
    out.prefill_s = time.perf_counter() - t0
    pos = len(ids)
    t0 = time.perf_counter()
    while True:
        token = pick(logits, sampling, rng)
        out.tokens.append(token)
        if keep_logits:
            out.logits.append(np.array(logits))
        out.decode_s = time.perf_counter() - t0
        yield token
        if token in stops:
            out.stopped = "eos"
            return
        if len(out.tokens) >= max_new_tokens:
            return
        if pos >= dec["max_seq"]:
            out.stopped = "bound"
            return
        logits = step(pos, token)
        pos += 1


def generate(session, prompt: Sequence[int], max_new_tokens: int = 32,
             sampling: Sampling = Sampling(), eos=None,
             keep_logits: bool = False,
             on_token: Optional[Callable[[int], None]] = None) -> Generation:
    """Run the whole loop; `on_token` sees each token as it comes."""
    result = Generation(list(prompt))
    for token in steps(session, prompt, max_new_tokens, sampling, eos, keep_logits, result):
        if on_token:
            on_token(token)
    return result
