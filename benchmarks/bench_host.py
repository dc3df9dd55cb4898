"""Host latency of the nine light models (rvvkit.zoo): rvvkit vs onnxruntime, the same number of
threads each (--threads, default 1).

    python benchmarks/bench_host.py [--models resnet50,vgg19] [--repeat 20] [--json out.json]
                                    [--markdown] [--plot bench.png] [--profile-top 5]
                                    [--threads 2]

For each model, in one run on one machine (the script is not a test):
  * build      - rvvkit.build() of the randomised model from its .onnx file (parse, passes,
                 plan, C generation, weight packing);
  * JIT cold   - HostSession() on the saved artifact with an empty, fresh compile cache: artifact
                 load and checks, compiler probe, C compilation, dlopen (time to ready);
  * warm load  - HostSession() again with that cache now warm, in a fresh Python process (so the
                 dlopen is real): artifact load + cache hit + dlopen; median of --warm-runs;
  * latency    - rvvkit through prepare()/run_prepared() (no Python work per call) and
                 onnxruntime (intra_op_num_threads=--threads, inter_op_num_threads=1, ORT_SEQUENTIAL,
                 ORT_ENABLE_ALL graph optimisations), each warmed up, then measured interleaved
                 one call at a time (order alternating every iteration; with --threads > 1 in blocks
                 of 5 calls, the first untimed, each block once the other engine's threads are
                 quiet: see interleaved()) so that machine noise hits
                 both alike; the median of --repeat calls is reported;
  * ratio      - rvvkit / onnxruntime median latency (< 1: rvvkit faster), and the geometric
                 mean of the ratios over the models measured.
--profile-top K prints the K slowest plan steps per model (HostSession.profile) with their share
of the profiled time and the shapes of the ONNX node behind them.

Progress goes to stderr, the result table to stdout. Figures only compare within one run: rerun
both sides on the machine you care about.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

# host_env first: it finds rvvkit (installed, or else the checkout this script lives in).
from host_env import (PKG_ROOT, busy_fraction, environment, say,  # noqa: I100
                      threads_quiet, wait_quiet)
from host_report import (geomean, markdown_report, node_shapes, plot, print_profile,
                         profile_rows, text_report)

import rvvkit
from rvvkit.measure.reference import ort_session
from rvvkit.zoo import LIGHT_MODELS, light_model, sample_inputs

WARM_PROBE = r"""
import json, sys, time
from rvvkit.runtime.host import HostSession
t0 = time.perf_counter()
sess = HostSession(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0, "so": str(sess.so_path)}))
"""


# --------------------------------------------------------------------------------------------
# Measurement

def warm_load(art_path: str, cache: str, runs: int) -> List[float]:
    """HostSession() on a warm cache in fresh processes: [seconds] (import time excluded)."""
    env = dict(os.environ, RVVKIT_CACHE_DIR=cache,
               PYTHONPATH=os.pathsep.join([str(PKG_ROOT)] + [p for p in
                                           os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                           if p]))
    out = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", WARM_PROBE, art_path], env=env,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"warm-load probe failed: {proc.stderr.strip()[-2000:]}")
        out.append(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])
    return out


THREADED_BLOCK = 5   # calls per engine in a row when several threads run, the first untimed


def interleaved(sess, prepared, ort_sess, feeds, repeat: int, warmup: int,
                budget: Optional[float], threads: int = 1):
    """Warm both up, then alternate timed calls; returns (rvvkit s list, ort s list).

    threads > 1: each engine runs THREADED_BLOCK calls in a row, the first untimed, and a block
    starts only once the other engine's threads are quiet. After a call
    both engines' idle threads keep spinning for a while (onnxruntime's for milliseconds,
    rvvkit's for RVVKIT_SPIN_US), so a call right after the other engine's would share the
    cores with its spinners and be charged for them: alone on the machine, neither engine has
    the other's spinners beside it."""
    pc = time.perf_counter
    block = 1 if threads == 1 else THREADED_BLOCK
    engines = (lambda: sess.run_prepared(prepared), lambda: ort_sess.run(None, feeds))
    t_rv = t_ort = 0.0
    for _ in range(max(warmup, 1)):
        t0 = pc()
        engines[0]()
        t1 = pc()
        engines[1]()
        t_rv, t_ort = t1 - t0, pc() - t1
    n = repeat
    if budget:
        n = min(repeat, max(3, int(budget / max(t_rv + t_ort, 1e-6))))
    times: List[List[float]] = [[], []]
    i = 0
    while len(times[0]) < n or len(times[1]) < n:
        order = (0, 1) if i % 2 == 0 else (1, 0)     # who goes first alternates too
        for e in order:
            if block > 1:
                threads_quiet()
            for j in range(block):
                t0 = pc()
                engines[e]()
                if block == 1 or j > 0:
                    times[e].append(pc() - t0)
        i += 1
    return times[0][:n], times[1][:n]


