"""Decoding on this machine: rvvkit's host executor against onnxruntime and onnxruntime-genai on
the same ONNX file, and llama.cpp on the GGUF of the same shape, prompt and generation timed
apart, at one thread and at every core.

    python3 benchmarks/bench_llm_host.py [--config qwen2.5-0.5b] [--forms int4,int8]
                                         [--threads 1,all] [--prompt 64] [--tokens 16]
                                         [--repeat 3] [--peers ort,genai,llama] [--json F]
    (also: python3 benchmarks/bench_llm.py host ...)

For each form (llm_forms.COUNT_FORMS: int4 / int8 weights, block 32, int8 activations, the
token table quantized alike), written in onnxruntime-genai's form (an attention_mask input, the
lengths computed in the graph), and each thread count, rounds interleave the engines:
- prompt: a `--prompt`-token prompt up to the first token's logits. rvvkit runs its prefill
  plan (chunks of 16) and the last token through the decoding plan (Generation.prefill_s);
  onnxruntime takes the whole prompt in one call (input_ids [1, P], as onnxruntime-genai
  feeds it); onnxruntime-genai (peer_genai.py: its own generator over a genai_config.json as
  its builder writes one) appends the prompt and picks the first token.
  Prompt tokens/s = P / the median round's time.
- generation: a 4-token prompt, then `--tokens` greedy tokens; tokens/s counts the tokens
  after the first (each one decoding step), so no engine's prompt is in it.
- llama.cpp (peer_llama_host.py: built with its CMake defaults for this CPU) runs llama-bench
  once per round on peer_llama.write_gguf's Qwen2 GGUF in Q4_0 / Q8_0 (every matrix and the
  tied token table quantized, as in rvvkit's file; other random weights, symmetric blocks where
  rvvkit's int4 has zero points): its pp test (the prompt in one batch from an empty context)
  and tg test (`--tokens` single tokens from an empty context); tokens/s as it reports them.
  rvvkit also builds that very GGUF file (`rvvkit build model.gguf`: the same weights, blocks
  and tied table as llama.cpp's, rvvkit/llm/gguf/) and is timed on it as on its ONNX file:
  the columns "rvvkit on the GGUF" and its ratio to llama.cpp compare the two engines on one
  file.
The greedy tokens of rvvkit, onnxruntime and onnxruntime-genai are compared (exit 1 when they
differ). A peer that is not installed (onnxruntime-genai) or cannot be built is left out, with
the reason printed."""
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
import peer_genai  # noqa: E402
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


def _ort_call(sess, names, caches, ids: List[int], pos: int, mask: bool) -> np.ndarray:
    """One onnxruntime call on tokens `ids` at positions pos.. (`mask`: onnxruntime-genai's
    form, an attention_mask over the live positions; else the zoo's seqlens_k /
    total_sequence_length inputs); the caches advance."""
    n = len(ids)
    feeds = dict(caches, input_ids=np.array([ids], np.int64))
    if mask:
        feeds["attention_mask"] = np.ones([1, pos + n], np.int64)
    else:
        feeds["seqlens_k"] = np.array([pos + n - 1], np.int32)
        feeds["total_sequence_length"] = np.array(pos + n, np.int32)
    out = dict(zip(names, sess.run(names, feeds)))
    for name in caches:
        caches[name] = out[name.replace("past_key_values", "present")]
    return out["logits"][0, -1]


def ort_run(sess, prompt: List[int], tokens: int, bound: int) -> Tuple[float, float, list]:
    """(prompt seconds, seconds of the tokens after the first, greedy tokens)."""
    names = [o.name for o in sess.get_outputs()]
    mask = "attention_mask" in {i.name for i in sess.get_inputs()}   # once, outside the timing
    caches = _caches(sess, bound)
    t0 = time.perf_counter()
    out = [int(np.argmax(_ort_call(sess, names, caches, prompt, 0, mask)))]
    t1 = time.perf_counter()
    for pos in range(len(prompt), len(prompt) + tokens - 1):
        out.append(int(np.argmax(_ort_call(sess, names, caches, [out[-1]], pos, mask))))
    return t1 - t0, time.perf_counter() - t1, out


