"""Decoding on every core of a board, under QEMU: per-token LMUL-weighted instructions of each
guest thread at 1, 2, 4 and 8 threads, the critical path (the busiest thread) against one
thread's total, and the whole chip's memory bound.

    python3 benchmarks/bench_llm_threads.py [--config qwen2.5-0.5b] [--forms int4]
        [--threads 1,2,4,8] [--vlen 256] [--isa k1] [--json F]

Per form and thread count, three `runner --generate` processes under rvvkit's counting plugin
(the same scheme as bench_llm.py counts: prompts one prefill chunk apart, 2 and 6 generated
tokens), their per-thread counts matched by vCPU and differenced into per generated and per
prompt token figures. The critical path bounds a step's time when the threads run on as many
cores; the memory bound is the weights plus live cache one token reads (bench_llm's
_bytes_per_token) at the K1's 10.66 GB/s for the whole chip (its published STREAM-like
figure; board time is a model, not a measurement here)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rvvkit  # noqa: E402
import peer_rvvkit as R  # noqa: E402
from bench_llm import K1_BYTES_PER_S, _bytes_per_token, prompt_lengths  # noqa: E402
from llm_forms import COUNT_FORMS, count_model  # noqa: E402
from rvvkit.measure.cycle_model import weighted_instructions  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.runtime.counting import icount  # noqa: E402
from rvvkit.zoo import llm as zoo_llm  # noqa: E402

GEN = (2, 6)


def _threads_of(counts: dict) -> dict:
    return {t["vcpu"]: t for t in counts["per_thread"]}


def _per_token(a: dict, b: dict, n: int) -> dict:
    """{"total": weighted per token, "threads": [weighted per token by vCPU]}: b less a."""
    ta, tb = _threads_of(a), _threads_of(b)
    per = []
    for vcpu in sorted(tb):
        lo = ta.get(vcpu, {k: 0 for k in icount.COUNT_KEYS})
        per.append(weighted_instructions({k: tb[vcpu][k] - lo[k]
                                          for k in icount.COUNT_KEYS}) / n)
    total = weighted_instructions({k: b[k] - a[k] for k in icount.COUNT_KEYS}) / n
    return {"total": total, "threads": per, "critical": max(per)}


def measure(art, threads: int, vlen: int, isa: str) -> dict:
    p_lo, p_hi = prompt_lengths(art)
    with rvvkit.load(art, on="qemu", vlen=vlen, threads=threads, isa=isa) as sess:
        base = sess.generation_counts([1] * p_lo, GEN[0])
        gen = sess.generation_counts([1] * p_lo, GEN[1])
        prompt = sess.generation_counts([1] * p_hi, GEN[0])
    for c in (base, gen, prompt):
        if c.get("per_thread_overflow"):
            raise SystemExit("bench_llm_threads: more vCPUs than the plugin tracks")
    return {"threads": threads, "gen": _per_token(base, gen, GEN[1] - GEN[0]),
            "prompt": _per_token(base, prompt, p_hi - p_lo)}


def run(config: str, forms, thread_counts, vlen: int, isa: str) -> list:
    doc, rows = [], []
    for form in forms:
        cfg = zoo_llm.replace(zoo_llm.SMALL[config], **COUNT_FORMS[form])
        art = R.build(count_model(cfg), "fp32", max_seq=min(cfg.max_seq, 256), prefill=16)
        mem_tps = K1_BYTES_PER_S / _bytes_per_token(art, cfg, prompt_lengths(art)[0] + GEN[1])
        one = None
        for t in thread_counts:
            m = measure(art, t, vlen, isa)
            one = one or m
            m.update(form=form, vlen=vlen, isa=isa, k1_memory_tps=mem_tps)
            doc.append(m)
            line = [form, t]
            for kind in ("gen", "prompt"):
                k = m[kind]
                line += [f"{k['total'] / 1e6:.2f}", f"{k['critical'] / 1e6:.2f}",
                         f"{k['critical'] / one[kind]['total']:.3f}"]
            rows.append(line + [f"{mem_tps:.1f}"])
            print(f"  {form} at {t} threads done", file=sys.stderr, flush=True)
    print(f"{config}, QEMU (ISA profile {isa}, VLEN {vlen}): millions of LMUL-weighted "
          "instructions per token; critical = the busiest thread; ratio = critical / one "
          "thread's total")
    print(table(["form", "threads", "gen: all threads", "critical", "ratio",
                 "prompt: all threads", "critical", "ratio", "K1 memory bound tokens/s"],
                rows, align="lr" + "r" * 7))
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="qwen2.5-0.5b", choices=sorted(zoo_llm.SMALL))
    p.add_argument("--forms", default="int4")
    p.add_argument("--threads", default="1,2,4,8")
    p.add_argument("--vlen", type=int, default=256)
    p.add_argument("--isa", default="k1")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    doc = run(a.config, a.forms.split(","), [int(t) for t in a.threads.split(",")], a.vlen,
              a.isa)
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
