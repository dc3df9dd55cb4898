"""rvvkit from Python alone: build an artifact from an ONNX model, run it on this host and on
an emulated RVV board (QEMU) at two vector lengths, check it against onnxruntime, and look at
where the time goes.

Needs: rvvkit with its build extra (onnx) and onnxruntime (`pip install -e .[dev]`), a C
compiler; for the QEMU part qemu-riscv64 and a riscv64 cross compiler (scripts/setup.sh
installs both; without them that part says why and is skipped).

Run:    python3 examples/python_api.py [--out DIR]
        (DIR, else $OUTDIR, else a new temporary directory, receives model.onnx and model.rvv)

The same steps from the command line: `rvvkit build model.onnx -o model.rvv`, `rvvkit run
model.rvv --inputs in.npz --output out.npz --profile`, `rvvkit run ... --on qemu --vlen 512`.
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
from rvvkit.errors import ExecutorUnavailable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_model import sample_inputs, tiny_cnn  # noqa: E402  (the examples' tiny model)


def max_error(got, want) -> float:
    """The largest absolute difference over every output."""
    return max(float(np.max(np.abs(got[name] - want[name]))) for name in want)


def main() -> int:
    p = argparse.ArgumentParser(description="rvvkit's Python API, end to end")
    p.add_argument("--out", default=os.environ.get("OUTDIR") or tempfile.mkdtemp(
        prefix="rvvkit-python-api-"), help="directory for the files this writes")
    out = p.parse_args().out
    os.makedirs(out, exist_ok=True)

    # 1. A model. Any ONNX file works (path, bytes or ModelProto); here a tiny CNN written
    #    with onnx.helper, and one seeded input image keyed by the graph's input name.
    model_path = os.path.join(out, "model.onnx")
    onnx.save(tiny_cnn(), model_path)
    feeds = sample_inputs()

    # 2. Build: ONNX -> graph passes -> kernel plan -> C (and CUDA) source + weights, packed
    #    into one artifact file. Nothing is compiled yet: the artifact carries source, which
    #    each target compiles with its own compiler when it loads it.
    art = rvvkit.build(model_path)
    art_path = os.path.join(out, "model.rvv")
    art.save(art_path)
    meta = art.meta
    print(f"built {art_path}: {os.path.getsize(art_path):,} bytes, "
          f"{len(meta['plan'])} steps, {len(meta['kernels'])} distinct kernels")
    for t in meta["inputs"] + meta["outputs"]:
        print(f"  {t['name']}: {t['dtype']} {t['shape']}")
    for step in meta["plan"]:   # each step names the ONNX node(s) it runs, fused ones too
        fused = "".join(f" + {f['op']} ({f['name']})" for f in step.get("fused", []))
        print(f"  {step['kernel']:<18} {step['op']} ({step['node']}){fused}")

    # 3. The reference: the same model and inputs on onnxruntime.
    ref_sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in ref_sess.get_outputs()]
    want = dict(zip(names, ref_sess.run(names, feeds)))

    # 4. This host: rvvkit.load JIT-compiles the artifact's C with the host compiler (cached
    #    on disk by content, so a second load is instant) and calls it in process via cffi.
    #    Sessions are context managers; run() takes and returns {name: numpy array}.
    with rvvkit.load(art_path, on="host") as sess:
        print(f"\nhost session: {sess.describe()['label']}, compiler: {sess.compiler_text()}")
        got = sess.run(feeds)
        err = max_error(got, want)
        print(f"host: max abs error vs onnxruntime {err:.2e}, class "
              f"{int(np.argmax(got['probs']))} (onnxruntime: {int(np.argmax(want['probs']))})")
        assert err < 1e-4, "host outputs differ from onnxruntime"

        # Where the time goes: per-step mean seconds over `repeat` runs, then the latency of
        # whole inferences (median, inputs already in place).
        rows = sorted(sess.profile(feeds, repeat=20), key=lambda r: -r["seconds"])
        print("  slowest steps:")
        for r in rows[:3]:
            print(f"    {r['kernel']:<24} {r['op']:<20} {1e6 * r['seconds']:8.1f} us  "
                  f"{r['macs']:>9,} MACs")
        m = sess.measure(feeds, repeat=20)
        print(f"  latency: {m['latency_ms']:.3f} ms ({m['latency_stat']} of {m['runs']} runs)")

        # Wrong inputs are refused before anything runs, with one line saying what is wrong.
        try:
            sess.run({"image": np.zeros((1, 3, 8, 8), np.float32)})
        except rvvkit.InputError as exc:
            print(f"  a wrong shape is refused: InputError: {exc}")

    # 5. An RVV board emulated by QEMU, at two vector lengths. The artifact's C is
    #    cross-compiled once (RVV code that works at any VLEN) and run by the standalone C
    #    runner under qemu-riscv64; measure() adds the exact instruction count of one
    #    inference, the way to compare RVV code without a board.
    for vlen in (128, 512):
        try:
            sess = rvvkit.load(art_path, on="qemu", vlen=vlen)
        except ExecutorUnavailable as exc:   # no QEMU or no riscv64 compiler here
            print(f"\nqemu: skipped: {exc}")
            break
        with sess:
            got = sess.run(feeds)
            err = max_error(got, want)
            m = sess.measure(feeds, repeat=1, warmup=0)
            print(f"\n{sess.describe()['label']}: max abs error vs onnxruntime {err:.2e}, "
                  f"{m['dynamic_instructions']:,} instructions per inference "
                  f"({m['vector_instructions']:,} vector)")
            assert err < 1e-4, f"VLEN {vlen} outputs differ from onnxruntime"

    print(f"\nOK: files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