def _threads(spec: str) -> List[int]:
    return [os.cpu_count() or 1 if t == "all" else int(t) for t in spec.split(",")]


class Peers:
    """The peers asked for that can run here: onnxruntime always; onnxruntime-genai when
    installed; llama.cpp when its host build succeeds. `skipped` says why one is missing."""

    def __init__(self, wanted):
        self.wanted, self.skipped, self.llama = set(wanted), {}, None
        if "genai" in self.wanted and peer_genai.available() is None:
            self.skipped["genai"] = "onnxruntime-genai is not installed (pip install " \
                "onnxruntime-genai)"
        if "llama" in self.wanted:
            try:
                import peer_llama_host
                self.llama = peer_llama_host.build_host()
            except Exception as exc:  # noqa: BLE001 - a peer that cannot build is left out
                self.skipped["llama"] = f"llama.cpp did not build: {exc}"
        for name, why in self.skipped.items():
            print(f"[bench_llm_host] {name} left out: {why}", file=sys.stderr)

    def has(self, name: str) -> bool:
        return name in self.wanted and name not in self.skipped


GGUF_TYPE = {"int4": "q4_0", "int8": "q8_0"}
LLAMA_CONFIGS = ("qwen2.5-0.5b",)   # the zoo's configs peer_llama.CONFIGS writes alike


def _gguf(config: str, form: str) -> Path:
    import peer_llama as PL
    qtype = GGUF_TYPE[form]
    return PL.write_gguf(PL.B.DEFAULT_WORK / "models" / f"qwen2-{config}-{qtype}-s0.gguf",
                         PL.CONFIGS[config], qtype)


def measure(config: str, form: str, threads: int, prompt_len: int, tokens: int,
            repeat: int, peers: "Peers", prefill: int = 16) -> dict:
    from rvvkit.measure.reference import ort_session
    cfg = zoo_llm.replace(zoo_llm.SMALL[config], mask=True, **COUNT_FORMS[form])
    model = count_model(cfg)
    bound = min(cfg.max_seq, 256)
    art = R.build(model, "fp32", max_seq=bound, prefill=prefill)
    ort = ort_session(model, threads)
    genai = peer_genai.GenaiPeer(model, cfg, bound, threads) if peers.has("genai") else None
    gguf = _gguf(config, form) if peers.llama is not None and form in GGUF_TYPE \
        and config in LLAMA_CONFIGS else None
    rng = np.random.default_rng(0)
    long_prompt = [int(t) for t in rng.integers(1, cfg.vocab, prompt_len)]
    short = [1, 2, 3, 4]
    engines = ["rvvkit", "ort"] + (["genai"] if genai else []) + \
        (["llama", "gguf"] if gguf else [])
    times = {f"{e}_{w}": [] for e in engines for w in ("prompt", "gen")}
    same_file = rvvkit.load(R.build(str(gguf), "fp32", max_seq=bound, prefill=prefill),
                            on="host", threads=threads) if gguf else None
    with rvvkit.load(art, on="host", threads=threads) as sess:
        ours = sess.generate(short, tokens).tokens            # warm-up, and the tokens
        theirs = {"ort": ort_run(ort, short, tokens, bound)[2]}
        first = {"ort": ort_run(ort, long_prompt, 1, bound)[2]}
        if genai:
            theirs["genai"] = genai.run(short, tokens)[2]
            first["genai"] = genai.run(long_prompt, 1)[2]
        mine_first = sess.generate(long_prompt, 1).tokens
        for _ in range(repeat):
            times["rvvkit_prompt"].append(sess.generate(long_prompt, 1).prefill_s)
            times["ort_prompt"].append(ort_run(ort, long_prompt, 1, bound)[0])
            times["rvvkit_gen"].append(sess.generate(short, tokens).decode_s)
            times["ort_gen"].append(ort_run(ort, short, tokens, bound)[1])
            if genai:
                times["genai_prompt"].append(genai.run(long_prompt, 1)[0])
                times["genai_gen"].append(genai.run(short, tokens)[1])
            if same_file is not None:
                times["gguf_prompt"].append(same_file.generate(long_prompt, 1).prefill_s)
                times["gguf_gen"].append(same_file.generate(short, tokens).decode_s)
            if gguf:
                import peer_llama_host
                pp, tg = peer_llama_host.llama_bench(peers.llama, gguf, prompt_len, tokens,
                                                     threads)
                times["llama_prompt"].append(prompt_len / pp)      # as seconds per round
                times["llama_gen"].append((tokens - 1) / tg)
    if genai:
        genai.close()
    if same_file is not None:
        same_file.close()
    med = {k: float(np.median(v)) for k, v in times.items()}
    doc = {"form": form, "threads": threads, "prompt": prompt_len, "tokens": tokens,
           "times_s": times, "engines": engines,
           "same_tokens": {e: theirs[e] == ours and first[e] == mine_first for e in theirs}}
    for e in engines:
        doc[f"{e}_prompt_tps"] = prompt_len / med[f"{e}_prompt"]
        doc[f"{e}_gen_tps"] = (tokens - 1) / med[f"{e}_gen"]
    return doc


