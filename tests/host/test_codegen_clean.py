"""The generated translation unit compiles warning-clean as C and as C++ with every compiler a
user may pick: host gcc/g++/clang and the riscv64 cross compilers."""
import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import rvvkit
from rvvkit.zoo import light_model
from rvvkit.codegen.c import POOL
from rvvkit.codegen.loops import loop

WARN = ["-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared"]
COMPILERS = {
    "gcc": (["gcc", "-std=c11"], "gcc"),
    "g++": (["g++", "-std=c++11"], "g++"),
    "clang": (["clang-16", "-std=c11"], "clang-16"),
    "clang++": (["clang-16", "-x", "c++", "-std=c++11"], "clang-16"),
    # x86 without AVX-512 takes its own GEMM micro-kernel blocks (kernels/gemm/emit.py)
    "gcc-avx2": (["gcc", "-std=c11", "-mavx2", "-mfma", "-mno-avx512f"], "gcc"),
    "clang++-avx2": (["clang-16", "-x", "c++", "-std=c++11", "-mavx2", "-mfma",
                      "-mno-avx512f"], "clang-16"),
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


def _sequence_model() -> onnx.ModelProto:
    """1-D/3-D conv and pooling, ConvTranspose, LSTM, GRU, RNN, Einsum, Attention."""
    rng = np.random.default_rng(0)

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)
    arrays = {"w1": r(4, 2, 3), "wt": r(4, 2, 4), "wl": r(1, 16, 8), "rl": r(1, 16, 4),
              "bl": r(1, 32), "wg": r(2, 12, 4), "rg": r(2, 12, 4), "wr": r(1, 4, 4),
              "w3": r(2, 1, 2, 2, 2), "sl": np.array([6], np.int32),
              "pk": r(1, 2, 3, 4), "pv": r(1, 2, 3, 4)}
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in arrays.items()]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1"], ["c1"], pads=[1, 1]),                       # (1,4,12)
        node("MaxPool", ["c1"], ["p1"], kernel_shape=[2], strides=[2]),        # (1,4,6)
        node("ConvTranspose", ["p1", "wt"], ["t1"], strides=[2], pads=[1, 1]),  # (1,2,12)
        node("AveragePool", ["t1"], ["a1"], kernel_shape=[3], pads=[1, 1], strides=[2]),
        node("Transpose", ["p1"], ["s1"], perm=[2, 0, 1]),                    # (6,1,4)
        node("Concat", ["s1", "s1"], ["s2"], axis=2),                         # (6,1,8)
        node("LSTM", ["s2", "wl", "rl", "bl", "sl"], ["yl", "hl", "cl"], hidden_size=4),
        node("GRU", ["s1", "wg", "rg"], ["yg", "hg"], hidden_size=4,
             direction="bidirectional", linear_before_reset=1),
        node("RNN", ["s1", "wr", "rq"], ["yr"], hidden_size=4),   # run-time R: repacked
        node("Einsum", ["yl", "yl"], ["e1"], equation="tdbh,udbh->dbtu"),
        node("Einsum", ["e1"], ["e2"], equation="dbtu->ut"),
        node("Attention", ["q", "q", "q"], ["att"], is_causal=1, softcap=3.0),
        node("Attention", ["q", "q", "q"], ["att3"]),   # unmasked: the Softmax kernel's row
        node("Attention", ["q", "q", "q", "", "pk", "pv"], ["att2", "pk2", "pv2", "qk2"],
             is_causal=1, qk_matmul_output_mode=3),   # KV cache
        node("Conv", ["v", "w3"], ["v1"], pads=[1, 1, 1, 1, 1, 1]),
        node("AveragePool", ["v1"], ["v2"], kernel_shape=[2, 2, 2], count_include_pad=1,
             pads=[1, 0, 0, 0, 1, 1]),
    ]
    outs = ["a1", "hl", "cl", "yg", "hg", "yr", "e2", "att", "v2", "att2", "pk2", "pv2", "qk2",
            "att3"]
    graph = helper.make_graph(
        nodes, "sequence",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 12]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 5, 4]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 1, 4, 3, 5]),
         helper.make_tensor_value_info("rq", TensorProto.FLOAT, [1, 4, 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def _math_model():
    """Unary math rows (vector exp ones), typed element-wise ops on every dtype, float16
    conversions."""
    node = helper.make_node
    r = np.random.default_rng(0)
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in (
        ("w", r.standard_normal((4, 1, 3, 3)).astype(np.float32)),
        ("slope", np.full((4, 1, 1), 0.1, np.float32)), ("two", np.array(2.0, np.float32)),
        ("k", np.array([3], np.int64)), ("k8", np.array([3], np.uint8)),
        ("ks8", np.array([-3], np.int8)))]
    nodes = [
        node("Conv", ["x", "w"], ["c"], group=4, pads=[1, 1, 1, 1]),
        node("Sigmoid", ["c"], ["s"]), node("Tanh", ["s"], ["t"]), node("Mish", ["t"], ["m"]),
        node("Elu", ["m"], ["e"]), node("Exp", ["e"], ["ex"]), node("Erf", ["ex"], ["er"]),
        node("Round", ["er"], ["ro"]), node("PRelu", ["ro", "slope"], ["pr"]),
        node("Pow", ["pr", "two"], ["p2"]), node("Max", ["p2", "x", "e"], ["mx"]),
        node("Mod", ["mx", "two"], ["md"], fmod=1), node("Less", ["md", "x"], ["lt"]),
        node("Not", ["lt"], ["nl"]), node("Xor", ["lt", "nl"], ["xo"]),
        node("Where", ["xo", "md", "x"], ["wh"]), node("IsNaN", ["wh"], ["nan"]),
        node("IsInf", ["wh"], ["inf"], detect_negative=0), node("Or", ["nan", "inf"], ["bad"]),
        node("Cast", ["wh"], ["i64"], to=TensorProto.INT64), node("Mod", ["i64", "k"], ["im"]),
        node("Div", ["im", "k"], ["idv"]), node("Neg", ["idv"], ["ng"]),
        node("Cast", ["ng"], ["u8"], to=TensorProto.UINT8), node("Mod", ["u8", "k8"], ["um"]),
        node("Abs", ["um"], ["ua"]), node("Sign", ["ua"], ["us"]),
        node("Max", ["us", "ua"], ["up"]),
        node("Cast", ["up"], ["i8"], to=TensorProto.INT8), node("Mod", ["i8", "ks8"], ["i8m"]),
        node("Min", ["i8m", "i8"], ["i8n"]), node("Cast", ["i8n"], ["y"], to=TensorProto.FLOAT),
        node("Softplus", ["y"], ["sp"]), node("Mean", ["sp", "x"], ["out"]),
        node("Cast", ["out"], ["half"], to=TensorProto.FLOAT16),     # codegen/half.py's helpers
        node("Cast", ["half"], ["hb"], to=TensorProto.BOOL),
        node("Cast", ["half"], ["hi"], to=TensorProto.INT32),
        node("Cast", ["hi"], ["hh"], to=TensorProto.FLOAT16),
    ]
    graph = helper.make_graph(
        nodes, "math", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 6])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("bad", TensorProto.BOOL, None),
         helper.make_tensor_value_info("hb", TensorProto.BOOL, None),
         helper.make_tensor_value_info("hh", TensorProto.FLOAT16, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _reduce_model() -> onnx.ModelProto:
    """Reductions (rows, planes, split axes, integer), ArgMax, TopK, CumSum, Hardmax and the
    normalisations."""
    rng = np.random.default_rng(0)
    arrays = {"ax23": np.array([2, 3], np.int64), "ax13": np.array([1, 3], np.int64),
              "ax1": np.array([1], np.int64), "k": np.array([3], np.int64),
              "cax": np.array(1, np.int32), "s57": np.ones((5, 7), np.float32),
              **{n: rng.standard_normal(s).astype(np.float32)
                 for n, s in (("s7", 7), ("b7", 7), ("s6", 6), ("b6", 6))}}
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in arrays.items()]
    node = helper.make_node
    nodes = [node("ReduceMean", ["x", "ax23"], ["o1"]),
             node("ReduceMax", ["x", "ax13"], ["o2"], keepdims=0),
             node("ReduceL1", ["x", "ax1"], ["o3"]),
             node("ReduceLogSumExp", ["x", "ax13"], ["o4"]),
             node("ReduceLogSumExp", ["x", "ax1"], ["o5"]),
             node("ReduceLogSum", ["x", "ax23"], ["o6"]),
             node("ReduceProd", ["x", "ax1"], ["o7"]),
             node("ArgMax", ["x"], ["a1"], axis=1),
             node("ReduceSum", ["a1", "ax23"], ["a2"]),
             node("TopK", ["x", "k"], ["t1", "t2"], axis=2),
             node("CumSum", ["x", "cax"], ["c1"], exclusive=1, reverse=1),
             node("Hardmax", ["x"], ["h1"]),
             node("LayerNormalization", ["x", "s7", "b7"], ["n1"]),
             node("LayerNormalization", ["x", "s57"], ["n2", "n2m", "n2i"], axis=2),
             node("RMSNormalization", ["x", "s7"], ["n3"]),
             node("GroupNormalization", ["x", "s6", "b6"], ["n4"], num_groups=2),
             node("InstanceNormalization", ["x", "s6", "b6"], ["n5"]),
             node("LpNormalization", ["x"], ["n6"], axis=1),
             node("MeanVarianceNormalization", ["x"], ["n7"])]
    outs = [o for n in nodes for o in n.output if o != "a1"]
    graph = helper.make_graph(
        nodes, "reduce", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 5, 7])],
        [helper.make_tensor_value_info(o, TensorProto.INT64 if o in ("a2", "t2")
                                       else TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def _movement_model():
    """Data movement, index and resize kernels on float, int64 and bool tensors."""
    node = helper.make_node
    r = np.random.default_rng(0)

    def i64(*v):
        return np.asarray(v, np.int64)
    arrays = {"emb": r.standard_normal((20, 12)).astype(np.float32),
              "st": i64(3, -1), "en": i64(-100, 0), "ax": i64(2, 3), "sp": i64(-1, -2),
              "rep": i64(1, 2, 1, 2), "pads": i64(0, 0, 1, 2, 0, 0, 2, 1), "k": i64(1),
              "v": np.array(0.5, np.float32), "sc": np.array([1, 1, 1.5, 2], np.float32),
              "gi": np.zeros((1, 4, 2, 5), np.int64), "ni": i64([0, 1], [0, 3]),
              "nu": r.standard_normal((2, 6, 5)).astype(np.float32), "d": i64(7),
              "ov": np.array([0, 1], np.int64)}
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in arrays.items()]
    nodes = [
        node("Gather", ["emb", "ids"], ["e"]),
        node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        node("Tile", ["x", "rep"], ["t"]),
        node("Pad", ["x", "pads"], ["p"], mode="reflect"),
        node("Pad", ["x", "pads", "v"], ["pc"]),
        node("DepthToSpace", ["x"], ["d2"], blocksize=2),
        node("Split", ["x"], ["sa", "sb"], axis=1, num_outputs=2),
        node("Trilu", ["x", "k"], ["tr"]),
        node("Resize", ["x", "", "sc"], ["rl"], mode="linear"),
        node("Resize", ["x", "", "sc"], ["rc"], mode="cubic"),
        node("Resize", ["x", "", "sc"], ["rn"]),
        node("GatherElements", ["x", "gi"], ["ge"], axis=2),
        node("GatherND", ["x", "ni"], ["gn"]),
        node("ScatterND", ["x", "ni", "nu"], ["sn"], reduction="add"),
        node("ScatterElements", ["x", "gi", "ge"], ["se"], axis=2, reduction="max"),
        node("OneHot", ["ids", "d", "ov"], ["oh"]),
        node("Transpose", ["oh"], ["oht"]),
        node("Concat", ["oht", "oht"], ["ohc"], axis=0),
    ]
    outs = ["e", "s", "t", "p", "pc", "d2", "sa", "sb", "tr", "rl", "rc", "rn", "ge", "gn",
            "sn", "se"]
    graph = helper.make_graph(
        nodes, "movement",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 5]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs] +
        [helper.make_tensor_value_info("ohc", TensorProto.INT64, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _extra_model() -> onnx.ModelProto:
    """LpPool (1-D, 2-D, 3-D; p = 1, 2, 3), Shrink, Det, SwiGLU, RotaryEmbedding."""
    node = helper.make_node
    r = np.random.default_rng(0)
    arrays = {"cos": r.standard_normal((9, 3)).astype(np.float32),
              "sin": r.standard_normal((9, 3)).astype(np.float32)}
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in arrays.items()]
    nodes = [
        node("LpPool", ["x"], ["l2"], kernel_shape=[3, 2], pads=[1, 0, 1, 1], p=2),
        node("LpPool", ["x"], ["l3"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, p=3),
        node("LpPool", ["v"], ["l1"], kernel_shape=[2, 2, 2], p=1),
        node("LpPool", ["s"], ["ls"], kernel_shape=[3], strides=[2], auto_pad="SAME_UPPER"),
        node("Shrink", ["l2"], ["sh"], bias=0.5, lambd=0.5),
        node("Det", ["x"], ["d"]),
        node("SwiGLU", ["x", "x"], ["sw"]),
        node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["rq"], interleaved=1,
             rotary_embedding_dim=6),
    ]
    outs = ["l3", "l1", "ls", "sh", "d", "sw", "rq"]
    graph = helper.make_graph(
        nodes, "extra",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 5]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 2, 3, 4, 5]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 2, 9]),
         helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 4, 8]),
         helper.make_tensor_value_info("pos", TensorProto.INT64, [1, 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=11)


def _grid_model() -> onnx.ModelProto:
    """GridSample: 2-D and 3-D, each mode and padding, run-time and constant grids."""
    node = helper.make_node
    gc = np.random.default_rng(0).uniform(-1.3, 1.3, (1, 3, 4, 2)).astype(np.float32)
    nodes = [
        node("GridSample", ["x", "g"], ["y1"], mode="linear", padding_mode="zeros"),
        node("GridSample", ["x", "gc"], ["y2"], mode="cubic", padding_mode="reflection",
             align_corners=1),
        node("GridSample", ["x", "g"], ["y3"], mode="nearest", padding_mode="border"),
        node("GridSample", ["v", "g3"], ["y4"], mode="linear", padding_mode="reflection"),
        node("GridSample", ["v", "g3"], ["y5"], mode="cubic", padding_mode="border"),
        node("GridSample", ["v", "g3"], ["y6"], mode="nearest", padding_mode="zeros"),
    ]
    graph = helper.make_graph(
        nodes, "grid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 3, 4, 2]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 2, 3, 4, 5]),
         helper.make_tensor_value_info("g3", TensorProto.FLOAT, [1, 2, 2, 3, 3])],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(1, 7)],
        [onnx.numpy_helper.from_array(gc, "gc")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


def _quant_model() -> onnx.ModelProto:
    """The quantized element-wise family (tests/ops/test_ops_quant_ew.py): Q/DQ per tensor and
    per axis, DynamicQuantizeLinear, uint8 MaxPool, and com.microsoft QLinear* ops; and the
    integer convolutions and matrix products (plain, depthwise, run-time zero points)."""
    node = helper.make_node

    def ms(op, ins, out, **kw):
        return node(op, ins, [out], domain="com.microsoft", **kw)

    f, u8 = np.float32, np.uint8
    inits = {"s": f(0.05), "z": u8(128), "s2": f(0.04), "z2": u8(120), "s3": f(0.02),
             "z3": u8(0), "sm": f(1 / 256), "cs": np.linspace(0.01, 0.08, 8).astype(f),
             "cz": np.arange(8).astype(u8)}
    r = np.random.default_rng(0)
    i8 = lambda *shape: r.integers(-127, 128, shape).astype(np.int8)   # noqa: E731
    inits.update(w=i8(6, 4, 3, 3), ws=np.linspace(0.01, 0.02, 6).astype(f),
                 wz=np.zeros(6, np.int8), b=r.integers(-500, 500, 6).astype(np.int32),
                 dw=i8(4, 1, 3, 3), wz0=np.int8(0), mb=i8(6, 5),
                 mu=r.integers(0, 256, (6, 3)).astype(u8),
                 cu=r.integers(0, 256, (2, 4, 3, 3)).astype(u8))
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             node("MaxPool", ["q"], ["m"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             ms("QLinearAdd", ["q", "s", "z", "m", "s", "z", "s2", "z2"], "a"),
             ms("QLinearSigmoid", ["a", "s2", "z2", "s3", "z3"], "sg"),
             ms("QLinearLeakyRelu", ["a", "s2", "z2", "s2", "z2"], "lr", alpha=0.1),
             ms("QLinearConcat", ["s2", "z2", "sg", "s3", "z3", "lr", "s2", "z2"], "c", axis=1),
             ms("QLinearAveragePool", ["c", "s2", "z2", "s2", "z2"], "ap", kernel_shape=[2, 2]),
             ms("QLinearGlobalAveragePool", ["c", "s2", "z2", "s3", "z3"], "gp"),
             ms("QLinearMul", ["gp", "s3", "z3", "gp", "s3", "z3", "s3", "z3"], "ml"),
             ms("QLinearSoftmax", ["ml", "s3", "z3", "sm", "z3"], "sx", axis=1, opset=13),
             node("DequantizeLinear", ["sx", "s3", "z3"], ["y1"]),
             node("DequantizeLinear", ["ap", "cs", "cz"], ["y2"], axis=1),
             node("DynamicQuantizeLinear", ["x"], ["y3", "y4", "y5"]),
             # the integer GEMM family: its RVV, AVX2 and portable cores and epilogues
             node("QLinearConv", ["q", "s", "z", "w", "ws", "wz", "s2", "z2", "b"], ["qc"],
                  pads=[1, 1, 1, 1]),
             node("QLinearConv", ["q", "s", "z", "dw", "s3", "wz0", "s2", "z2"], ["qd"],
                  group=4, pads=[1, 1, 1, 1], strides=[2, 2]),
             node("QLinearMatMul", ["q", "s", "z", "mb", "s3", "wz0", "s2", "z2"], ["qm"]),
             node("MatMulInteger", ["y3", "mu", "y5"], ["mi"]),
             node("ConvInteger", ["y3", "cu", "y5"], ["ci"])]
    outs = [("y1", TensorProto.FLOAT), ("y2", TensorProto.FLOAT), ("y3", TensorProto.UINT8),
            ("y4", TensorProto.FLOAT), ("y5", TensorProto.UINT8), ("qc", TensorProto.UINT8),
            ("qd", TensorProto.UINT8), ("qm", TensorProto.UINT8), ("mi", TensorProto.INT32),
            ("ci", TensorProto.INT32)]
    graph = helper.make_graph(
        nodes, "quant", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info(o, t, None) for o, t in outs],
        [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def _decoder_model(accuracy: int = 0):
    """A decoder with 4-bit weights, packed zero points, a K tail and float scales (zoo_llm);
    accuracy 4: the int8-activation kernels, bfloat16 scales, and the LM head tied to a 4-bit
    embedding (the gather from the head's layout)."""
    from rvvkit.zoo import llm as zoo_llm
    from rvvkit.llm.quantize import quantize_model
    if not accuracy:
        return zoo_llm.decoder(zoo_llm.DecoderConfig(hidden=80, heads=5, kv_heads=1, layers=1,
                                                     intermediate=72, bits=4, block=64,
                                                     zero_points=True))
    cfg = zoo_llm.DecoderConfig(hidden=80, heads=5, kv_heads=1, layers=1, intermediate=72,
                                bits=4, block=16, accuracy=4, tied=True, bf16_scales=True)
    return quantize_model(zoo_llm.decoder(cfg), 4, 16, embeddings=True)[0]


def _bf16_decoder_model():
    """4-bit weights with bfloat16 scales and int8 activations, untied (what `rvvkit quantize
    --accuracy 4` writes): under RVV every scale is widened in vector code, so the scalar
    bfloat16 helper stays unused and must not warn."""
    from rvvkit.zoo import llm as zoo_llm
    return zoo_llm.decoder(zoo_llm.DecoderConfig(hidden=80, heads=5, kv_heads=1, layers=1,
                                                 intermediate=72, bits=4, block=16, accuracy=4,
                                                 bf16_scales=True))


def _half_decoder_model():
    """A float16 decoder (onnxruntime-genai's fp16 precision): Casts at its I/O, 4-bit weights
    with float16 scales (stored in 16 bits), float32 state for its float16 caches."""
    from rvvkit.zoo import llm as zoo_llm
    return zoo_llm.decoder(zoo_llm.DecoderConfig(hidden=80, heads=5, kv_heads=1, layers=1,
                                                 intermediate=72, bits=4, block=16, half=True))


def _grown_decoder_model():
    """ONNX Attention with past/present (rvvkit.zoo.llm_onnx): the in-place cache writes."""
    from rvvkit.zoo import llm as zoo_llm, llm_onnx as zoo_llm_onnx
    return zoo_llm_onnx.decoder(zoo_llm.DecoderConfig(hidden=48, heads=3, kv_heads=1, layers=1,
                                                      intermediate=40))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    out = {}
    for name, model in (("mixed", _mixed_model()), ("shufflenet", light_model("shufflenet")),
                        ("sequence", _sequence_model()), ("math", _math_model()),
                        ("reduce", _reduce_model()), ("movement", _movement_model()),
                        ("extra", _extra_model()), ("grid", _grid_model()),
                        ("quant", _quant_model()), ("decoder", _decoder_model()),
                        ("decoder_acc4", _decoder_model(accuracy=4)),
                        ("decoder_bf16", _bf16_decoder_model()),
                        ("decoder_half", _half_decoder_model()),
                        ("decoder_grown", _grown_decoder_model())):
        path = d / f"{name}.c"
        seq = 24 if name.startswith("decoder") else None
        path.write_text(rvvkit.build(model, max_seq=seq).c_source)
        out[name] = path
    return out


@pytest.mark.parametrize("model", ["mixed", "shufflenet", "sequence", "math", "reduce",
                                   "movement", "extra", "grid", "quant", "decoder",
                                   "decoder_acc4", "decoder_bf16", "decoder_half",
                                   "decoder_grown"])
@pytest.mark.parametrize("compiler", sorted(COMPILERS))
def test_generated_source_is_warning_clean(sources, compiler, model, tmp_path):
    argv, exe = COMPILERS[compiler]
    if shutil.which(exe) is None:
        pytest.skip(f"{exe} not installed (scripts/setup.sh installs it)")
    cmd = argv + WARN + [str(sources[model]), "-o", str(tmp_path / "k.so"), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), \
        f"{' '.join(cmd)}\n{proc.stderr[:4000]}"


# ------------------------------------------------------------ a source a person can review

def residual_model() -> onnx.ModelProto:
    """Four kernels: Conv+Relu, Conv+Add(residual)+LeakyRelu, GlobalAveragePool, MatMul, with
    initializer names that need sanitising into C identifiers."""
    rng = np.random.default_rng(1)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for s, n in (((8, 3, 3, 3), "conv1.weight"), ((8,), "conv1.bias"),
                          ((8, 8, 3, 3), "conv2.weight"), ((8, 10), "fc/weight:0"))]
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], pads=[1] * 4,
                         name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "conv2.weight"], ["c2"], pads=[1] * 4, name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="add1"),
        helper.make_node("LeakyRelu", ["s"], ["l"], alpha=0.1, name="lrelu1"),
        helper.make_node("GlobalAveragePool", ["l"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "fc/weight:0"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _misindented(src: str):
    """Lines indented by other than a multiple of 4 spaces, except continuation lines (the
    previous line ends inside an expression) and block-comment lines."""
    bad, prev = [], ""
    for ln in src.splitlines():
        n = len(ln) - len(ln.lstrip(" "))
        if ln.strip() and n % 4 and not ln.lstrip().startswith("*") \
                and not re.search(r"[,(+?:|&=]\s*$", prev):
            bad.append(ln)
        prev = ln if ln.strip() else prev
    return bad


@pytest.fixture(scope="module")
def residual_artifact():
    return rvvkit.build(residual_model(), cuda=False)


def test_step_comments_and_meta_list_fused_nodes(residual_artifact):
    src, meta = residual_artifact.c_source, residual_artifact.meta
    assert "/* Conv conv1 + Relu relu1 */" in src
    assert "/* Conv conv2 + Add add1 + LeakyRelu lrelu1 */" in src
    step = next(s for s in meta["plan"] if s["node"] == "conv2")
    assert step["fused"] == [{"op": "Add", "name": "add1"}, {"op": "LeakyRelu", "name": "lrelu1"}]
    assert all("kernel" in s and "args" in s and "fused" in s for s in meta["plan"])


def test_weights_are_named_after_their_initializers(residual_artifact):
    src = residual_artifact.c_source
    for sym in ("W_conv1_weight_packed", "W_conv1_bias", "W_conv2_weight_packed",
                "W_fc_weight_0_packed"):
        assert re.search(rf"^static const size_t {sym} = \d+;", src, re.M), sym
        assert f"w + {sym}" in src
    assert not re.search(r"\bw \+ \d", src)      # no bare offsets into the weights
    names = [a["name"] for s in residual_artifact.meta["plan"] for a in s["args"]
             if a["kind"] == "weights"]
    assert "conv1.bias" in names


# A loop its bounds run once: `for (long n = 0; n < 1; ++n)`, also with a guard beside the bound
# (`!err && i < 1`, `seconds && i <= 0`); loops.loop writes such a body without the loop.
SINGLE_TRIP = re.compile(r"for \([^;]*= 0;[^;]*\b\w+ (< 1|<= 0)(?![\w.])[^;]*;")


def _one_step_model() -> onnx.ModelProto:
    """One step: a batch-1 matrix product (the CUDA unit's one-row GEMM form)."""
    fc = np.random.default_rng(2).standard_normal((8, 10)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "fc"], ["y"])], "one_step",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(fc, "fc")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("model", ["one_step", "residual", "quant"])
