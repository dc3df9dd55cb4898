"""int8 models: rvvkit against onnxruntime on the host, and int8 against fp32 under QEMU.

    python3 benchmarks/bench_int8.py                         # host + QEMU, default models
    python3 benchmarks/bench_int8.py --host-only --models resnet50 --formats qop qdq
    python3 benchmarks/bench_int8.py --qemu-only --vlens 256 --json int8.json --markdown
    python3 benchmarks/bench_int8.py --qemu-only --models resnet50 --vlens 128 512 --check

Models are quantized the way users quantize them (rvvkit/zoo/quant.py: onnxruntime's
quantize_static in QDQ and QOperator form, per-channel int8 weights, and quantize_dynamic).

Host (one run, one machine; not a test): for each quantized model, the median latency of
rvvkit (prepare/run_prepared) and of onnxruntime (one thread, sequential, all graph
optimisations) on the same file, measured interleaved; the fp32 model the same way; and how
far rvvkit's outputs are from onnxruntime's (largest difference over the output's range, same
top-1). Note that onnxruntime's uint8 x int8 kernels on x86 without VNNI saturate pairs of
products to int16 (vpmaddubsw) where rvvkit's sums are exact.

QEMU (exact, repeatable): one inference of the int8 and of the fp32 artifact at each VLEN,
counted by the TCG plugin: dynamic instructions, vector instructions and LMUL-weighted vector
operations (each vector instruction counted as its register-group size), and the ratio
fp32 / int8 of the weighted vector operations. Artifact sizes int8 vs fp32 are reported too.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import rvvkit  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.zoo.quant import float_model, quantized  # noqa: E402

DEFAULT_MODELS = ["squeezenet", "resnet50", "mobilenet_v2", "bert"]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _ort(path: str):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _agreement(ours: dict, ref: dict) -> tuple:
    worst, top1 = 0.0, True
    for name, w in ref.items():
        g = ours[name].astype(np.float64)
        w = w.astype(np.float64)
        worst = max(worst, float(np.abs(g - w).max() / (np.ptp(w) or 1.0)))
        if w.ndim == 2 and w.shape[0] == 1 and w.shape[1] > 1:
            top1 &= int(g.argmax()) == int(w.argmax())
    return worst, top1


def host_latency(path: str, feeds: dict, repeat: int) -> dict:
    from rvvkit.runtime.host import HostSession
    art = rvvkit.build(path)
    sess = _ort(path)
    names = [o.name for o in sess.get_outputs()]
    with HostSession(art) as hs:
        prepared = hs.prepare(feeds)
        ours = hs.run(feeds)
        ref = dict(zip(names, sess.run(names, feeds)))
        for _ in range(3):
            hs.run_prepared(prepared)
            sess.run(names, feeds)
        t_ours, t_ort = [], []
        for i in range(repeat):
            for first in ((0, 1) if i % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                if first == 0:
                    hs.run_prepared(prepared)
                    t_ours.append(time.perf_counter() - t0)
                else:
                    sess.run(names, feeds)
                    t_ort.append(time.perf_counter() - t0)
    worst, top1 = _agreement(ours, ref)
    a, b = statistics.median(t_ours), statistics.median(t_ort)
    return {"rvvkit_ms": a * 1e3, "onnxruntime_ms": b * 1e3, "ratio": a / b,
            "max_diff_of_range": worst, "same_top1": top1, "bytes": len(art.to_bytes())}


def qemu_counts(path: str, feeds: dict, vlen: int, check: bool = False) -> dict:
    """Counts of one inference under QEMU; with `check`, also the outputs of one run against
    onnxruntime's (largest difference over the output's range, same top-1)."""
    from rvvkit.runtime.qemu import QemuSession
    art = rvvkit.build(path)
    with QemuSession(art, vlen=vlen) as sess:
        sess.set_threads(1)     # one core's count: the default (online cores) varies by machine
        c = sess.instruction_counts(feeds)
        macs = int(sess.artifact.meta["macs"])
        out = sess.run(feeds) if check else None
    row = {"insns": c["insns"], "vector_insns": c["vector_insns"],
           "lmul_weighted": c["lmul_weighted_vector_ops"], "macs": macs,
           "bytes": len(art.to_bytes())}
    if check:
        sess = _ort(path)
        names = [o.name for o in sess.get_outputs()]
        row["max_diff_of_range"], row["same_top1"] = _agreement(
            out, dict(zip(names, sess.run(names, feeds))))
    return row


def _float_path(name: str, root: str):
    import onnx
    model, feeds = float_model(name)
    path = str(Path(root) / f"{name}_fp32.onnx")
    onnx.save(model, path)
    return path, feeds


def run_host(models, formats, act, repeat, root) -> list:
    rows = []
    for name in models:
        fpath, feeds = _float_path(name, root)
        variants = [("fp32", fpath)] + [(f, quantized(name, f, root, act)[0]) for f in formats
                                        if not (f == "qop" and name == "bert")]
        for fmt, path in variants:
            t0 = time.perf_counter()
            r = host_latency(path, feeds, repeat)
            rows.append({"model": name, "format": fmt, **r})
            log(f"host {name} {fmt}: rvvkit {r['rvvkit_ms']:.2f} ms, onnxruntime "
                f"{r['onnxruntime_ms']:.2f} ms, ratio {r['ratio']:.2f} "
                f"({time.perf_counter() - t0:.0f}s)")
    return rows


def run_qemu(models, fmt, act, vlens, root, check=False) -> list:
    rows = []
    for name in models:
        fpath, feeds = _float_path(name, root)
        qpath = quantized(name, fmt, root, act)[0]
        for vlen in vlens:
            t0 = time.perf_counter()
            f = qemu_counts(fpath, feeds, vlen)
            q = qemu_counts(qpath, feeds, vlen, check)
            rows.append({"model": name, "format": fmt, "vlen": vlen, "fp32": f, "int8": q,
                         "weighted_ratio": f["lmul_weighted"] / q["lmul_weighted"],
                         "insn_ratio": f["insns"] / q["insns"],
                         "size_ratio": f["bytes"] / q["bytes"]})
            log(f"qemu {name} VLEN {vlen}: weighted fp32/int8 "
                f"{rows[-1]['weighted_ratio']:.2f} ({time.perf_counter() - t0:.0f}s)")
    return rows


def _print(headers, body, markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(headers) + " |")
        print("|" + "---|" * len(headers))
        for b in body:
            print("| " + " | ".join(str(c) for c in b) + " |")
    else:
        print(table(headers, body, align="l" * 2 + "r" * (len(headers) - 2)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    p.add_argument("--formats", nargs="+", default=["qdq", "qop", "dynamic"],
                   choices=["qdq", "qop", "dynamic"])
    p.add_argument("--activation", default="int8", choices=["int8", "uint8"])
    p.add_argument("--qemu-format", default="qop", choices=["qdq", "qop", "dynamic"],
                   help="the quantized form counted under QEMU (default qop)")
    p.add_argument("--vlens", nargs="+", type=int, default=[256])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--check", action="store_true",
                   help="under QEMU, also compare the int8 model's outputs with onnxruntime's")
    p.add_argument("--host-only", action="store_true")
    p.add_argument("--qemu-only", action="store_true")
    p.add_argument("--json", help="write all rows to this file")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    out = {}
    with tempfile.TemporaryDirectory() as root:
        if not args.qemu_only:
            rows = out["host"] = run_host(args.models, args.formats, args.activation,
                                          args.repeat, root)
            _print(["model", "format", "rvvkit ms", "onnxruntime ms", "rvvkit/ort",
                    "max diff / range", "same top-1", "artifact bytes"],
                   [[r["model"], r["format"], f"{r['rvvkit_ms']:.2f}",
                     f"{r['onnxruntime_ms']:.2f}", f"{r['ratio']:.2f}",
                     f"{r['max_diff_of_range']:.4f}", r["same_top1"], f"{r['bytes']:,}"]
                    for r in rows], args.markdown)
        if not args.host_only:
            rows = out["qemu"] = run_qemu(args.models, args.qemu_format, args.activation,
                                          args.vlens, root, args.check)
            _print(["model", "VLEN", "fp32 insns", "int8 insns", "fp32 LMUL-weighted",
                    "int8 LMUL-weighted", "weighted fp32/int8", "size fp32/int8"],
                   [[r["model"], r["vlen"], f"{r['fp32']['insns']:,}",
                     f"{r['int8']['insns']:,}", f"{r['fp32']['lmul_weighted']:,}",
                     f"{r['int8']['lmul_weighted']:,}", f"{r['weighted_ratio']:.2f}",
                     f"{r['size_ratio']:.2f}"] for r in rows], args.markdown)
            if args.check:
                _print(["model", "VLEN", "int8 max diff / range", "same top-1"],
                       [[r["model"], r["vlen"], f"{r['int8']['max_diff_of_range']:.4f}",
                         r["int8"]["same_top1"]] for r in rows], args.markdown)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
