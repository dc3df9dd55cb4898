"""rvvkit float32 against its float16 forms (`rvvkit build --precision auto`) under QEMU with the
K1 ISA profile (Zvfh), by exact instruction counts, with each output checked against
onnxruntime's float32.

    python3 benchmarks/bench_precision.py                                  # the CNNs, VLEN 256
    python3 benchmarks/bench_precision.py --models squeezenet,mobilenet_v2 --vlens 128,256,512
    python3 benchmarks/bench_precision.py --json benchmarks/results/precision_vlen256.json

Per model, precision and VLEN: raw, vector and LMUL-weighted instructions of one inference on
one thread (and the VL-weighted elements where the counting QEMU 10 is built:
scripts/qemu_plugins.sh), the weighted ratio auto/fp32, at the K1's VLEN (256) the K1 cost
model's time (docs/cost-model.md: LLVM's X60 table, compute only; a MODEL, +39 % off the one
published point it could run), and against onnxruntime float32: the
largest absolute error relative to the largest output, and whether the top-1 class agrees.
Models: the `onnx` wheel's light models with seeded random weights (rvvkit.zoo) and MobileNetV2
at 224x224 (benchmarks/mobilenet.py). resnet50's seeded weights make logits near +-2e5, beyond
float16's range in its last layers: --resnet-scale (default 0.7, as benchmarks/peer_ncnn.py)
shrinks its BatchNorm scales (the counts do not depend on the values; the errors then mean
something).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import rvvkit  # noqa: E402
from rvvkit.errors import RvvkitError  # noqa: E402
from rvvkit.measure import cycle_model  # noqa: E402
from rvvkit.measure.reference import ort_session  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.zoo import light_model, sample_inputs  # noqa: E402

DEFAULT_MODELS = ("squeezenet", "mobilenet_v2", "resnet50")
K1 = cycle_model.board_model("k1")


def _resnet_scaled(model, scale: float):
    """resnet50 with every BatchNorm scale times `scale`."""
    inits = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        names = [n.input[1]] if n.op_type == "BatchNormalization" else []
        for name in names:
            t = inits.get(name)
            if t is not None:
                t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * scale, name))
    return model


def load(name: str, resnet_scale: float):
    if name == "mobilenet_v2":
        from mobilenet import mobilenet_v2
        return mobilenet_v2(width=1.0, size=224)
    model = light_model(name)
    if name == "resnet50" and resnet_scale != 1.0:
        model = _resnet_scaled(model, resnet_scale)
    return model, sample_inputs(model)


def measure(name: str, vlens, resnet_scale: float, isa: str):
    model, feeds = load(name, resnet_scale)
    ref = ort_session(model).run(None, feeds)[0]
    rows = []
    for precision in ("fp32", "auto"):
        t0 = time.perf_counter()
        art = rvvkit.build(model, precision=precision, cuda=False)
        for vlen in vlens:
            with rvvkit.load(art, on="qemu", vlen=vlen, isa=isa, threads=1) as s:
                try:
                    c = s.instruction_counts(feeds, vl=True)
                except RvvkitError:        # no counting QEMU 10: LMUL-weighted only
                    c = s.instruction_counts(feeds)
                out = list(s.run(feeds).values())[0]
                x60 = None
                if vlen == K1.vlen:
                    by_class = s.instruction_classes(feeds)["classes"]
                    x60 = cycle_model.classes_fields(by_class, K1, vlen)["class_model_ms"]
            err = float(np.abs(out - ref).max() / np.abs(ref).max())
            rows.append({"model": name, "precision": precision, "vlen": vlen, "isa": isa,
                         "insns": c["insns"], "vector_insns": c["vector_insns"],
                         "weighted": cycle_model.weighted_instructions(c),
                         "vl_weighted": c.get("vl_weighted_vector_ops"),
                         "rel_error": err, "x60_model_ms": x60,
                         "top1_agrees": bool(out.reshape(out.shape[0], -1).argmax(1).tolist()
                                             == ref.reshape(ref.shape[0], -1).argmax(1).tolist()),
                         "weights_bytes": art.meta["memory"]["weights_bytes"],
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def report(rows) -> str:
    fp32 = {(r["model"], r["vlen"]): r for r in rows if r["precision"] == "fp32"}
    out = []
    for r in rows:
        if r["precision"] != "auto":
            continue
        f = fp32[(r["model"], r["vlen"])]
        ms = (f"{f['x60_model_ms']:.1f} / {r['x60_model_ms']:.1f}"
              if r.get("x60_model_ms") else "-")
        out.append([r["model"], r["vlen"], f"{f['weighted'] / 1e6:.2f} M",
                    f"{r['weighted'] / 1e6:.2f} M", f"{r['weighted'] / f['weighted']:.3f}",
                    ms, f"{f['rel_error']:.1e}", f"{r['rel_error']:.1e}",
                    "yes" if r["top1_agrees"] else "NO"])
    return table(["model", "VLEN", "fp32 weighted", "auto weighted", "auto/fp32",
                  "X60 model ms fp32 / auto", "fp32 error", "auto error", "top-1 same"], out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--vlens", default="256")
    p.add_argument("--isa", default="k1", help="ISA profile with Zvfh (default k1)")
    p.add_argument("--resnet-scale", type=float, default=0.7)
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args(argv)
    vlens = [int(v) for v in a.vlens.split(",")]
    rows = [r for m in a.models.split(",") for r in measure(m, vlens, a.resnet_scale, a.isa)]
    print(report(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
