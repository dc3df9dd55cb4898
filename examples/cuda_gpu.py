"""A real architecture on an NVIDIA GPU: every artifact also carries the model as one CUDA
translation unit (the same plan, weights and arena layout as its C), which `on="cuda"`
compiles with nvcc and runs on the GPU. This example builds SqueezeNet (random
weights), runs it on the GPU and on this host, checks both against onnxruntime, and shows
latency and the slowest steps on the GPU (CUDA event times).

Needs: rvvkit with onnx and onnxruntime (`pip install -e .[dev]`), nvcc ($RVVKIT_NVCC, PATH or
/usr/local/cuda/bin) and an NVIDIA GPU with its driver. Without a GPU it stops with the
reason (exit 1); the same CUDA code runs on the CPU emulator with `on="cuda-emu"` (slow;
examples/compare_plot.sh shows it).

Run:    python3 examples/cuda_gpu.py [--model squeezenet] [--out DIR]
        (--model: any of `python3 -m rvvkit.zoo --help`'s names; DIR, else $OUTDIR, else a
        new temporary directory, receives model.onnx and model.rvv)

From the command line: `rvvkit run model.rvv --on cuda --profile`, or `rvvkit compare
model.onnx --on host,cuda`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

import rvvkit
from rvvkit import zoo
from rvvkit.errors import ExecutorUnavailable


def main() -> int:
    p = argparse.ArgumentParser(description="a model on an NVIDIA GPU")
    p.add_argument("--model", default="squeezenet", choices=zoo.LIGHT_MODELS)
    p.add_argument("--out", default=os.environ.get("OUTDIR") or tempfile.mkdtemp(
        prefix="rvvkit-cuda-"), help="directory for the files this writes")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # 1. A real architecture from the onnx wheel with seeded random weights; its final
    #    Softmax's input is exposed as a second output (random weights saturate the softmax,
    #    so the logits are what says whether two runs agree).
    model = zoo.light_model(args.model)
    zoo.expose_logits(model)
    model_path = os.path.join(args.out, "model.onnx")
    onnx.save(model, model_path)
    feeds = zoo.sample_inputs(model)

    # 2. Build: C and CUDA source of the same plan in one artifact.
    art = rvvkit.build(model_path)
    art.save(os.path.join(args.out, "model.rvv"))
    if not (art.meta.get("cuda") or {}).get("available"):
        print(f"no CUDA source: {art.meta['cuda'].get('reason')}", file=sys.stderr)
        return 1

    ref = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    want = dict(zip(names, ref.run(names, feeds)))

    # 3. The GPU. Without one this fails at once (before nvcc runs) with "no CUDA device:
    #    ...". nvcc compiles for this GPU (-arch=native) and the object is cached by content.
    try:
        gpu = rvvkit.load(art, on="cuda")
    except ExecutorUnavailable as exc:
        print(f"cannot run on a GPU here: {exc}", file=sys.stderr)
        return 1
    with gpu, rvvkit.load(art, on="host") as host:
        print(f"{args.model}: {art.meta['macs'] / 1e9:.2f} G MACs, "
              f"{len(art.meta['plan'])} steps")
        ok = True
        for sess in (gpu, host):
            got = sess.run(feeds)   # inputs go to the device and outputs come back
            err = max(float(np.max(np.abs(got[n] - want[n]))) for n in names)
            scale = max(float(np.max(np.abs(want[n]))) for n in names)
            same = all(int(np.argmax(got[n])) == int(np.argmax(want[n])) for n in names)
            m = sess.measure(feeds, repeat=20)
            print(f"{sess.describe()['label']}: max abs error vs onnxruntime {err:.2e}, "
                  f"argmax {'same' if same else 'DIFFERENT'}, latency {m['latency_ms']:.3f} ms")
            ok &= same and err <= 1e-4 + 1e-3 * scale

        # 4. Per-step device times (CUDA events around each step's launches).
        print("slowest steps on the GPU:")
        for r in sorted(gpu.profile(feeds, repeat=20), key=lambda r: -r["seconds"])[:5]:
            gflops = 2 * r["macs"] / r["seconds"] / 1e9 if r["seconds"] else 0.0
            print(f"  {r['kernel']:<24} {r['op']:<12} {1e6 * r['seconds']:8.1f} us "
                  f"{gflops:8.1f} GFLOP/s")
    if not ok:
        print("MISMATCH", file=sys.stderr)
        return 1
    print(f"OK: files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