def test_no_single_trip_loops_in_c_or_cuda(model):
    """Neither dialect keeps a loop that runs once, the run entry's loop over a one-step plan
    included (one-step, four-step and quantized plans; the quantized one's CUDA GEMMs give a
    thread a single row)."""
    make = {"one_step": _one_step_model, "residual": residual_model, "quant": _quant_model}
    art = rvvkit.build(make[model]())
    assert (len(art.meta["plan"]) == 1) == (model == "one_step")
    for dialect, src in (("C", art.c_source), ("CUDA", art.cu_source)):
        found = [m.group(0) for m in SINGLE_TRIP.finditer(src)]
        assert not found, f"{dialect}: single-trip loops {found[:5]}"


def test_generated_loops_skip_single_trips():
    """loops.loop: one trip is the body with its index fixed; a guard stays as an if."""
    body = "acc[i] = 0.0f;"
    assert loop("i", 0, 3, body) == "for (int i = 0; i < 3; ++i) acc[i] = 0.0f;"
    assert loop("i", 0, 1, body, flat=True) == "const int i = 0;\nacc[i] = 0.0f;"
    assert loop("i", 0, 3, body, guard="!err") == \
        "for (int i = 0; !err && i < 3; ++i) acc[i] = 0.0f;"
    assert loop("i", 0, 1, body, guard="!err") == \
        "if (!err) {\n    const int i = 0;\n    acc[i] = 0.0f;\n}"
    assert not SINGLE_TRIP.search(loop("i", 0, 3, body, guard="!err"))
    assert SINGLE_TRIP.search("for (int i = 0; !err && i < 1; ++i)")
    assert SINGLE_TRIP.search("for (long n = 0; n < 1; ++n) {")


