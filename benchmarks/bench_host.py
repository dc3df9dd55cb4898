"""Host latency of the nine light models (rvvkit.zoo): rvvkit vs onnxruntime, one thread each.

    python benchmarks/bench_host.py [--models resnet50,vgg19] [--repeat 20] [--json out.json]
                                    [--markdown] [--plot bench.png] [--profile-top 5]

For each model, in one run on one machine (the script is not a test):
  * build      - rvvkit.build() of the randomised model from its .onnx file (parse, passes,
                 plan, C generation, weight packing);
  * JIT cold   - HostSession() on the saved artifact with an empty, fresh compile cache: artifact
                 load and checks, compiler probe, C compilation, dlopen (time to ready);
  * warm load  - HostSession() again with that cache now warm, in a fresh Python process (so the
                 dlopen is real): artifact load + cache hit + dlopen; median of --warm-runs;
  * latency    - rvvkit through prepare()/run_prepared() (no Python work per call) and
                 onnxruntime (intra_op_num_threads=1, inter_op_num_threads=1, ORT_SEQUENTIAL,
                 ORT_ENABLE_ALL graph optimisations), each warmed up, then measured interleaved
                 one call at a time (order alternating every iteration) so that machine noise hits
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
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
try:
    import rvvkit
except ImportError:  # not installed: use the checkout this script lives in
    sys.path.insert(0, str(ROOT))
    import rvvkit
PKG_ROOT = Path(rvvkit.__file__).resolve().parent.parent  # the rvvkit actually measured
from rvvkit.zoo import LIGHT_MODELS, light_model, sample_inputs  # noqa: E402

WARM_PROBE = r"""
import json, sys, time
from rvvkit.runtime.host import HostSession
t0 = time.perf_counter()
sess = HostSession(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0, "so": str(sess.so_path)}))
"""


def say(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Environment: what was measured, where, and with which state of the kernel code

def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> Dict:
    import onnxruntime as ort
    from rvvkit.jit import compile_flags, resolve_compiler
    comp = resolve_compiler(target="host")
    # Import the kernel modules now, so the hashes below describe the code that is measured
    # even while someone edits those files during a long run.
    import rvvkit.codegen.kernels.conv  # noqa: F401
    import rvvkit.codegen.kernels.gemm  # noqa: F401
    kernel_files = {}
    for rel in ("rvvkit/codegen/kernels/conv.py", "rvvkit/codegen/kernels/conv_input.py",
                "rvvkit/codegen/kernels/gemm.py", "rvvkit/codegen/kernels/gemm_rvv.py"):
        p = PKG_ROOT / rel
        if p.exists():
            kernel_files[rel] = {
                "sha256": hashlib.sha256(p.read_bytes()).hexdigest()[:16],
                "mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(p.stat().st_mtime))}
    return {
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(), "machine": platform.machine(), "cpu": _cpu_model(),
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "rvvkit": rvvkit.__version__, "onnxruntime": ort.__version__,
        "compiler": comp.version, "cflags": " ".join(compile_flags(comp)),
        "rvvkit_path": str(PKG_ROOT),
        "git_head": _git("rev-parse", "--short", "HEAD"),
        "git_status": _git("status", "--porcelain").splitlines(),
        "kernel_files": kernel_files,
    }


# --------------------------------------------------------------------------------------------
# Shapes of ONNX nodes, to say what a slow kernel computes

def node_shapes(model) -> Dict[str, str]:
    """node name (as rvvkit names it) -> 'in -> out, W ..., attrs' from ONNX shape inference,
    run on a copy that carries big initializers as typed inputs (no weight data copied)."""
    import onnx
    from onnx import helper
    g = model.graph
    small = [i for i in g.initializer if int(np.prod(i.dims)) <= 4096]
    big = [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
           for i in g.initializer if int(np.prod(i.dims)) > 4096]
    graph = helper.make_graph(list(g.node), g.name, list(g.input) + big, list(g.output), small)
    light = helper.make_model(graph, opset_imports=list(model.opset_import),
                              ir_version=model.ir_version)
    try:
        inferred = onnx.shape_inference.infer_shapes(light).graph
    except Exception:  # shapes are a nicety here
        return {}
    dims = {}
    for vi in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
        d = vi.type.tensor_type.shape.dim
        dims[vi.name] = "x".join(str(x.dim_value) if x.dim_value else "?" for x in d)
    for i in g.initializer:
        dims[i.name] = "x".join(str(d) for d in i.dims)
    out = {}
    for k, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{k}"
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        text = f"{dims.get(n.input[0], '?') if n.input else ''} -> " \
               f"{dims.get(n.output[0], '?')}"
        if n.op_type == "Conv":
            pads = list(a.get("pads", [0, 0, 0, 0]))
            text += (f", W {dims.get(n.input[1], '?')}, k{'x'.join(map(str, a.get('kernel_shape', [])))}"
                     f" s{max(a.get('strides', [1]))} p{max(pads) if pads else 0}"
                     f" g{a.get('group', 1)}")
        elif n.op_type in ("Gemm", "MatMul"):
            text += f", B {dims.get(n.input[1], '?')}" + \
                (" (transB)" if a.get("transB", 0) else "")
        elif n.op_type in ("MaxPool", "AveragePool"):
            text += f", k{'x'.join(map(str, a.get('kernel_shape', [])))} " \
                    f"s{max(a.get('strides', [1]))}"
        out[name] = text
    return out


# --------------------------------------------------------------------------------------------
# Measurement

def _cpu_times():
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    return sum(vals), idle


def busy_fraction(interval: float = 1.0) -> Optional[float]:
    """Fraction of all CPUs busy over `interval` seconds while this process sleeps: the load
    other processes put on the machine (None where /proc/stat is unavailable)."""
    try:
        t0, i0 = _cpu_times()
        time.sleep(interval)
        t1, i1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(max_wait: float, threshold: float = 0.15) -> Optional[float]:
    """Wait (up to max_wait s) until other processes keep the CPUs < threshold busy."""
    start = time.monotonic()
    busy, told = busy_fraction(), -1e9
    while busy is not None and busy > threshold and time.monotonic() - start < max_wait:
        if time.monotonic() - told >= 15:
            say(f"machine {100 * busy:.0f}% busy with other work; waiting up to "
                f"{max_wait - (time.monotonic() - start):.0f} s more for it to calm down")
            told = time.monotonic()
        busy = busy_fraction(2.0)
    return busy


def ort_session(path: str):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # zfnet512 carries an unused initializer: no warning spam
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


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


def interleaved(sess, prepared, ort_sess, feeds, repeat: int, warmup: int,
                budget: Optional[float]):
    """Warm both up, then alternate single timed calls; returns (rvvkit s list, ort s list)."""
    pc = time.perf_counter
    t_rv = t_ort = 0.0
    for _ in range(max(warmup, 1)):
        t0 = pc()
        sess.run_prepared(prepared)
        t1 = pc()
        ort_sess.run(None, feeds)
        t2 = pc()
        t_rv, t_ort = t1 - t0, t2 - t1
    n = repeat
    if budget:
        n = min(repeat, max(3, int(budget / max(t_rv + t_ort, 1e-6))))
    rv, ot = [], []
    for i in range(n):
        if i % 2 == 0:
            t0 = pc()
            sess.run_prepared(prepared)
            t1 = pc()
            ort_sess.run(None, feeds)
            t2 = pc()
            rv.append(t1 - t0)
            ot.append(t2 - t1)
        else:
            t0 = pc()
            ort_sess.run(None, feeds)
            t1 = pc()
            sess.run_prepared(prepared)
            t2 = pc()
            ot.append(t1 - t0)
            rv.append(t2 - t1)
    return rv, ot


def _stats(xs: List[float]) -> Dict:
    return {"median_ms": 1e3 * statistics.median(xs), "min_ms": 1e3 * min(xs),
            "mean_ms": 1e3 * statistics.fmean(xs),
            "stdev_ms": 1e3 * statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "n": len(xs), "samples_ms": [round(1e3 * x, 4) for x in xs]}


def profile_rows(sess, feeds, repeat: int, shapes: Dict[str, str], meta: Dict) -> List[Dict]:
    rows = sess.profile(feeds, repeat=repeat)
    total = sum(r["seconds"] for r in rows) or 1e-12
    ws = {k["name"]: k.get("workspace_floats", 0) for k in meta["kernels"]}
    for r in rows:
        r["share"] = r["seconds"] / total
        r["gflops"] = 2 * r["macs"] / r["seconds"] / 1e9 if r["macs"] and r["seconds"] else 0.0
        r["shape"] = shapes.get(r["node"], "")
        r["workspace_floats"] = ws.get(r["kernel"], 0)
    return rows


def print_profile(name: str, rows: List[Dict], top: int) -> None:
    total = sum(r["seconds"] for r in rows)
    by_op: Dict[str, float] = {}
    for r in rows:
        by_op[r["op"]] = by_op.get(r["op"], 0.0) + r["seconds"]
    ops = ", ".join(f"{op} {100 * s / total:.1f}%" for op, s in
                    sorted(by_op.items(), key=lambda kv: -kv[1])[:6])
    print(f"\n{name}: {len(rows)} steps, profiled total {1e3 * total:.2f} ms; by op: {ops}")
    body = []
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        body.append([str(r["step"]), r["op"], r["node"][:28], r["kernel"][:26],
                     f"{1e3 * r['seconds']:.3f}", f"{100 * r['share']:.1f}%",
                     f"{r['gflops']:.1f}" if r["gflops"] else "-", r["shape"]])
    print(_table(["step", "op", "node", "kernel", "ms", "share", "GFLOP/s", "shape"], body,
                 "rlllrrrl"))
    by_kernel: Dict[str, List[Dict]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    ranked = sorted(by_kernel.items(), key=lambda kv: -sum(r["seconds"] for r in kv[1]))[:top]
    print("by kernel (all calls): " + ", ".join(
        f"{k} x{len(rs)} {100 * sum(r['seconds'] for r in rs) / total:.1f}%"
        for k, rs in ranked))


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
    prepared = sess.prepare(feeds)
    t0 = time.perf_counter()
    ort_sess = ort_session(onnx_path)
    res["ort_load_s"] = time.perf_counter() - t0
    busy = wait_quiet(args.wait_quiet) if args.wait_quiet else busy_fraction()
    res["other_load_before"] = busy
    res["loadavg_before"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    if busy is not None and busy > 0.15:
        say(f"{name}: WARNING: other processes keep {100 * busy:.0f}% of the CPUs busy; "
            f"latencies will be noisy (both sides alike, thanks to interleaving)")
    say(f"{name}: latency, {args.warmup} warm-up + up to {args.repeat} interleaved calls each")
    rv, ot = interleaved(sess, prepared, ort_sess, feeds, args.repeat, args.warmup, args.budget)
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
# Reporting

def _table(headers: List[str], rows: List[List[str]], align: str) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def fmt(cells):
        return "  ".join(str(c).rjust(w) if a == "r" else str(c).ljust(w)
                         for c, w, a in zip(cells, widths, align)).rstrip()
    return "\n".join([fmt(headers), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


HEADERS = ["model", "GMACs", "rvvkit ms", "ort ms", "rvvkit/ort", "rvvkit GFLOP/s",
           "build s", "JIT cold s", "warm load s", "n"]


def _row(r: Dict) -> List[str]:
    if "error" in r:
        return [r["model"], "-", "error", "-", "-", "-", "-", "-", "-", "-"]
    return [r["model"], f"{r['macs'] / 1e9:.2f}", f"{r['rvvkit']['median_ms']:.2f}",
            f"{r['ort']['median_ms']:.2f}", f"{r['ratio']:.2f}", f"{r['rvvkit_gflops']:.1f}",
            f"{r['build_s']:.2f}", f"{r['jit_cold_s']:.2f}", f"{r['warm_load_s']:.3f}",
            str(r["rvvkit"]["n"])]


def geomean(xs: List[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def text_report(results: List[Dict], gm: float, env: Dict) -> str:
    body = [_row(r) for r in results]
    out = _table(HEADERS, body, "lrrrrrrrrr")
    out += f"\n\ngeometric mean rvvkit/onnxruntime: {gm:.3f}"
    out += f"\n{env['cpu']}, {env['cpus']} CPUs; {env['compiler']}; onnxruntime " \
           f"{env['onnxruntime']} (1 thread); medians"
    loads = [r.get("other_load_before") for r in results if r.get("other_load_before") is not None]
    if loads and max(loads) > 0.15:
        out += f"\nnote: other processes kept up to {100 * max(loads):.0f}% of the CPUs busy " \
               f"before some measurements (see other_load_before in --json)"
    for r in results:
        if "error" in r:
            out += f"\n{r['model']}: {r['error']}"
    return out


def markdown_report(results: List[Dict], gm: float, env: Dict) -> str:
    lines = ["| " + " | ".join(HEADERS[:-1]) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(HEADERS) - 2)) + "|"]
    for r in results:
        lines.append("| " + " | ".join(_row(r)[:-1]) + " |")
    lines.append(f"| **geomean** | | | | **{gm:.2f}** | | | | |")
    lines.append("")
    lines.append(f"Single thread, median latency; {env['cpu']} ({env['cpus']} CPUs), "
                 f"{env['compiler']}, onnxruntime {env['onnxruntime']} "
                 f"(`intra_op_num_threads=1`, sequential, all graph optimisations), "
                 f"{env['time_utc']}. rvvkit/ort < 1 means rvvkit is faster. JIT cold: open "
                 f"the artifact with an empty compile cache; warm load: open it again in a new "
                 f"process with the cache warm.")
    return "\n".join(lines)


def plot(results: List[Dict], gm: float, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [r for r in results if "error" not in r]
    names = [r["model"] for r in ok]
    x = np.arange(len(ok))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6, 1.1 * len(ok) + 2), 7), sharex=True)
    ax1.bar(x - 0.2, [r["rvvkit"]["median_ms"] for r in ok], 0.4, label="rvvkit")
    ax1.bar(x + 0.2, [r["ort"]["median_ms"] for r in ok], 0.4, label="onnxruntime")
    ax1.set_yscale("log")
    ax1.set_ylabel("median latency (ms, log)")
    ax1.legend()
    ax1.set_title("single-thread host latency")
    ratios = [r["ratio"] for r in ok]
    bars = ax2.bar(x, ratios, 0.6, color=["tab:green" if v <= 1 else "tab:red" for v in ratios])
    for bar, v in zip(bars, ratios):
        ax2.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom",
                 fontsize=8)
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.axhline(gm, color="tab:blue", ls="--", lw=0.8, label=f"geomean {gm:.2f}")
    ax2.set_ylabel("rvvkit / onnxruntime")
    ax2.legend()
    ax2.set_xticks(x)
    ax2.set_xticklabels(names, rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=None, metavar="NAME",
                    help=f"subset (space or comma separated) of: {', '.join(LIGHT_MODELS)}")
    ap.add_argument("--repeat", type=int, default=20,
                    help="timed calls per model and runtime (median reported; default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
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
