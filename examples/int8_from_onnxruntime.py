"""An int8 model from onnxruntime's quantizer, run by rvvkit: quantize a float model with
`onnxruntime.quantization.quantize_static` (QDQ format, per-channel int8 weights, int8
activations, calibrated on a few inputs), build it with rvvkit (its quantized convolutions and
Gemm become int8 x int8 -> int32 kernels), run it on this host and under QEMU, and check it
against ONNX's reference evaluator, the exact meaning of the quantized model.

Why not onnxruntime as the reference? Its int8 kernels on x86 CPUs without VNNI (AVX2 only)
saturate the sum of two adjacent products to int16, so where operands use the full range its
outputs are a few quanta off exact integer arithmetic, and in QDQ models it runs some groups in
float where rvvkit runs the integer kernel; rvvkit's integer sums are exact. The example prints
onnxruntime's distance from the evaluator too, for information.

Needs: rvvkit with onnx and onnxruntime (`pip install -e .[dev]`), a C compiler; QEMU and a
riscv64 cross compiler for the RVV part (skipped with the reason otherwise).

Run:    python3 examples/int8_from_onnxruntime.py [--out DIR]
        (DIR, else $OUTDIR, else a new temporary directory, receives the float and int8
        models and the int8 artifact)

From the command line, once the int8 model exists: `rvvkit build model.int8.onnx -o
model.int8.rvv` and `rvvkit run model.int8.rvv --inputs in.npz --on qemu --vlen 256`.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import version_converter
from onnx.reference import ReferenceEvaluator
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)

import rvvkit
from rvvkit.errors import ExecutorUnavailable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_model import sample_inputs, tiny_cnn  # noqa: E402  (the examples' tiny model)


class Calibration(CalibrationDataReader):
    """What quantize_static reads to choose each activation's scale and zero point: a few
    representative inputs (here seeded random images; in practice, real data)."""

    def __init__(self, count: int = 8):
        self.batches = iter(sample_inputs(seed=100 + i) for i in range(count))

    def get_next(self):
        return next(self.batches, None)


def quanta(got: np.ndarray, want: np.ndarray, scale: float) -> float:
    """The largest difference, in steps of the output's quantization scale."""
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale


def steps(got: np.ndarray, want: np.ndarray, scale: float) -> str:
    n = round(quanta(got, want, scale))
    return f"{n} {'quantum' if n == 1 else 'quanta'}"


def main() -> int:
    p = argparse.ArgumentParser(description="onnxruntime's int8 model, run by rvvkit")
    p.add_argument("--out", default=os.environ.get("OUTDIR") or tempfile.mkdtemp(
        prefix="rvvkit-int8-"), help="directory for the files this writes")
    out = p.parse_args().out
    os.makedirs(out, exist_ok=True)
    logging.getLogger().setLevel(logging.ERROR)   # the quantizer's advice on every call

    # 1. The float model (opset 13: per-channel weights need DequantizeLinear's axis).
    float_path = os.path.join(out, "model.onnx")
    onnx.save(tiny_cnn(), float_path)

    # 2. Quantize as onnxruntime documents it: QDQ format (QuantizeLinear/DequantizeLinear
    #    pairs around float ops), int8 weights per output channel, int8 activations.
    #    (QuantFormat.QOperator, uint8 activations and quantize_dynamic build in rvvkit too.)
    int8_path = os.path.join(out, "model.int8.onnx")
    quantize_static(float_path, int8_path, Calibration(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    per_channel=True)
    model = onnx.load(int8_path)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"quantized: {int8_path} ({len(model.graph.node)} nodes: {', '.join(ops)})")

    # 3. Build with rvvkit. The Q/DQ groups fold into integer kernels (rvvkit.QConv,
    #    rvvkit.QMatMul): int8 operands, int32 sums, a requantising epilogue per channel.
    fp32_art = rvvkit.build(float_path, cuda=False)
    art = rvvkit.build(int8_path)
    art_path = os.path.join(out, "model.int8.rvv")
    art.save(art_path)
    kernels = [f"{s['op']} ({s['node']})" for s in art.meta["plan"]]
    print(f"built {art_path}: {len(kernels)} steps:\n  " + "\n  ".join(kernels))
    print(f"weights: {len(art.weights):,} bytes int8 vs {len(fp32_art.weights):,} bytes float32")
    assert any(s["op"] in ("rvvkit.QConv", "rvvkit.QMatMul") for s in art.meta["plan"])

    # 4. The reference: ONNX's own evaluator (pure Python, exact integer semantics), and
    #    onnxruntime for comparison. Outputs "logits" (int8 Gemm, dequantized) and "probs".
    feeds = sample_inputs(seed=0)
    names = [o.name for o in model.graph.output]
    # (the evaluator implements DequantizeLinear from opset 19 on: convert the copy it runs)
    evaluator = ReferenceEvaluator(version_converter.convert_version(model, 21))
    exact = dict(zip(names, evaluator.run(names, feeds)))
    ort_sess = ort.InferenceSession(int8_path, providers=["CPUExecutionProvider"])
    by_ort = dict(zip(names, ort_sess.run(names, feeds)))
    # the scale of the quantized logits (the DequantizeLinear that outputs them), to state
    # differences in quanta
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    dq_logits = next(n for n in model.graph.node if n.output[0] == "logits")
    scale = float(inits[dq_logits.input[1]])
    print(f"onnxruntime vs the evaluator: logits {steps(by_ort['logits'], exact['logits'], scale)}"
          " apart at most (not exact arithmetic on every CPU: see this file's header)")

    # 5. Run on the host and under QEMU (RVV 1.0, VLEN 256) and compare with the evaluator.
    for on, options in (("host", {}), ("qemu", {"vlen": 256})):
        try:
            sess = rvvkit.load(art, on=on, **options)
        except ExecutorUnavailable as exc:
            print(f"{on}: skipped: {exc}")
            continue
        with sess:
            got = sess.run(feeds)
        q = quanta(got["logits"], exact["logits"], scale)
        same = int(np.argmax(got["probs"])) == int(np.argmax(exact["probs"]))
        print(f"{sess.describe()['label']}: logits {steps(got['logits'], exact['logits'], scale)}"
              f" from the evaluator at most, "
              f"max abs error {float(np.max(np.abs(got['logits'] - exact['logits']))):.2e}, "
              f"class {int(np.argmax(got['probs']))} ({'same' if same else 'DIFFERENT'})")
        assert q <= 1 and same, f"{on}: int8 outputs differ from the reference evaluator"

    print(f"\nOK: files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
