"""Benchmarks of an artifact on one executor: latency everywhere (on a board over SSH, by the
runner's own clock there), and under QEMU the exact dynamic instruction counts of one inference
(start-up and loading subtracted)."""
from __future__ import annotations

import statistics
import time
from typing import Dict, List, Mapping, Optional

import numpy as np

from .runtime.session import Session


def random_feeds(sess: Session, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in sess.inputs}


def _latency(samples: List[float]) -> Dict[str, float]:
    ms = sorted(1e3 * s for s in samples)
    return {"latency_ms": statistics.median(ms), "latency_stat": "median", "min_ms": ms[0],
            "max_ms": ms[-1], "runs": len(ms)}


def host_latency(sess, feeds: Mapping[str, np.ndarray], repeat: int, warmup: int) -> Dict:
    prepared = sess.prepare(feeds)
    for _ in range(warmup):
        sess.run_prepared(prepared)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sess.run_prepared(prepared)
        samples.append(time.perf_counter() - t0)
    return _latency(samples)


def qemu_latency(sess, feeds: Mapping[str, np.ndarray], repeat: int, warmup: int) -> Dict:
    """Emulated wall time per inference, from the runner's own clock (QEMU speed, not a
    board's: use instruction counts to compare RVV code)."""
    import json
    import shutil
    workdir = sess.write_inputs(feeds)
    try:
        sess.run_raw(workdir, repeat=max(repeat, 1), warmup=warmup, timings=True)
        doc = json.loads((workdir / "timings.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {"latency_ms": 1e3 * float(doc["mean_seconds"]), "latency_stat": "mean",
            "runs": max(repeat, 1)}


def qemu_counts(sess, feeds: Mapping[str, np.ndarray], inferences: int = 1) -> Dict[str, int]:
    """Per-inference dynamic instruction counts: a run doing `inferences` inferences minus a
    run that loads everything and does none. Both warm up once first, so lazy symbol binding
    and first-touch work are in both and cancel; the argv strings have equal lengths."""
    import shutil
    from .runtime.icount import qemu_plugin_args, read_counts
    if not 1 <= inferences <= 9:
        raise ValueError("inferences must be 1..9 (equal-length argv keeps counts exact)")
    workdir = sess.write_inputs(feeds)
    try:
        totals = []
        for repeat in (inferences, 0):
            out = workdir / "counts.json"
            sess.run_raw(workdir, repeat=repeat, warmup=1, untimed=True,
                         extra_qemu_args=qemu_plugin_args(out))
            totals.append(read_counts(out))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    hi, lo = totals
    return {k: (hi[k] - lo[k]) // inferences for k in ("insns", "vector_insns", "vsetvl")}


def measure(sess, feeds: Mapping[str, np.ndarray], repeat: int, warmup: int,
            count: bool = True) -> Dict:
    """Latency on the executor's own clock (qemu, ssh: the runner's mean; host, cuda: median of
    synchronised runs on inputs already in place) and, under QEMU with `count`, the
    instructions of one inference."""
    if sess.executor == "qemu":
        out = qemu_latency(sess, feeds, repeat, warmup)
        if count:
            c = qemu_counts(sess, feeds)
            out.update(dynamic_instructions=c["insns"], vector_instructions=c["vector_insns"],
                       vsetvl_instructions=c["vsetvl"])
        return out
    if sess.executor == "ssh":
        # The board's runner clock (no network in it); with a qemu wrapper, emulation speed.
        doc = sess.timings(feeds, repeat, warmup)
        return {"latency_ms": 1e3 * float(doc["mean_seconds"]), "latency_stat": "mean",
                "runs": max(repeat, 1)}
    return host_latency(sess, feeds, repeat, warmup)


def bench(sess: Session, feeds: Optional[Mapping[str, np.ndarray]] = None, *,
          repeat: int = 10, warmup: int = 2, count: bool = True) -> Dict:
    """One row of `rvvkit bench`: latency, MACs, and (qemu) instruction counts."""
    feeds = feeds if feeds is not None else random_feeds(sess)
    meta = sess.artifact.meta
    row: Dict = {"model": meta.get("model"), "executor": sess.executor,
                 "macs": int(meta.get("macs", 0))}
    compiler = getattr(sess, "compiler", None)
    row["compiler"] = " ".join(compiler.argv) if compiler is not None else ""
    if sess.executor == "qemu":
        row["vlen"] = sess.vlen
    elif sess.executor == "ssh":
        row.update(executor=sess.target, wrapper=sess.config.wrapper)
    row.update(measure(sess, feeds, repeat, warmup, count))
    if row.get("dynamic_instructions") is not None:
        insns = row["dynamic_instructions"]
        row["macs_per_instruction"] = row["macs"] / insns if insns else None
    return row
