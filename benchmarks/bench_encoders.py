"""Transformer encoders on this host: rvvkit against onnxruntime, one thread and every core.

    python3 benchmarks/bench_encoders.py [--models vit_base,bert_base,whisper_tiny_encoder,encoder]
                                         [--threads 1,all] [--repeat 10] [--json F]

The models (seeded random weights): `vit_base` (ViT-B/16 at 224, transformers' ViTModel),
`bert_base` (BERT-base, 128 tokens), `whisper_tiny_encoder` / `whisper_base_encoder` (Whisper's
audio encoder, 30 s of log-mel frames: 1500 positions), exported from PyTorch by
gpu_models.py (torch + transformers, benchmark tools only), and `encoder` (encoder.py's
BERT-style graph built with onnx.helper: no torch). Each is built once; per thread count both
engines run the same file with the same intra-op threads, interleaved call by call after a
warm-up (bench_host.interleaved: with several threads, in blocks once the other engine's
spinning threads are quiet); the median of --repeat calls each. The outputs are compared with
onnxruntime's first (rvvkit compare's tolerance)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from host_env import say  # noqa: I100 - finds rvvkit first

import numpy as np

import rvvkit
from bench_host import interleaved
from rvvkit.measure.reference import ort_session
from rvvkit.measure.report import table

TORCH = ("vit_base", "bert_base", "whisper_tiny_encoder", "whisper_base_encoder")
DEFAULT = "vit_base,bert_base,whisper_tiny_encoder,encoder"


def materialise(name: str, out: Path):
    """(onnx path, feeds) of a model name."""
    if name == "encoder":
        import onnx
        from encoder import bert_encoder
        model, feeds = bert_encoder(layers=2, hidden=512, heads=8, seq=128, ffn=2048)
        path = out / "encoder.onnx"
        onnx.save(model, str(path))
        return path, feeds
    if name not in TORCH:
        raise SystemExit(f"unknown model {name!r}: choose from {', '.join(TORCH + ('encoder',))}")
    import gpu_models
    return gpu_models.materialise(f"torch:{name}", out)


def _matches(ours: np.ndarray, ref: np.ndarray) -> bool:
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    return bool(np.max(np.abs(ours - ref)) <= 1e-4 + 1e-3 * float(np.max(np.abs(ref))))


def bench(name: str, threads, repeat: int, out: Path) -> list:
    from rvvkit.runtime.host import HostSession
    say(f"{name}: exporting")
    path, feeds = materialise(name, out)
    say(f"{name}: rvvkit.build")
    t0 = time.perf_counter()
    art = str(out / f"{name}.rvv")
    rvvkit.build(str(path)).save(art)
    built = time.perf_counter() - t0
    sess = HostSession(art)
    rows = []
    for t in threads:
        sess.set_threads(t)
        prepared = sess.prepare(feeds)
        ort = ort_session(str(path), threads=t)
        ok = _matches(list(sess.run(feeds).values())[0], ort.run(None, feeds)[0])
        say(f"{name}: {t} thread(s), {repeat} interleaved calls each")
        rv, ot = interleaved(sess, prepared, ort, feeds, repeat, 2, None, t)
        r, o = 1e3 * statistics.median(rv), 1e3 * statistics.median(ot)
        rows.append({"model": name, "threads": t, "rvvkit_ms": r, "ort_ms": o, "ratio": r / o,
                     "matches": ok, "build_s": built,
                     "rvvkit_samples_ms": [round(1e3 * x, 3) for x in rv],
                     "ort_samples_ms": [round(1e3 * x, 3) for x in ot]})
        say(f"{name}: {t} thread(s): rvvkit {r:.1f} ms, onnxruntime {o:.1f} ms, {r / o:.3f}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--threads", default="1,all", help="thread counts, 'all' = every core")
    ap.add_argument("--repeat", type=int, default=10, help="timed calls per engine")
    ap.add_argument("--json", help="write every figure here")
    args = ap.parse_args(argv)
    threads = [os.cpu_count() or 1 if t == "all" else int(t) for t in args.threads.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="rvvkit-enc-") as tmp:
        for name in args.models.split(","):
            rows += bench(name, threads, args.repeat, Path(tmp))
    print(table(["model", "threads", "rvvkit ms", "onnxruntime ms", "rvvkit / ort", "matches"],
                [[r["model"], r["threads"], f"{r['rvvkit_ms']:.1f}", f"{r['ort_ms']:.1f}",
                  f"{r['ratio']:.3f}", "yes" if r["matches"] else "NO"] for r in rows],
                align="lrrrrl"))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["matches"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
