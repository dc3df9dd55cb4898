"""The generated translation unit compiles warning-clean as C and as C++ with every compiler a
user may pick: host gcc/g++/clang and the riscv64 cross compilers."""
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rvvkit
from rvvkit.zoo import light_model

WARN = ["-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared"]
COMPILERS = {
    "gcc": (["gcc", "-std=c11"], "gcc"),
    "g++": (["g++", "-std=c++11"], "g++"),
    "clang": (["clang-16", "-std=c11"], "clang-16"),
    "clang++": (["clang-16", "-x", "c++", "-std=c++11"], "clang-16"),
    "riscv64-gcc": (["riscv64-linux-gnu-gcc", "-std=c11", "-march=rv64gcv", "-mabi=lp64d"],
                    "riscv64-linux-gnu-gcc"),
    "riscv64-g++": (["riscv64-linux-gnu-g++", "-std=c++11", "-march=rv64gcv", "-mabi=lp64d"],
                    "riscv64-linux-gnu-g++"),
    "clang-rvv": (["clang-16", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-std=c11",
                   "-fuse-ld=lld"], "clang-16"),
}


def _mixed_model() -> onnx.ModelProto:
    """One node of most kernel families, so a single compile covers them."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    dw = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((10, 8 * 4 * 4)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in
             ((w, "w"), (dw, "dw"), (fc, "fc"), (np.ones(10, np.float32), "fcb"),
              (np.full((8, 1, 1), 0.5, np.float32), "half"))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "dw"], ["c2"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("Mul", ["s", "half"], ["m"]),
        helper.make_node("LRN", ["m"], ["l"], size=3),
        helper.make_node("MaxPool", ["l"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["p"], ["q"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["p", "q"], ["cat"], axis=1),
        helper.make_node("Transpose", ["cat"], ["t"], perm=[0, 1, 3, 2]),
        helper.make_node("GlobalAveragePool", ["t"], ["g"]),
        helper.make_node("Sigmoid", ["q"], ["sq"]),
        helper.make_node("Flatten", ["sq"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["o"], transB=1),
        helper.make_node("Softmax", ["o"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    out = {}
    for name, model in (("mixed", _mixed_model()), ("shufflenet", light_model("shufflenet"))):
        path = d / f"{name}.c"
        path.write_text(rvvkit.build(model).c_source)
        out[name] = path
    return out


@pytest.mark.parametrize("model", ["mixed", "shufflenet"])
@pytest.mark.parametrize("compiler", sorted(COMPILERS))
def test_generated_source_is_warning_clean(sources, compiler, model, tmp_path):
    argv, exe = COMPILERS[compiler]
    if shutil.which(exe) is None:
        pytest.skip(f"{exe} not installed (scripts/setup.sh installs it)")
    cmd = argv + WARN + [str(sources[model]), "-o", str(tmp_path / "k.so"), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), \
        f"{' '.join(cmd)}\n{proc.stderr[:4000]}"