def _stats(xs: List[float]) -> Dict:
    return {"median_ms": 1e3 * statistics.median(xs), "min_ms": 1e3 * min(xs),
            "mean_ms": 1e3 * statistics.fmean(xs),
            "stdev_ms": 1e3 * statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "n": len(xs), "samples_ms": [round(1e3 * x, 4) for x in xs]}


def bench_model(name: str, args, workdir: Path) -> Dict:
    import onnx
    from rvvkit.jit import clear_probe_cache
    from rvvkit.runtime.host import HostSession
    res: Dict = {"model": name}
    say(f"{name}: randomising weights (seed {args.seed})")
    model = light_model(name, args.seed)
    feeds = sample_inputs(model, args.seed)
    shapes = node_shapes(model) if args.profile_top else {}
    onnx_path = str(workdir / f"{name}.onnx")
    onnx.save(model, onnx_path)
    del model
    gc.collect()

    say(f"{name}: rvvkit.build")
    t0 = time.perf_counter()
    art = rvvkit.build(onnx_path)
    res["build_s"] = time.perf_counter() - t0
    art_path = str(workdir / f"{name}.rvv")
    art.save(art_path)
    meta = art.meta
    res["macs"] = int(meta["macs"])
    res["weights_bytes"] = int(meta["memory"]["weights_bytes"])
    res["arena_bytes"] = int(meta["memory"]["arena_bytes"])
    res["steps"] = len(meta["plan"])
    res["kernels"] = len(meta["kernels"])
    res["c_lines"] = art.c_source.count("\n")
    del art
    gc.collect()

    cache = str(workdir / f"cache-{name}")
    os.environ["RVVKIT_CACHE_DIR"] = cache
    say(f"{name}: JIT cold (empty cache {cache})")
    clear_probe_cache()
    t0 = time.perf_counter()
    sess = HostSession(art_path)
    res["jit_cold_s"] = time.perf_counter() - t0
    del sess
    gc.collect()

    say(f"{name}: warm load x{args.warm_runs} (fresh processes)")
    warm = warm_load(art_path, cache, args.warm_runs)
    res["warm_load_s"] = statistics.median(warm)
    res["warm_load_samples_s"] = [round(x, 4) for x in warm]

    sess = HostSession(art_path)  # warm cache, in process: the one we time
    sess.set_threads(args.threads)
    prepared = sess.prepare(feeds)
    t0 = time.perf_counter()
    ort_sess = ort_session(onnx_path, threads=args.threads)
    res["ort_load_s"] = time.perf_counter() - t0
    busy = wait_quiet(args.wait_quiet) if args.wait_quiet else busy_fraction()
    res["other_load_before"] = busy
    res["loadavg_before"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if busy is not None and busy > 0.15:
        say(f"{name}: WARNING: other processes keep {100 * busy:.0f}% of the CPUs busy; "
            f"latencies will be noisy (both sides alike, thanks to interleaving)")
    say(f"{name}: latency, {args.warmup} warm-up + up to {args.repeat} interleaved calls each")
    rv, ot = interleaved(sess, prepared, ort_sess, feeds, args.repeat, args.warmup, args.budget,
                         args.threads)
    res["rvvkit"] = _stats(rv)
    res["ort"] = _stats(ot)
    res["ratio"] = res["rvvkit"]["median_ms"] / res["ort"]["median_ms"]
    res["loadavg_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    res["rvvkit_gflops"] = 2 * res["macs"] / (res["rvvkit"]["median_ms"] / 1e3) / 1e9
    del ort_sess
    gc.collect()
    if args.profile_top:
        say(f"{name}: profiling ({args.profile_repeat} runs)")
        res["profile"] = profile_rows(sess, feeds, args.profile_repeat, shapes, meta)
    del sess, prepared
    gc.collect()
    for p in (onnx_path, art_path):
        os.remove(p)
    shutil.rmtree(cache, ignore_errors=True)
    say(f"{name}: rvvkit {res['rvvkit']['median_ms']:.2f} ms, onnxruntime "
        f"{res['ort']['median_ms']:.2f} ms, ratio {res['ratio']:.2f}; build {res['build_s']:.1f}"
        f" s, JIT cold {res['jit_cold_s']:.1f} s, warm load {res['warm_load_s']:.3f} s")
    return res


# --------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=None, metavar="NAME",
                    help=f"subset (space or comma separated) of: {', '.join(LIGHT_MODELS)}")
    ap.add_argument("--repeat", type=int, default=20,
                    help="timed calls per model and runtime (median reported; default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for both: rvvkit's pool and onnxruntime's intra-op threads "
                    "(default 1)")
    ap.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="cap the timed calls of a model at about this many seconds "
                         "(at least 3 calls); lets one --repeat suit small and big models")
    ap.add_argument("--warm-runs", type=int, default=3,
                    help="fresh-process warm loads per model (median; default 3)")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                    help="before timing a model, wait up to this long for other processes to "
                         "leave the CPUs (< 15%% busy); the load seen is recorded either way")
    ap.add_argument("--seed", type=int, default=0, help="weights and inputs seed (default 0)")
    ap.add_argument("--json", metavar="FILE", help="write every figure (and samples) as JSON")
    ap.add_argument("--markdown", action="store_true", help="also print a markdown table")
    ap.add_argument("--plot", metavar="FILE.png", help="bar chart of latencies and ratios "
                                                       "(needs matplotlib)")
    ap.add_argument("--profile-top", type=int, default=0, metavar="K",
                    help="print the K slowest plan steps of each model (HostSession.profile)")
    ap.add_argument("--profile-repeat", type=int, default=5,
                    help="runs averaged by the profile (default 5)")
    ap.add_argument("--keep-going", action=argparse.BooleanOptionalAction, default=True,
                    help="record a failing model and go on (default) or stop at the first")
    args = ap.parse_args(argv)
    names = [n for item in (args.models or LIGHT_MODELS) for n in item.split(",") if n]
    unknown = [n for n in names if n not in LIGHT_MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(LIGHT_MODELS)}")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    args.models = names
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    env = environment()
    env["threads"] = args.threads
    say(f"{env['cpu']} ({env['cpus']} CPUs), {env['compiler']}, onnxruntime "
        f"{env['onnxruntime']}; git {env['git_head']}, "
        f"{len(env['git_status'])} changed/untracked paths")
    results: List[Dict] = []
    saved_cache = os.environ.get("RVVKIT_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="rvvkit-bench-") as tmp:
        for i, name in enumerate(args.models):
            say(f"[{i + 1}/{len(args.models)}] {name}")
            try:
                r = bench_model(name, args, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - a benchmark reports and goes on
                if not args.keep_going:
                    raise
                msg = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                say(f"{name}: FAILED: {msg}")
                r = {"model": name, "error": msg}
            results.append(r)
            if args.profile_top and "profile" in r:
                print_profile(name, r["profile"], args.profile_top)
                sys.stdout.flush()
            gc.collect()
    if saved_cache is None:
        os.environ.pop("RVVKIT_CACHE_DIR", None)
    else:
        os.environ["RVVKIT_CACHE_DIR"] = saved_cache
    gm = geomean([r["ratio"] for r in results if "error" not in r])
    print()
    print(text_report(results, gm, env))
    if args.markdown:
        print()
        print(markdown_report(results, gm, env))
    if args.json:
        doc = {"environment": env,
               "settings": {k: v for k, v in vars(args).items() if k not in ("json", "plot")},
               "geomean_ratio": gm, "models": results}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        say(f"wrote {args.json}")
    if args.plot:
        plot(results, gm, args.plot)
        say(f"wrote {args.plot}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
