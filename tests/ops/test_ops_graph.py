"""Operator cases over whole graphs: build-time constant folding, fusion
patterns, plumbing.

Each case is a tiny model, built once and run on every executor of the session (the `executor`
argument: host, QEMU at several VLENs, the CUDA emulator; tests/executors.py), and compared
with onnxruntime (single-threaded). Shapes are deliberately awkward: primes, 1x1 spatial,
non-square windows, batch 2, padding on one side only."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import assert_matches, bn_params, make_model, rand
from ops_support import conv_inits, fused, plan_ops

node = helper.make_node


# Build-time constant folding: shape arithmetic and in-graph constants leave no steps behind

def test_reshape_shape_from_shape_gather_unsqueeze_concat(executor):
    """The exporter idiom x.view(x.size(0), -1): folded to a constant shape at build time."""
    nodes = [node("Relu", ["x"], ["r"]),
             node("Shape", ["r"], ["s"]),
             node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Unsqueeze", ["n", "axes0"], ["n1"]),
             node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             node("Reshape", ["r", "shape"], ["f"]),
             node("Relu", ["f"], ["y"])]
    inits = {"zero": np.asarray(0, np.int64), "axes0": np.asarray([0], np.int64),
             "minus1": np.asarray([-1], np.int64)}
    m = make_model(nodes, [("x", (2, 3, 5, 7))], ["y"], inits)
    art = rvvkit.build(m)
    assert art.meta["outputs"][0]["shape"] == [2, 105]
    assert set(plan_ops(art)) == {"Relu"}
    assert_matches(m, {"x": rand(2, 3, 5, 7)}, artifact=art, on=executor)


def test_shape_of_graph_input_opset15_start_end(executor):
    """Shape with start/end (opset 15) of a graph input, driving a Reshape."""
    nodes = [node("Shape", ["x"], ["s"], start=1, end=-1),
             node("Concat", ["one", "s", "minus1"], ["shape"], axis=0),
             node("Reshape", ["x", "shape"], ["r"]),
             node("Relu", ["r"], ["y"])]
    inits = {"one": np.asarray([1], np.int64), "minus1": np.asarray([-1], np.int64)}
    m = make_model(nodes, [("x", (2, 3, 5, 7))], ["y"], inits, opset=15)
    art = rvvkit.build(m)
    assert art.meta["outputs"][0]["shape"] == [1, 3, 5, 14]
    assert_matches(m, {"x": rand(2, 3, 5, 7)}, artifact=art, on=executor)


def test_constant_of_shape_and_constant_nodes(executor):
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [3, 4])
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [1.5])
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [4], [1.0, -2.0, 0.5, 3.0])
    nodes = [node("Constant", [], ["shape_c"], value=shape),
             node("ConstantOfShape", ["shape_c"], ["ones"], value=fill),
             node("Constant", [], ["sc"], value=scale),
             node("Constant", [], ["half"], value_float=0.5),
             node("Mul", ["ones", "sc"], ["k"]),
             node("Add", ["x", "k"], ["a"]),
             node("Mul", ["a", "half"], ["y"])]
    m = make_model(nodes, [("x", (2, 3, 4))], ["y"])
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Add", "rvvkit.ChannelAffine"]  # the Constant* nodes folded away
    assert_matches(m, {"x": rand(2, 3, 4)}, artifact=art, on=executor)


def test_gather_of_constant_weights(executor):
    nodes = [node("Gather", ["table", "idx"], ["rows"], axis=0),
             node("MatMul", ["x", "rows"], ["y"])]
    inits = {"table": rand(6, 5, seed=3), "idx": np.asarray([4, 0, 2], np.int64)}
    m = make_model(nodes, [("x", (2, 3))], ["y"], inits)
    assert_matches(m, {"x": rand(2, 3)}, on=executor)


def test_constant_graph_output_is_materialised(executor):
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [2.5])
    nodes = [node("ConstantOfShape", ["shape"], ["k"], value=fill),
             node("Relu", ["x"], ["y"])]
    m = make_model(nodes, [("x", (3,))], ["y", "k"], {"shape": np.asarray([2, 3], np.int64)})
    ours = assert_matches(m, {"x": rand(3)}, on=executor)
    np.testing.assert_array_equal(ours["k"], np.full((2, 3), 2.5, np.float32))


# ---------------------------------------------------------------------------------------------
# Fusion patterns: fewer steps, same numbers

@pytest.mark.parametrize("act_nodes", [
    lambda: [node("Relu", ["c"], ["y"])],
    lambda: [node("LeakyRelu", ["c"], ["y"], alpha=0.1)],
    lambda: [node("Sigmoid", ["c"], ["y"])],
    lambda: [node("Tanh", ["c"], ["y"])],
    lambda: [node("Clip", ["c", "zero", "six"], ["y"])],
], ids=["relu", "leakyrelu", "sigmoid", "tanh", "relu6_clip"])
def test_conv_activation_fused(act_nodes, executor):
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])] + act_nodes()
    inits = dict(conv_inits(), zero=np.float32(0), six=np.float32(6))
    m = make_model(nodes, [("x", (1, 3, 7, 7))], ["y"], inits)
    fused(executor, m, {"x": rand(1, 3, 7, 7, scale=3)}, ["Conv"])


def test_conv_bn_relu_fused(executor):
    nodes = [node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[0, 0, 1, 1]),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["n"]),
             node("Relu", ["n"], ["y"])]
    m = make_model(nodes, [("x", (2, 3, 13, 13))], ["y"], {**conv_inits(), **bn_params(4)})
    fused(executor, m, {"x": rand(2, 3, 13, 13)}, ["Conv"])


def test_conv_residual_add_relu_fused(executor):
    """Two convs and a residual Add of the block input: the Add and Relu vanish."""
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Add", ["c2", "x"], ["s"]),
             node("Relu", ["s"], ["y"])]
    inits = {"w1": rand(4, 4, 3, 3, seed=1), "b1": rand(4, seed=2),
             "w2": rand(4, 4, 3, 3, seed=3), "b2": rand(4, seed=4)}
    m = make_model(nodes, [("x", (1, 4, 7, 7))], ["y"], inits)
    fused(executor, m, {"x": rand(1, 4, 7, 7)}, ["Conv", "Conv"])


def test_conv_residual_from_two_convs_with_bn(executor):
    """Projection shortcut: conv+BN on both branches, Add of the two, Relu."""
    nodes = [node("Conv", ["x", "w1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c1", "s", "bb", "mean", "var"], ["n1"]),
             node("Conv", ["x", "w2"], ["c2"], strides=[2, 2]),
             node("Add", ["n1", "c2"], ["s2"]),
             node("Relu", ["s2"], ["y"])]
    inits = {"w1": rand(4, 3, 3, 3, seed=1), "w2": rand(4, 3, 1, 1, seed=2), **bn_params(4)}
    m = make_model(nodes, [("x", (1, 3, 9, 9))], ["y"], inits)
    fused(executor, m, {"x": rand(1, 3, 9, 9)}, ["Conv", "Conv"])


def test_conv_residual_constant_operand(executor):
    nodes = [node("Conv", ["x", "w"], ["c"]), node("Add", ["k", "c"], ["y"])]
    m = make_model(nodes, [("x", (1, 3, 5, 5))], ["y"],
                   {"w": rand(2, 3, 3, 3, seed=1), "k": rand(1, 2, 3, 3, seed=2)})
    fused(executor, m, {"x": rand(1, 3, 5, 5)}, ["Conv"])


def test_gemm_relu_fused(executor):
    nodes = [node("Gemm", ["x", "w", "b"], ["g"], transB=1), node("Relu", ["g"], ["y"])]
    m = make_model(nodes, [("x", (2, 13))], ["y"], {"w": rand(7, 13, seed=1), "b": rand(7)})
    fused(executor, m, {"x": rand(2, 13)}, ["Gemm"])


def test_matmul_then_relu(executor):
    nodes = [node("MatMul", ["x", "w"], ["g"]), node("Relu", ["g"], ["y"])]
    m = make_model(nodes, [("x", (3, 5))], ["y"], {"w": rand(5, 4, seed=1)})
    assert_matches(m, {"x": rand(3, 5)}, on=executor)


def test_add_activation_fused(executor):
    nodes = [node("Add", ["a", "b"], ["s"]), node("LeakyRelu", ["s"], ["y"], alpha=0.3)]
    m = make_model(nodes, [("a", (2, 3, 4)), ("b", (3, 1))], ["y"])
    fused(executor, m, {"a": rand(2, 3, 4), "b": rand(3, 1, seed=1)}, ["Add"])


def test_bn_relu_without_conv_fused(executor):
    nodes = [node("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["n"]),
             node("Relu", ["n"], ["y"])]
    m = make_model(nodes, [("x", (2, 4, 3, 5))], ["y"], bn_params(4))
    fused(executor, m, {"x": rand(2, 4, 3, 5)}, ["rvvkit.ChannelAffine"])


def test_activation_not_fused_into_multi_use_output(executor):
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["y"]), node("Sigmoid", ["c"], ["z"])]
    m = make_model(nodes, [("x", (1, 3, 5, 5))], ["y", "z", "c"], conv_inits())
    fused(executor, m, {"x": rand(1, 3, 5, 5)}, ["Conv", "Relu", "Sigmoid"])


# ---------------------------------------------------------------------------------------------
# Whole-graph plumbing

def test_identity_input_to_output_and_multiple_outputs(executor):
    nodes = [node("Identity", ["x"], ["y"]), node("Relu", ["x"], ["r"]),
             node("Identity", ["r"], ["z"]), node("Dropout", ["r"], ["d"])]
    m = make_model(nodes, [("x", (2, 5))], ["y", "z", "d"])
    assert_matches(m, {"x": rand(2, 5)}, on=executor)


def test_small_cnn_end_to_end(executor):
    """conv-bn-relu, maxpool, depthwise, global pool, flatten, gemm, softmax."""
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c1", "s", "bb", "mean", "var"], ["n1"]),
             node("Clip", ["n1", "zero", "six"], ["r1"]),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1, 1, 1, 1]),
             node("Conv", ["p1", "wd"], ["c2"], group=4, pads=[1, 1, 1, 1]),
             node("Relu", ["c2"], ["r2"]),
             node("GlobalAveragePool", ["r2"], ["g"]),
             node("Flatten", ["g"], ["f"]),
             node("Gemm", ["f", "wf", "bf"], ["logits"], transB=1),
             node("Softmax", ["logits"], ["y"])]
    inits = {"w1": rand(4, 3, 3, 3, seed=1), "b1": rand(4, seed=2), **bn_params(4),
             "zero": np.float32(0), "six": np.float32(6), "wd": rand(4, 1, 3, 3, seed=5),
             "wf": rand(5, 4, seed=6), "bf": rand(5, seed=7)}
    m = make_model(nodes, [("x", (2, 3, 17, 13))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Conv", "MaxPool", "Conv", "GlobalAveragePool", "Gemm", "Softmax"]
    assert_matches(m, {"x": rand(2, 3, 17, 13)}, artifact=art, on=executor)


EDGE_GRAPHS = {
    "same_tensor_both_operands": lambda: (
        [node("Relu", ["x"], ["r"]), node("Mul", ["r", "r"], ["y"])], (2, 3), {}),
    "concat_same_tensor_twice": lambda: (
        [node("Relu", ["x"], ["r"]), node("Concat", ["r", "r"], ["y"], axis=1)], (1, 3), {}),
    "sum_same_input_three_times": lambda: (
        [node("Sum", ["x", "x", "x"], ["y"])], (2, 3), {}),
    "conv_output_added_to_itself": lambda: (
        [node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "c"], ["y"])], (1, 2, 4, 4),
        {"w": rand(2, 2, 1, 1, seed=1)}),
    "gemm_input_as_a_and_c": lambda: (
        [node("Gemm", ["x", "w", "x"], ["y"])], (3, 3), {"w": rand(3, 3, seed=1)}),
    "softmax_large_magnitudes": lambda: (
        [node("Softmax", ["x"], ["y"])], (2, 5), {}),
}


@pytest.mark.parametrize("name", list(EDGE_GRAPHS))
def test_edge_graphs(name, executor):
    nodes, shape, inits = EDGE_GRAPHS[name]()
    m = make_model(nodes, [("x", shape)], ["y"], inits)
    assert_matches(m, {"x": rand(*shape, scale=300 if "large" in name else 1)}, on=executor)
