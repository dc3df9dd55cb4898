"""Quantized real models, as onnxruntime.quantization writes them (rvvkit/zoo/quant.py),
run by rvvkit on the host and under QEMU (VLEN 128 with tail lanes all ones, and 512), one of
them also through the CUDA source (the CPU emulator; a GPU where there is one), and
compared with onnxruntime running the same quantized model: the same top-1 class, and every
output within REL of its range (0: equal).

Where they are not equal, rvvkit is the exact one: onnxruntime's uint8 x int8 kernels on x86
without VNNI (this machine) saturate the sum of two adjacent products to int16 (see
tests/ops/test_ops_quant_gemm.py), and in QDQ models it leaves some groups in float (it
decides per node which Conv its kernels take) where rvvkit runs the integer kernel; a float sum
requantised differs from the integer one by a quantum now and then, and the difference travels
through the rest of the model (BERT's pooler amplifies it through tanh)."""
from __future__ import annotations

import numpy as np
import pytest

import rvvkit
from conftest import run_ort
from executors import ALL, HOST, full_matrix
from rvvkit.zoo.quant import quantized

QEMU = [e for e in ALL if e.id in ("qemu-vlen128-tail-ones", "qemu-vlen512")]
# the CUDA source (nvcc -Werror first, where nvcc is) on the CPU emulator, and a GPU where
# there is one: one model, the emulator runs every thread in turn on one core
CUDA = [e for e in ALL if e.on in ("cuda-emu", "cuda")]
CASES = [
    # model, format, activation type, REL, executors
    ("squeezenet", "qop", "int8", 0.0, [HOST] + QEMU),
    ("squeezenet", "qdq", "uint8", 0.02, [HOST] + QEMU),
    ("mobilenet_v2", "qop", "uint8", 0.02, [HOST] + QEMU + CUDA),
    ("mobilenet_v2", "qop", "int8", 0.0, [HOST]),
    ("mobilenet_v2", "qdq", "int8", 0.02, [HOST] + QEMU),
    ("mobilenet_v2", "dynamic", "int8", 0.01, [HOST] + QEMU),
    ("bert", "dynamic", "int8", 0.001, [HOST] + QEMU),
    ("bert", "qdq", "int8", 0.06, [HOST] + QEMU),
]
if full_matrix():   # scripts/nightly.sh; about 70 s of CI's time otherwise
    CASES += [
        # ResNet50 under QEMU takes about a minute per run: one VLEN here (128 is checked by
        # benchmarks/bench_int8.py --check), the host for both formats
        ("resnet50", "qop", "int8", 0.01, [HOST] + QEMU[1:]),
        ("resnet50", "qdq", "uint8", 0.02, [HOST]),
    ]


def _params():
    for name, fmt, act, rel, executors in CASES:
        for ex in executors:
            yield pytest.param(name, fmt, act, rel, ex, id=f"{name}-{fmt}-{act}-{ex.id}",
                               marks=[getattr(pytest.mark, ex.mark)] if ex.mark else [])


@pytest.mark.parametrize("name,fmt,act,rel,runner", list(_params()))
def test_quantized_model_matches_onnxruntime(name, fmt, act, rel, runner, tmp_path_factory):
    why = runner.why_not()
    if why:
        pytest.skip(why)
    path, feeds = quantized(name, fmt, str(tmp_path_factory.getbasetemp()), act)
    want = run_ort(path, feeds)
    art = rvvkit.build(path)
    assert any(s["op"] in ("rvvkit.QConv", "rvvkit.QMatMul") for s in art.meta["plan"])
    runner.check_artifact(art)
    with rvvkit.load(art, on=runner.on, **runner.options) as sess:
        got = sess.run(feeds)
    for out, w in want.items():
        g = got[out]
        assert g.shape == w.shape and g.dtype == w.dtype, out
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        span = float(np.ptp(w.astype(np.float64))) or 1.0
        assert diff.max() <= rel * span, (out, diff.max() / span, np.mean(diff > 0))
        if w.ndim == 2 and w.shape[0] == 1 and w.shape[1] > 1:
            assert g.argmax() == w.argmax(), out
