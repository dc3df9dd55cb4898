"""The activations that pattern fusion produces (SiLU, GELU both forms, HardSwish,
HardSigmoid) compile warning-clean as C and C++ with every compiler a user may pick, alone
and in the epilogues of Conv (dense and depthwise), Gemm and element-wise kernels, where
their RVV forms carry vector exp / GELU helpers."""
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rvvkit
from test_codegen_clean import COMPILERS, WARN

node = helper.make_node


def _activations_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    arrays = {"w": (8, 3, 3, 3), "dw": (8, 1, 3, 3), "fc": (8 * 5 * 5, 9)}
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in arrays.items()]
    nodes = [
        node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
        node("Gelu", ["c1"], ["g1"]),                                   # dense conv epilogue
        node("Conv", ["g1", "dw"], ["c2"], group=8, pads=[1, 1, 1, 1]),
        node("Sigmoid", ["c2"], ["s2"]),
        node("Mul", ["c2", "s2"], ["a2"]),                              # SiLU, depthwise
        node("Add", ["a2", "g1"], ["r"]),
        node("HardSwish", ["r"], ["h"]),                                # element-wise epilogue
        node("Gelu", ["x"], ["gt"], approximate="tanh"),                # unary, alone
        node("HardSigmoid", ["gt"], ["hs"], alpha=0.3, beta=0.4),
        node("Flatten", ["h"], ["f"]),
        node("Gemm", ["f", "fc"], ["o"]),
        node("Sigmoid", ["o"], ["so"]),
        node("Mul", ["so", "o"], ["y"]),                                # SiLU, Gemm epilogue
    ]
    graph = helper.make_graph(
        nodes, "acts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "hs")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    art = rvvkit.build(_activations_model())
    plan = [s["op"] for s in art.meta["plan"]]
    assert plan.count("Conv") == 2 and "Gemm" in plan and "Mul" not in plan, plan
    path = tmp_path_factory.mktemp("src") / "acts.c"
    path.write_text(art.c_source)
    return path


@pytest.mark.parametrize("compiler", sorted(COMPILERS))
def test_activations_source_is_warning_clean(source, compiler, tmp_path):
    argv, exe = COMPILERS[compiler]
    if shutil.which(exe) is None:
        pytest.skip(f"{exe} not installed (scripts/setup.sh installs it)")
    cmd = argv + WARN + [str(source), "-o", str(tmp_path / "k.so"), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), \
        f"{' '.join(cmd)}\n{proc.stderr[:4000]}"
