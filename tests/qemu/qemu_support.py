"""What the QEMU tests share: which tools this machine has (tests skip, with the reason, only
when qemu-riscv64 or a riscv64 compiler is missing; CI installs both via scripts/setup.sh),
small models, and the comparison with onnxruntime.

Not a conftest.py: tests/conftest.py is imported by name (`from conftest import ...`), and a
second module of that name would shadow it."""
from __future__ import annotations

import shutil
from typing import Dict, Mapping, Optional

import numpy as np
import pytest
from onnx import helper

from conftest import expose_logits, make_model, rand  # noqa: F401 (re-exported)
from rvvkit.jit import targets

RTOL, ATOL = 1e-3, 1e-4
LOGITS_SCALE_ATOL = 1e-5  # as in tests/host/test_light_models.py: logits reach ~1e5

RV = targets.riscv()  # the facts of toolchain/targets/riscv64-linux-gnu.toml
QEMU = shutil.which(RV.qemu_binary)
CLANG = "clang-16" if shutil.which("clang-16") and shutil.which("ld.lld-16") else None
GCC_CXX = f"{RV.triple}-g++" if shutil.which(f"{RV.triple}-g++") else None
RV_COMPILER = CLANG or GCC_CXX  # the vectorising one when there is a choice

needs_qemu = pytest.mark.skipif(
    not (QEMU and RV_COMPILER), reason="qemu-riscv64 or a riscv64 compiler (clang-16 + lld-16, "
    "riscv64-linux-gnu-g++) missing: run scripts/setup.sh")
needs_both_compilers = pytest.mark.skipif(
    not (QEMU and CLANG and GCC_CXX), reason="needs qemu-riscv64, clang-16 + lld-16 and "
    "riscv64-linux-gnu-g++: run scripts/setup.sh")

node = helper.make_node


def small_model():
    """A few of every kernel family on odd sizes (tails at every VLEN): conv (3x3, pointwise,
    depthwise with stride), fused activations, pooling, concat, elementwise, Gemm, Softmax."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "wd", "bd"], ["c2"], group=6, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Clip", ["c2", "lo", "hi"], ["r2"]),
        node("Conv", ["r2", "wp", "bp"], ["c3"]),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Conv", ["p1", "wq", "bq"], ["c4"]),
        node("Add", ["c3", "c4"], ["s"]),
        node("Sigmoid", ["s"], ["sg"]),
        node("Mul", ["s", "sg"], ["sw"]),
        node("Concat", ["sw", "c4"], ["cat"], axis=1),
        node("AveragePool", ["cat"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
        node("GlobalAveragePool", ["cat"], ["gap"]),
        node("Flatten", ["ap"], ["f"]),
        node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
        node("Softmax", ["logits"], ["probs"]),
    ]
    inits = {"w1": rand(6, 3, 3, 3, seed=1, scale=0.3), "b1": rand(6, seed=2, scale=0.1),
             "wd": rand(6, 1, 3, 3, seed=3, scale=0.3), "bd": rand(6, seed=4, scale=0.1),
             "lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32),
             "wp": rand(11, 6, 1, 1, seed=5, scale=0.3), "bp": rand(11, seed=6, scale=0.1),
             "wq": rand(11, 6, 1, 1, seed=7, scale=0.3), "bq": rand(11, seed=8, scale=0.1),
             "fw": rand(13, 22 * 3 * 3, seed=9, scale=0.1), "fb": rand(13, seed=10)}
    return make_model(nodes, [("x", (1, 3, 13, 13))], ["probs", "logits", "gap"], inits,
                      name="qemu_small")


def small_feeds(seed: int = 11) -> Dict[str, np.ndarray]:
    return {"x": rand(1, 3, 13, 13, seed=seed)}


def assert_close(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], what: str,
                 logits: Optional[str] = None, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Same outputs, shapes, values within tolerance and the same argmax."""
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for name, ref in want.items():
        out = got[name]
        assert out.shape == ref.shape, f"{what}/{name}: shape {out.shape} != {ref.shape}"
        assert np.isfinite(out).all(), f"{what}/{name}: non-finite values"
        tol = max(atol, LOGITS_SCALE_ATOL * float(np.abs(ref).max())) if name == logits else atol
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=tol, err_msg=f"{what}: {name!r}")
        assert int(np.argmax(out)) == int(np.argmax(ref)), f"{what}/{name}: argmax differs"