def _fmt(d: dict, engine: str, what: str) -> str:
    return f"{d[f'{engine}_{what}_tps']:.1f}" if f"{engine}_{what}_tps" in d else "-"


def _ratio(d: dict, engine: str, what: str) -> str:
    key = f"{engine}_{what}_tps"
    return f"{d[f'rvvkit_{what}_tps'] / d[key]:.2f}" if key in d else "-"


def _on_gguf(d: dict, what: str) -> str:
    """rvvkit over llama.cpp, both on the one GGUF file."""
    if "gguf_prompt_tps" not in d:
        return "-"
    return f"{d[f'gguf_{what}_tps'] / d[f'llama_{what}_tps']:.2f}"


def host(config: str, forms, threads: str, prompt_len: int, tokens: int,
         repeat: int, wanted=("ort", "genai", "llama")) -> list:
    peers = Peers(wanted)
    doc = [measure(config, form, t, prompt_len, tokens, repeat, peers)
           for form in forms for t in _threads(threads)]
    print(f"{config} on this host: tokens/s, median of {repeat} interleaved rounds; prompt: "
          f"{prompt_len} tokens to the first logits; generation: {tokens - 1} tokens after "
          "the first (llama.cpp: llama-bench's pp / tg tests on the GGUF)")
    peers_shown = [e for e in ("ort", "genai", "llama") if any(e in d["engines"] for d in doc)]
    label = {"ort": "onnxruntime", "genai": "genai", "llama": "llama.cpp"}
    same_file = any("gguf" in d["engines"] for d in doc)
    for what in ("prompt", "gen"):
        rows = [[d["form"], d["threads"], _fmt(d, "rvvkit", what)]
                + [x for e in peers_shown for x in (_fmt(d, e, what), _ratio(d, e, what))]
                + ([_fmt(d, "gguf", what), _on_gguf(d, what)] if same_file else [])
                + [", ".join(f"{label[e]} {'yes' if ok else 'NO'}"
                             for e, ok in d["same_tokens"].items())] for d in doc]
        heads = ["form", "threads", f"{what} rvvkit"] + \
            [x for e in peers_shown for x in (label[e], f"rvvkit / {label[e]}")] + \
            (["rvvkit on the GGUF", "/ llama.cpp"] if same_file else []) + ["same tokens"]
        print(table(heads, rows, align="lr" + "r" * (len(heads) - 3) + "l"))
    return doc


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default="qwen2.5-0.5b", choices=sorted(zoo_llm.SMALL))
    p.add_argument("--forms", default="int4,int8")
    p.add_argument("--threads", default="1,all", help="thread counts, 'all' = every core")
    p.add_argument("--prompt", type=int, default=64, help="prompt tokens (default 64)")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--peers", default="ort,genai,llama",
                   help="peers beside rvvkit: ort (onnxruntime, always run), genai "
                        "(onnxruntime-genai), llama (llama.cpp, built for this host on first "
                        "use: ~20 minutes on 2 cores)")
    p.add_argument("--json", help="write the figures here")


def run(args) -> int:
    doc = host(args.config, args.forms.split(","), str(args.threads), args.prompt,
               args.tokens, args.repeat, args.peers.split(","))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0 if all(all(d["same_tokens"].values()) for d in doc) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
