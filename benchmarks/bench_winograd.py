"""Winograd F(4x4, 3x3) against the direct (im2col/grid GEMM) conv, per layer and per model.

    python3 benchmarks/bench_winograd.py                      # layers: QEMU VLEN 256 + host
    python3 benchmarks/bench_winograd.py --vlens 128 256 512 --no-host --markdown
    python3 benchmarks/bench_winograd.py --models squeezenet resnet50 --vlens 256 --no-layers

Each layer is a one-Conv (3x3, stride 1, pad 1, bias, Relu) model built twice, with
RVVKIT_WINOGRAD=off and =on; each model (rvvkit.zoo light models) with =off and the default
(the cost model choosing per layer). Under QEMU: LMUL-weighted instructions of one inference
("weighted" = instructions - vector instructions + LMUL-weighted vector operations, one thread,
exact), and the largest difference from onnxruntime relative to its largest output. On the
host: median latency over interleaved calls, one thread. Ratios are direct / Winograd (> 1:
Winograd cheaper). The cost model in rvvkit/codegen/kernels/conv/winograd.py is fitted to the
VLEN 256 column, its host exceptions (`prefers_direct_off_riscv`) to the host column; "Winograd
steps (auto)" says what it picks, and how many of those run directly on targets other than
RISC-V.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager
from typing import Dict, List

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from host_env import say  # noqa: I100 - finds rvvkit first

import rvvkit
from rvvkit.measure.cycle_model import weighted_instructions
from rvvkit.measure.reference import ort_session
from rvvkit.measure.report import table

# (C, H=W, M): resnet50's stride-1 3x3 layers, squeezenet 1.1's expand layers, a 3-channel stem,
# densenet121's narrow ones and inception_v1's last
LAYERS = [(64, 56, 64), (128, 28, 128), (256, 14, 256), (512, 7, 512),
          (16, 55, 64), (32, 27, 128), (48, 13, 192), (64, 13, 256), (3, 56, 64),
          (128, 14, 32), (128, 7, 32), (192, 6, 384)]


@contextmanager
def winograd(mode: str):
    old = os.environ.get("RVVKIT_WINOGRAD")
    os.environ["RVVKIT_WINOGRAD"] = mode
    try:
        yield
    finally:
        if old is None:
            del os.environ["RVVKIT_WINOGRAD"]
        else:
            os.environ["RVVKIT_WINOGRAD"] = old


def conv_model(c: int, h: int, m: int):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((m, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = (0.1 * rng.standard_normal(m)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, h, h])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])



def qemu_count(art, feeds, vlen: int, ref) -> Dict:
    from rvvkit.runtime.qemu import QemuSession
    with QemuSession(art, vlen=vlen) as sess:
        sess.set_threads(1)
        out = sess.run(feeds)
        c = sess.instruction_counts(feeds)
    y = next(iter(out.values()))
    err = float(np.abs(y - ref).max() / max(float(np.abs(ref).max()), 1e-30))
    return {"weighted": weighted_instructions(c), "insns": c["insns"], "err": err}


def host_times(arts, feeds, repeat: int) -> List[float]:
    """Median seconds of each artifact's session, calls interleaved (one thread)."""
    from rvvkit.runtime.host import HostSession
    sessions = [HostSession(a) for a in arts]
    for s in sessions:
        s.set_threads(1)
    prepared = [s.prepare(feeds) for s in sessions]
    times: List[List[float]] = [[] for _ in sessions]
    for i in range(repeat + 1):
        for k, (s, p) in enumerate(zip(sessions, prepared)):
            t0 = time.perf_counter()
            s.run_prepared(p)
            if i:
                times[k].append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in times]


def build_pair(model, second: str):
    with winograd("off"):
        direct = rvvkit.build(model, cuda=False)
    with winograd(second):
        wino = rvvkit.build(model, cuda=False)
    return direct, wino


def chosen(art) -> str:
    """Winograd steps of the plan; those whose kernel keeps the direct form for targets other
    than RISC-V (conv.by_target) counted again in brackets."""
    kernels = [str(s.get("kernel", "")) for s in art.meta["plan"]]
    n = sum(1 for k in kernels if "winograd" in k)
    riscv = sum(1 for k in kernels if "riscv_winograd" in k)
    return f"{n} ({riscv} RISC-V only)" if riscv else str(n)


def measure(label: str, model, second: str, args) -> List:
    feeds = {i.name: np.random.default_rng(1).standard_normal(
        [d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input}
    ref = ort_session(model).run(None, feeds)[0]
    direct, wino = build_pair(model, second)
    with winograd("auto"):
        auto = chosen(rvvkit.build(model, cuda=False))
    row = [label, auto]
    for vlen in args.vlens:
        t0 = time.perf_counter()
        d, w = qemu_count(direct, feeds, vlen, ref), qemu_count(wino, feeds, vlen, ref)
        say(f"{label} VLEN {vlen}: {d['weighted'] / 1e6:.2f} M -> {w['weighted'] / 1e6:.2f} M "
            f"weighted ({time.perf_counter() - t0:.0f} s)")
        row += [f"{d['weighted'] / 1e6:.2f} M", f"{w['weighted'] / 1e6:.2f} M",
                f"{d['weighted'] / w['weighted']:.2f}", f"{w['err']:.1e}"]
    if not args.no_host:
        td, tw = host_times([direct, wino], feeds, args.repeat)
        row += [f"{td * 1e3:.3f}", f"{tw * 1e3:.3f}", f"{td / tw:.2f}"]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vlens", type=int, nargs="*", default=[256])
    ap.add_argument("--models", nargs="*", default=[], help="light models (rvvkit.zoo)")
    ap.add_argument("--layers", nargs="*", default=None, metavar="C,H,M",
                    help="layers to measure (default: resnet50's and squeezenet's)")
    ap.add_argument("--no-layers", action="store_true", help="skip the single-layer table")
    ap.add_argument("--no-host", action="store_true", help="skip host timing")
    ap.add_argument("--repeat", type=int, default=30, help="host calls per variant")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    heads = ["layer (C, HxW, M)" if not args.models else "what", "Winograd steps (auto)"]
    for v in args.vlens:
        heads += [f"VLEN {v} direct", f"VLEN {v} Winograd", f"VLEN {v} ratio", "rel. error"]
    if not args.no_host:
        heads += ["host direct ms", "host Winograd ms", "host ratio"]
    rows = []
    if not args.no_layers:
        layers = [tuple(int(v) for v in s.split(",")) for s in args.layers] \
            if args.layers else LAYERS
        for c, h, m in layers:
            rows.append(measure(f"{c}, {h}x{h}, {m}", conv_model(c, h, m), "on", args))
    from rvvkit.zoo import light_model
    for name in args.models:
        rows.append(measure(name, light_model(name), "auto", args))
    text = table(heads, rows)
    if args.markdown:
        print("| " + " | ".join(heads) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(heads))) + "|")
        for r in rows:
            print("| " + " | ".join(str(c) for c in r) + " |")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
