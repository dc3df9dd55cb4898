"""Threads: how rvvkit's thread pool divides an inference, measured two ways in one run.

    python3 benchmarks/bench_threads.py [--models squeezenet resnet50 mobilenet_v2 encoder]
        [--vlen 256] [--threads 1 4 8] [--host-threads 1 2] [--repeat 20] [--json F] [--markdown]

* QEMU (exact counts, rvvkit's plugin, one inference after a warm-up): for each thread count T,
  the LMUL-weighted instructions of every guest thread (insns - vector insns + LMUL-weighted
  vector ops); the critical path is the busiest thread's. Reported: the 1-thread weighted
  total, the critical path at each T and its ratio to that total (1/T is a perfect split),
  and the sum over threads at T against the 1-thread total (the pool's overhead).
* Host (wall clock, this machine): rvvkit at each --host-threads count and onnxruntime with
  the same intra-op thread count, alternating in blocks of 5 calls (the first of each block
  untimed), medians; rvvkit's speed-up over its own 1-thread latency, and rvvkit/onnxruntime.

Models: rvvkit.zoo.quant.float_model (the light architectures with seeded random weights, and
tests/models' tiny ones such as bert), and "encoder": benchmarks/encoder.py's BERT-style
encoder (2 layers, 512 wide, 8 heads, 128 tokens). Progress on stderr, tables on stdout.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import rvvkit  # noqa: E402
from rvvkit.measure.cycle_model import weighted_instructions  # noqa: E402
from rvvkit.measure.reference import ort_session  # noqa: E402
from rvvkit.zoo.quant import float_model  # noqa: E402

from encoder import bert_encoder  # noqa: E402


BLOCK = 5   # host: calls per engine before switching (see host_rows)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)



def qemu_rows(name, art, feeds, vlen, counts):
    from rvvkit.runtime.qemu import QemuSession
    rows, base = [], None
    with QemuSession(art, vlen=vlen) as sess:
        for t in counts:
            t0 = time.perf_counter()
            sess.set_threads(t)
            c = sess.instruction_counts(feeds)
            per = [weighted_instructions(p) for p in c["per_thread"]]
            total = weighted_instructions(c)
            base = base if base is not None else total
            rows.append({"model": name, "vlen": vlen, "threads": t, "weighted_total": total,
                         "critical_path": max(per), "per_thread": per,
                         "critical_over_1thread": max(per) / base,
                         "total_over_1thread": total / base})
            log(f"qemu {name} VLEN {vlen} threads {t}: critical path {max(per):,} "
                f"({max(per) / base:.3f} of 1 thread), {len(per)} threads "
                f"({time.perf_counter() - t0:.0f} s)")
    return rows


def host_rows(name, art, path, feeds, counts, repeat):
    from rvvkit.runtime.host import HostSession
    rows, one = [], None
    with HostSession(art) as sess:
        for t in counts:
            sess.set_threads(t)
            prepared = sess.prepare(feeds)
            ort = ort_session(path, threads=t)
            for _ in range(3):
                sess.run_prepared(prepared)
                ort.run(None, feeds)
            ours, theirs = [], []
            # blocks of BLOCK calls, alternating engines, the first call of a block untimed:
            # both thread pools poll for a while after a call, and call-by-call alternation
            # would time each engine against the other's polling threads
            for i in range(max(1, repeat // (BLOCK - 1))):
                for who in ((0, 1) if i % 2 == 0 else (1, 0)):
                    for j in range(BLOCK):
                        t0 = time.perf_counter()
                        sess.run_prepared(prepared) if who == 0 else ort.run(None, feeds)
                        if j:
                            (ours if who == 0 else theirs).append(time.perf_counter() - t0)
            ms, ort_ms = 1e3 * statistics.median(ours), 1e3 * statistics.median(theirs)
            one = one if one is not None else ms
            rows.append({"model": name, "threads": t, "rvvkit_ms": ms, "onnxruntime_ms": ort_ms,
                         "ratio": ms / ort_ms, "speedup": one / ms})
            log(f"host {name} threads {t}: rvvkit {ms:.2f} ms, onnxruntime {ort_ms:.2f} ms, "
                f"ratio {ms / ort_ms:.2f}, speed-up {one / ms:.2f}")
    return rows


def markdown(qrows, hrows) -> str:
    out = []
    if qrows:
        out += ["| model | VLEN | threads | weighted total | critical path | critical / 1-thread "
                "total | sum / 1-thread total |", "|---|---:|---:|---:|---:|---:|---:|"]
        out += [f"| {r['model']} | {r['vlen']} | {r['threads']} | {r['weighted_total']:,} | "
                f"{r['critical_path']:,} | {r['critical_over_1thread']:.3f} | "
                f"{r['total_over_1thread']:.3f} |" for r in qrows]
        out.append("")
    if hrows:
        out += ["| model | threads | rvvkit ms | onnxruntime ms | rvvkit / onnxruntime | "
                "rvvkit speed-up |", "|---|---:|---:|---:|---:|---:|"]
        out += [f"| {r['model']} | {r['threads']} | {r['rvvkit_ms']:.2f} | "
                f"{r['onnxruntime_ms']:.2f} | {r['ratio']:.2f} | {r['speedup']:.2f} |"
                for r in hrows]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+",
                    default=["squeezenet", "resnet50", "mobilenet_v2", "encoder"])
    ap.add_argument("--vlen", type=int, default=256)
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 4, 8],
                    help="QEMU thread counts (the first should be 1; none: skip QEMU)")
    ap.add_argument("--host-threads", type=int, nargs="*", default=[1, 2],
                    help="host thread counts (none: skip the host)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    import tempfile

    import onnx
    qrows, hrows = [], []
    with tempfile.TemporaryDirectory(prefix="rvvkit-threads-") as tmp:
        for name in args.models:
            model, feeds = bert_encoder() if name == "encoder" else float_model(name)
            path = str(Path(tmp) / f"{name}.onnx")
            onnx.save(model, path)
            art = rvvkit.build(path)
            if args.threads:
                qrows += qemu_rows(name, art, feeds, args.vlen, args.threads)
            if args.host_threads:
                hrows += host_rows(name, art, path, feeds, args.host_threads, args.repeat)
    if args.json:
        Path(args.json).write_text(json.dumps({"qemu": qrows, "host": hrows}, indent=1))
    print(markdown(qrows, hrows) if args.markdown else json.dumps({"qemu": qrows,
                                                                   "host": hrows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
