"""Host latency of the stored model suite (tests/models: torchvision, timm, transformers, RNN
and YOLO-style models exported from PyTorch): rvvkit vs onnxruntime, the same thread count each
(--threads, default 1).

    python3 benchmarks/bench_models.py                         # every stored model
    python3 benchmarks/bench_models.py --models bert_legacy,yolo_dynamo --repeat 50
    python3 benchmarks/bench_models.py --threads 2
    python3 benchmarks/bench_models.py --models bert_legacy --qemu-vlens 128 512   # + QEMU insns

Per model: the build time, the median latency of each runtime over interleaved calls (the same
measurement as bench_host.py: prepare()/run_prepared() against onnxruntime with --threads
intra-op threads, sequential, all graph optimisations; with several threads each engine runs in
blocks of 5 calls, the first untimed), the ratio rvvkit/onnxruntime (< 1: rvvkit faster)
and the geometric mean of the ratios. A model rvvkit cannot build yet is listed with the
operators it lacks. --qemu-vlens also counts the dynamic instructions of one inference under
QEMU (RVV build) at each VLEN. Not a test: figures only compare within one run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List

from host_env import environment, say  # noqa: I100 - finds rvvkit first
from bench_host import _stats, interleaved
from host_report import geomean

import numpy as np

import rvvkit
from rvvkit.measure.reference import ort_session
from rvvkit.measure.report import table

SUITE = Path(__file__).resolve().parents[1] / "tests" / "models"


def stored(name: str):
    data = np.load(SUITE / f"{name}.npz")
    return str(SUITE / f"{name}.onnx"), {k[3:]: data[k] for k in data.files
                                         if k.startswith("in.")}


def bench(name: str, args) -> Dict:
    from rvvkit.runtime.host import HostSession
    path, feeds = stored(name)
    res: Dict = {"model": name}
    t0 = time.perf_counter()
    try:
        art = rvvkit.build(path, cuda=False)
    except rvvkit.ModelError as exc:
        ops = sorted({t for t, _ in getattr(exc, "ops", [])})
        res["error"] = f"does not build: {' '.join(ops) or str(exc).splitlines()[0]}"
        return res
    res["build_s"] = time.perf_counter() - t0
    res["macs"] = int(art.meta["macs"])
    sess = HostSession(art)
    sess.set_threads(args.threads)
    prepared = sess.prepare(feeds)
    ort_sess = ort_session(path, threads=args.threads)
    rv, ot = interleaved(sess, prepared, ort_sess, feeds, args.repeat, args.warmup, args.budget,
                         args.threads)
    res["rvvkit"], res["ort"] = _stats(rv), _stats(ot)
    res["ratio"] = res["rvvkit"]["median_ms"] / res["ort"]["median_ms"]
    say(f"{name}: rvvkit {res['rvvkit']['median_ms']:.3f} ms, onnxruntime "
        f"{res['ort']['median_ms']:.3f} ms, ratio {res['ratio']:.2f}")
    for vlen in args.qemu_vlens:
        from rvvkit.runtime.qemu import QemuSession
        with QemuSession(art, vlen=vlen) as qs:
            qs.set_threads(1)   # one core's count: the default (online cores) varies by machine
            res[f"qemu_insns_vlen{vlen}"] = int(qs.instruction_counts(feeds)["insns"])
        say(f"{name}: QEMU VLEN {vlen}: {res[f'qemu_insns_vlen{vlen}']:,} instructions")
    return res


def report(results: List[Dict], vlens) -> str:
    headers = ["model", "MMACs", "build s", "rvvkit ms", "ort ms", "rvvkit/ort"] + \
        [f"insns@{v}" for v in vlens]
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["model"]] + ["-"] * (len(headers) - 1))
            continue
        rows.append([r["model"], f"{r['macs'] / 1e6:.2f}", f"{r['build_s']:.2f}",
                     f"{r['rvvkit']['median_ms']:.3f}", f"{r['ort']['median_ms']:.3f}",
                     f"{r['ratio']:.2f}"] + [f"{r[f'qemu_insns_vlen{v}']:,}" for v in vlens])
    gm = geomean([r["ratio"] for r in results if "error" not in r])
    out = table(headers, rows, "l" + "r" * (len(headers) - 1))
    out += f"\n\ngeometric mean rvvkit/onnxruntime over {sum('error' not in r for r in results)}" \
           f" models: {gm:.3f}"
    out += "".join(f"\n{r['model']}: {r['error']}" for r in results if "error" in r)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated stored model names "
                    "(<arch>_<exporter>, see tests/models); default: all")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=3.0, metavar="SECONDS",
                    help="cap the timed calls of one model at about this long (default 3)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for both: rvvkit's pool and onnxruntime's intra-op threads")
    ap.add_argument("--qemu-vlens", type=int, nargs="*", default=[],
                    help="also count QEMU instructions at these VLENs")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    every = sorted(p.stem for p in SUITE.glob("*.onnx"))
    names = [n for n in args.models.split(",") if n] or every
    unknown = sorted(set(names) - set(every))
    if unknown:
        ap.error(f"unknown model(s) {unknown}; stored: {', '.join(every)}")
    env = environment()
    env["threads"] = args.threads
    say(f"{env['cpu']} ({env['cpus']} CPUs), {env['compiler']}, onnxruntime {env['onnxruntime']}")
    results = []
    for i, name in enumerate(names):
        say(f"[{i + 1}/{len(names)}] {name}")
        try:
            results.append(bench(name, args))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
            results.append({"model": name, "error": f"{type(exc).__name__}: "
                            f"{(str(exc).splitlines() or [''])[0]}"})
    print(report(results, args.qemu_vlens))
    if args.json:
        Path(args.json).write_text(json.dumps({"environment": env, "models": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