@pytest.mark.parametrize("model", ["residual", "mixed", "shufflenet", "quant"])
def test_generated_source_is_tidy(residual_artifact, sources, model):
    src = residual_artifact.c_source if model == "residual" else sources[model].read_text()
    assert not SINGLE_TRIP.search(src), "single-trip loop"
    assert not re.search(r"\d\.\d{10,}", src), "float literal with more digits than needed"
    assert "0.1f" in src or model != "residual"
    assert not _misindented(src), _misindented(src)[:5]
    # helpers are named for what they are; a hash is at most the last part of a name
    for name in set(re.findall(r"\brvk_\w+(?=\()", src)):
        parts = name.split("_")
        hashes = [i for i, p in enumerate(parts) if re.fullmatch(r"[0-9a-f]{8,}", p)]
        # (a word, digits allowed after its first letter: libm's expm1 is rvk_expm1f)
        assert re.fullmatch(r"[a-z][a-z0-9]{2,}", parts[1]) and \
            hashes in ([], [len(parts) - 1]), name


def test_fixed_vlen_keeps_one_micro_kernel_variant(residual_artifact):
    agnostic = residual_artifact.c_source
    fixed = rvvkit.build(residual_model(), cuda=False, vlen=256)
    assert fixed.meta["target_vlen"] == 256 and residual_artifact.meta["target_vlen"] is None
    shared = len(POOL.splitlines())      # the embedded thread pool is the same in both
    assert len(fixed.c_source.splitlines()) - shared < 0.8 * (len(agnostic.splitlines()) - shared)
    variants = set(re.findall(r"static inline void (rvk_gemm_micro_\w+_lmul\d)\(", fixed.c_source))
    micro = set(re.findall(r"static RVK_NOINLINE void (rvk_gemm_micro_\w+)\(", fixed.c_source))
    assert len(variants) == len(micro) >= 2
    assert "rvk_v <=" not in fixed.c_source and "rvk_v <=" in agnostic


@pytest.mark.skipif(shutil.which("qemu-riscv64") is None or shutil.which("clang-16") is None,
                    reason="needs qemu-riscv64 and clang-16 (scripts/setup.sh)")
@pytest.mark.parametrize("vlen", [128, 512])
def test_fixed_vlen_build_matches_onnxruntime_under_qemu(tmp_path, vlen):
    from conftest import rand, run_ort
    model = residual_model()
    feeds = {"x": rand(1, 3, 8, 8, seed=5)}
    path = tmp_path / "m.rvv"
    rvvkit.build(model, cuda=False, vlen=vlen).save(path)
    with rvvkit.load(path, on="qemu", vlen=vlen, compiler="clang-16") as sess:
        got = sess.run(feeds)
    np.testing.assert_allclose(got["y"], run_ort(model, feeds)["y"], rtol=1e-3, atol=1e-4)
