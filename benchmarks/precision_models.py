"""Accuracy of the float16 forms on every model: the `onnx` wheel's light models (seeded random
weights, rvvkit.zoo) and the stored suite (tests/models: torchvision, timm, transformers, RNN and
YOLO-style exports), built with `--precision auto` and run under QEMU with the K1 profile (Zvfh),
against onnxruntime's float32 on the same inputs.

    python3 benchmarks/precision_models.py                       # every model, VLEN 256
    python3 benchmarks/precision_models.py --models squeezenet,resnet18_legacy
    python3 benchmarks/precision_models.py --json benchmarks/results/precision_models.json

Per model: how many kernels took a float16 form, the largest absolute error of each output
relative to that output's largest magnitude, and (for outputs of a classifier's shape, N x
classes, trailing 1s allowed) whether the top-1 class agrees. The limit this prints against is the documented one
(docs/guide/precision.md): relative error <= 2e-2 and the top-1 unchanged.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import rvvkit  # noqa: E402
from rvvkit.measure.reference import ort_session  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.zoo import LIGHT_MODELS, light_model, sample_inputs  # noqa: E402

SUITE = HERE.parent / "tests" / "models"
LIMIT = 2e-2


def models():
    return list(LIGHT_MODELS) + sorted(p.stem for p in SUITE.glob("*.onnx"))


def load(name: str):
    if name in LIGHT_MODELS:
        m = light_model(name)
        return m, sample_inputs(m)
    data = np.load(SUITE / f"{name}.npz")
    return str(SUITE / f"{name}.onnx"), {k[3:]: data[k] for k in data.files
                                         if k.startswith("in.")}


def check(name: str, vlen: int) -> dict:
    model, feeds = load(name)
    row = {"model": name}
    t0 = time.perf_counter()
    try:
        art = rvvkit.build(model, precision="auto", cuda=False)
    except rvvkit.RvvkitError as exc:
        return {**row, "error": str(exc).splitlines()[0]}
    row["half_kernels"] = sum(k["hint"].endswith("_auto") or k["hint"] == "dwconv"
                              for k in art.meta["kernels"])
    sess = ort_session(model)
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    with rvvkit.load(art, on="qemu", vlen=vlen, isa="k1") as s:
        out = s.run(feeds)
    errs, top1 = [], []
    for k, r in ref.items():
        y = np.asarray(out[k], np.float64)
        r = np.asarray(r, np.float64)
        if not np.issubdtype(r.dtype, np.floating) or r.size == 0:
            continue
        errs.append(float(np.abs(y - r).max() / max(np.abs(r).max(), 1e-30)))
        if r.ndim >= 2 and r.shape[1] > 1 and all(d == 1 for d in r.shape[2:]):
            n = r.shape[0]          # N x classes (x 1 x 1: squeezenet's pooled logits)
            top1.append(bool((y.reshape(n, -1).argmax(1) == r.reshape(n, -1).argmax(1)).all()))
    row.update(rel_error=max(errs) if errs else 0.0, top1=all(top1) if top1 else None,
               seconds=round(time.perf_counter() - t0, 1))
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated (default: every light and stored model)")
    p.add_argument("--vlen", type=int, default=256)
    p.add_argument("--json")
    a = p.parse_args(argv)
    names = a.models.split(",") if a.models else models()
    rows = []
    for n in names:
        rows.append(check(n, a.vlen))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    body = [[r["model"], r.get("half_kernels", "-"),
             f"{r['rel_error']:.1e}" if "rel_error" in r else r.get("error", ""),
             {None: "-", True: "yes", False: "NO"}[r.get("top1")],
             "ok" if r.get("rel_error", 1) <= LIMIT and r.get("top1") is not False else "OVER"]
            for r in rows]
    print(table(["model", "float16 kernels", "rel. error", "top-1 same", f"<= {LIMIT}"], body))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
