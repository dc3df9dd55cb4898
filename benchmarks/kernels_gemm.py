"""Conv / GEMM kernel throughput vs onnxruntime (single thread) on one-node models.

    python benchmarks/kernels_gemm.py [--reps 5] [--filter SUBSTR] [--asm]

Each layer is a one-node ONNX model built by rvvkit and run by its host session (the JIT's
compiler and flags, $RVVKIT_COMPILER to switch; one thread), timed with the same inputs as an
onnxruntime session (intra_op_num_threads=1, default graph optimisations,
which on x86 include MLAS's NCHWc conv). Reported: min and median ms over `reps` trials (each
trial the mean of enough calls to last ~0.1 s of thread CPU time, rvvkit and onnxruntime trials
alternating), GFLOP/s (2 * MACs / min time) and the ratio rvvkit/onnxruntime of the min times
(< 1 means rvvkit is faster). Not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rvvkit  # noqa: E402

# (name, C, H, W, M, k, stride, pad, group)
CONVS = [
    ("r50 conv1 3x224 7x7/2", 3, 224, 224, 64, 7, 2, 3, 1),
    ("r50 64x56 3x3", 64, 56, 56, 64, 3, 1, 1, 1),
    ("r50 256x56 1x1->64", 256, 56, 56, 64, 1, 1, 0, 1),
    ("r50 64x56 1x1->256", 64, 56, 56, 256, 1, 1, 0, 1),
    ("r50 128x28 3x3", 128, 28, 28, 128, 3, 1, 1, 1),
    ("r50 512x28 1x1->128", 512, 28, 28, 128, 1, 1, 0, 1),
    ("r50 256x14 3x3", 256, 14, 14, 256, 3, 1, 1, 1),
    ("r50 1024x14 1x1->256", 1024, 14, 14, 256, 1, 1, 0, 1),
    ("r50 512x7 3x3", 512, 7, 7, 512, 3, 1, 1, 1),
    ("r50 2048x7 1x1->512", 2048, 7, 7, 512, 1, 1, 0, 1),
    ("r50 256x56 1x1/2->512", 256, 56, 56, 512, 1, 2, 0, 1),
    ("r50 512x28 1x1/2->1024", 512, 28, 28, 1024, 1, 2, 0, 1),
    ("r50 1024x14 1x1/2->2048", 1024, 14, 14, 2048, 1, 2, 0, 1),
    ("r50 512x7 1x1->2048", 512, 7, 7, 2048, 1, 1, 0, 1),
    ("r50 128x56 3x3/2", 128, 56, 56, 128, 3, 2, 1, 1),
    ("r50 256x28 3x3/2", 256, 28, 28, 256, 3, 2, 1, 1),
    ("r50 512x14 3x3/2", 512, 14, 14, 512, 3, 2, 1, 1),
    ("vgg 128x112 3x3", 128, 112, 112, 128, 3, 1, 1, 1),
    ("squeeze conv1 3x224 3x3/2", 3, 224, 224, 64, 3, 2, 0, 1),
    ("squeeze 16x55 3x3->64", 16, 55, 55, 64, 3, 1, 1, 1),
    ("squeeze 32x27 3x3->128", 32, 27, 27, 128, 3, 1, 1, 1),
    ("squeeze 64x13 3x3->256", 64, 13, 13, 256, 3, 1, 1, 1),
    ("squeeze 512x13 1x1->1000", 512, 13, 13, 1000, 1, 1, 0, 1),
    ("incep 192x35 5x5->32", 192, 35, 35, 32, 5, 1, 2, 1),
    ("incep1 16x27 5x5->32", 16, 27, 27, 32, 5, 1, 2, 1),
    ("dense 128x28 3x3->32", 128, 28, 28, 32, 3, 1, 1, 1),
    ("zf 96x54 5x5/2->256", 96, 54, 54, 256, 5, 2, 0, 1),
    ("dw 232x14 3x3", 232, 14, 14, 232, 3, 1, 1, 232),
    ("dw 116x56 3x3/2", 116, 56, 56, 116, 3, 2, 1, 116),
    ("grp4 128x28 3x3", 128, 28, 28, 128, 3, 1, 1, 4),
]
# (name, M, N, K)  B constant, C = bias row
GEMMS = [
    ("fc 2048->1000", 1, 1000, 2048),
    ("fc 4096->4096", 1, 4096, 4096),
    ("gemm 64x1000x2048", 64, 1000, 2048),
]


# CPU time of this thread: on a shared 2-core machine a busy neighbour deschedules us, which
# wall time would count against whichever side happened to be running (--wall to override).
CLOCK = time.thread_time


def asm_report(source: str, tmp: str) -> str:
    """Per micro-kernel of the layer's source, compiled as the JIT does: packed-single FMAs and
    stack references in the compiled function (a register-resident MR x NR tile shows
    MR*NR/16 zmm FMAs and no (%rsp) use in its k loop; the few stack stores left are the final
    tile write-back)."""
    from rvvkit.jit.compilers import compile_flags, resolve_compiler
    comp = resolve_compiler()
    c, s = os.path.join(tmp, "asm.c"), os.path.join(tmp, "asm.s")
    with open(c, "w") as f:
        f.write(source)
    subprocess.run([*comp.argv, *compile_flags(comp, shared=False), "-S", c, "-o", s],
                   check=True)
    out, fn, stats = [], None, {}
    for line in open(s):
        if line and not line[0].isspace() and line.rstrip().endswith(":") and \
                line.startswith(("rvk_gemm_micro", "rvk_uk_", "rvk_dwtaps_")):
            fn = line.rstrip()[:-1]
            stats[fn] = [0, 0, 0]
        elif fn and line.strip() == "ret":
            fn = None
        elif fn:
            stats[fn][0] += "vfmadd" in line and "zmm" in line
            stats[fn][1] += "vfmadd" in line and "ymm" in line
            stats[fn][2] += "(%rsp)" in line
    for fn, (z, y, sp) in stats.items():
        out.append(f"    {fn}: {z} zmm FMAs, {y} ymm FMAs, {sp} stack refs")
    return "\n".join(out)


def _calls_for(fn, seconds=0.1):
    fn()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 0.03:
        fn()
        n += 1
    return max(1, int(seconds * n / (time.perf_counter() - t0)))


def timeit2(f1, f2, reps: int):
    """Alternate trials of f1 and f2 (the machine may be shared: a burst of load then hits
    both alike); returns ((min, median) of f1, (min, median) of f2) per call."""
    c1, c2 = _calls_for(f1), _calls_for(f2)
    t1, t2 = [], []
    for _ in range(reps):
        for f, c, out in ((f1, c1, t1), (f2, c2, t2)):
            t0 = CLOCK()
            for _ in range(c):
                f()
            out.append((CLOCK() - t0) / c)
    return (min(t1), statistics.median(t1)), (min(t2), statistics.median(t2))


def one_node(node, inits, inputs, output, shape):
    """One layer as an ONNX model (opset 13)."""
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


SOURCE = [""]     # generated C of the latest layer, for --asm


def time_layer(name, model, feeds, reps):
    """The layer built by rvvkit and run by its host session (the production compiler, flags
    and runtime, one thread) against an onnxruntime session with one intra-op thread."""
    from rvvkit.measure.reference import ort_session
    from rvvkit.runtime.host import HostSession
    art = rvvkit.build(model)
    SOURCE[0] = art.c_source
    sess = HostSession(art)
    sess.set_threads(1)
    prepared = sess.prepare(feeds)
    ort = ort_session(model, threads=1)
    y = next(iter(sess.run(feeds).values()))
    err = float(np.max(np.abs(y - ort.run(None, feeds)[0])))
    times = timeit2(lambda: sess.run_prepared(prepared), lambda: ort.run(None, feeds), reps)
    return (name, int(art.meta["macs"]), *times, err)


def bench_conv(spec, reps):
    from onnx import helper
    name, c, h, w, m, k, s, p, g = spec
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, h, w), np.float32)
    wt = rng.standard_normal((m, c // g, k, k), np.float32) * 0.1
    b = rng.standard_normal(m, np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], strides=[s, s],
                            pads=[p] * 4, group=g)
    model = one_node(node, [("w", wt), ("b", b)], [("x", x)], "y", (1, m, ho, wo))
    return time_layer(name, model, {"x": x}, reps)


def bench_gemm(spec, reps):
    from onnx import helper
    name, m, n, k = spec
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), np.float32)
    bm = rng.standard_normal((k, n), np.float32) * 0.05
    cv = rng.standard_normal(n, np.float32)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"])
    model = one_node(node, [("b", bm), ("c", cv)], [("a", a)], "y", (m, n))
    return time_layer(name, model, {"a": a}, reps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", default="")
    ap.add_argument("--wall", action="store_true", help="time wall clock, not thread CPU time")
    ap.add_argument("--asm", action="store_true", help="also report each micro-kernel's FMAs")
    args = ap.parse_args()
    if args.wall:
        global CLOCK
        CLOCK = time.perf_counter
    print(f"{'layer':26s} {'GMAC':>6s} {'rvk ms min/med':>15s} {'ort ms min/med':>15s} "
          f"{'rvk GF/s':>8s} {'ort GF/s':>8s} {'ratio':>6s} {'maxerr':>8s}")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(bench_conv, s) for s in CONVS] + [(bench_gemm, s) for s in GEMMS]
        for fn, spec in jobs:
            if args.filter not in spec[0]:
                continue
            name, macs, (rmin, rmed), (omin, omed), err = fn(spec, args.reps)
            ratios.append(rmin / omin)
            print(f"{name:26s} {macs / 1e9:6.3f} {rmin * 1e3:7.3f}/{rmed * 1e3:7.3f} "
                  f"{omin * 1e3:7.3f}/{omed * 1e3:7.3f} {2 * macs / rmin / 1e9:8.1f} "
                  f"{2 * macs / omin / 1e9:8.1f} {rmin / omin:6.2f} {err:8.1e}", flush=True)
            if args.asm:
                print(asm_report(SOURCE[0], tmp), flush=True)
    if ratios:
        print(f"geomean ratio rvkit/ort: {float(np.exp(np.mean(np.log(ratios)))):.2f}")


if __name__ == "__main__":
    main()
