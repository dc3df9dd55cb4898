"""Compare outputs written by `rvvkit run` with onnxruntime on the same model and inputs:
per output, the max abs error and whether the argmax agrees; exit status 1 on a mismatch
(beyond rtol 1e-3 / atol 1e-4). quickstart.sh and board_without_compiler.sh use it.

Run:    python3 examples/compare_with_onnxruntime.py MODEL.onnx IN.npz OUT.npz"""
import sys

import numpy as np

from rvvkit.measure.reference import ort_session


def main(model: str, inputs: str, outputs: str) -> int:
    with np.load(inputs) as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(outputs) as f:
        ours = {k: f[k] for k in f.files}
    sess = ort_session(model)  # CPU, one thread: rvvkit's usual peer
    names = [o.name for o in sess.get_outputs()]
    ok = True
    for name, ref in zip(names, sess.run(names, feeds)):
        got = ours[name]
        err = float(np.max(np.abs(got - ref)))
        same = int(np.argmax(got)) == int(np.argmax(ref))
        good = np.allclose(got, ref, rtol=1e-3, atol=1e-4) and same
        ok &= good
        print(f"{name}: max abs error {err:.3g}, argmax rvvkit {int(np.argmax(got))} / "
              f"onnxruntime {int(np.argmax(ref))} -> {'OK' if good else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
