"""Decoding on this machine: rvvkit's host executor against onnxruntime on the same ONNX file,
prompt and generation timed apart, at one thread and at every core.

    python3 benchmarks/bench_llm_host.py [--config qwen2.5-0.5b] [--forms int4,int8]
                                         [--threads 1,all] [--prompt 64] [--tokens 16]
                                         [--repeat 3] [--json F]
    (also: python3 benchmarks/bench_llm.py host ...)

For each form (llm_forms.COUNT_FORMS: int4 / int8 weights, block 32, int8 activations, the
token table quantized alike) and thread count, rounds interleave the two engines:
- prompt: a `--prompt`-token prompt up to the first token's logits. rvvkit runs its prefill
  plan (chunks of 16) and the last token through the decoding plan (Generation.prefill_s);
  onnxruntime takes the whole prompt in one call (input_ids [1, P], as onnxruntime-genai
  feeds it). Prompt tokens/s = P / the median round's time.
- generation: a 4-token prompt, then `--tokens` greedy tokens; tokens/s counts the tokens
  after the first (each one decoding step: rvvkit's Generation.decode_s, onnxruntime's
  one-token calls), so neither side's prompt is in it.
The greedy tokens of both engines are compared (exit 1 when they differ)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rvvkit  # noqa: E402
import peer_rvvkit as R  # noqa: E402
from llm_forms import COUNT_FORMS, count_model  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.zoo import llm as zoo_llm  # noqa: E402


def _caches(sess, bound: int) -> dict:
    out = {}
    for vi in sess.get_inputs():
        if vi.name.startswith("past_key_values"):
            dtype = np.float16 if vi.type == "tensor(float16)" else np.float32
            out[vi.name] = np.zeros([1, vi.shape[1], bound, vi.shape[3]], dtype)
    return out


def _ort_call(sess, names, caches, ids: List[int], pos: int) -> np.ndarray:
    """One onnxruntime call on tokens `ids` at positions pos.. (the zoo's onnxruntime-genai
    form: GroupQueryAttention reads seqlens_k / total_sequence_length); the caches advance."""
    n = len(ids)
    feeds = dict(caches, input_ids=np.array([ids], np.int64),
                 seqlens_k=np.array([pos + n - 1], np.int32),
                 total_sequence_length=np.array(pos + n, np.int32))
    out = dict(zip(names, sess.run(names, feeds)))
    for name in caches:
        caches[name] = out[name.replace("past_key_values", "present")]
    return out["logits"][0, -1]


def ort_run(sess, prompt: List[int], tokens: int, bound: int) -> Tuple[float, float, list]:
    """(prompt seconds, seconds of the tokens after the first, greedy tokens)."""
    names = [o.name for o in sess.get_outputs()]
    caches = _caches(sess, bound)
    t0 = time.perf_counter()
    out = [int(np.argmax(_ort_call(sess, names, caches, prompt, 0)))]
    t1 = time.perf_counter()
    for pos in range(len(prompt), len(prompt) + tokens - 1):
        out.append(int(np.argmax(_ort_call(sess, names, caches, [out[-1]], pos))))
    return t1 - t0, time.perf_counter() - t1, out


def _threads(spec: str) -> List[int]:
    return [os.cpu_count() or 1 if t == "all" else int(t) for t in spec.split(",")]


def measure(config: str, form: str, threads: int, prompt_len: int, tokens: int,
            repeat: int, prefill: int = 16) -> dict:
    from rvvkit.measure.reference import ort_session
    cfg = zoo_llm.replace(zoo_llm.SMALL[config], **COUNT_FORMS[form])
    model = count_model(cfg)
    bound = min(cfg.max_seq, 256)
    art = R.build(model, "fp32", max_seq=bound, prefill=prefill)
    ort = ort_session(model, threads)
    rng = np.random.default_rng(0)
    long_prompt = [int(t) for t in rng.integers(1, cfg.vocab, prompt_len)]
    short = [1, 2, 3, 4]
    times = {k: [] for k in ("rvvkit_prompt", "ort_prompt", "rvvkit_gen", "ort_gen")}
    with rvvkit.load(art, on="host", threads=threads) as sess:
        ours = sess.generate(short, tokens).tokens            # warm-up, and the tokens
        theirs = ort_run(ort, short, tokens, bound)[2]
        first = sess.generate(long_prompt, 1).tokens == ort_run(ort, long_prompt, 1, bound)[2]
        for _ in range(repeat):
            times["rvvkit_prompt"].append(sess.generate(long_prompt, 1).prefill_s)
            times["ort_prompt"].append(ort_run(ort, long_prompt, 1, bound)[0])
            times["rvvkit_gen"].append(sess.generate(short, tokens).decode_s)
            times["ort_gen"].append(ort_run(ort, short, tokens, bound)[1])
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"form": form, "threads": threads, "prompt": prompt_len, "tokens": tokens,
            "times_s": times,
            "rvvkit_prompt_tps": prompt_len / med["rvvkit_prompt"],
            "ort_prompt_tps": prompt_len / med["ort_prompt"],
            "rvvkit_gen_tps": (tokens - 1) / med["rvvkit_gen"],
            "ort_gen_tps": (tokens - 1) / med["ort_gen"],
            "same_tokens": ours == theirs and first}


def host(config: str, forms, threads: str, prompt_len: int, tokens: int,
         repeat: int) -> list:
    doc = [measure(config, form, t, prompt_len, tokens, repeat)
           for form in forms for t in _threads(threads)]
    rows = [[d["form"], d["threads"],
             f"{d['rvvkit_prompt_tps']:.1f}", f"{d['ort_prompt_tps']:.1f}",
             f"{d['rvvkit_prompt_tps'] / d['ort_prompt_tps']:.2f}",
             f"{d['rvvkit_gen_tps']:.1f}", f"{d['ort_gen_tps']:.1f}",
             f"{d['rvvkit_gen_tps'] / d['ort_gen_tps']:.2f}",
             "yes" if d["same_tokens"] else "NO"] for d in doc]
    print(f"{config} on this host: tokens/s, median of {repeat} interleaved rounds; prompt: "
          f"{prompt_len} tokens to the first logits; generation: {tokens - 1} tokens after "
          "the first")
    print(table(["form", "threads", "prompt rvvkit", "prompt onnxruntime", "rvvkit / ort",
                 "gen rvvkit", "gen onnxruntime", "rvvkit / ort", "same tokens"], rows,
                align="lr" + "r" * 6 + "l"))
    return doc


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="qwen2.5-0.5b", choices=sorted(zoo_llm.SMALL))
    p.add_argument("--forms", default="int4,int8")
    p.add_argument("--threads", default="1,all", help="thread counts, 'all' = every core")
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens (default 64)")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the figures here")


def run(args) -> int:
    doc = host(args.config, args.forms.split(","), str(args.threads), args.prompt,
               args.tokens, args.repeat)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0 if all(d["same_tokens"] for d in doc) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
