"""Graph rewrites: what each pass leaves in the graph, and (through one host run each where
weights change) that the numbers survive it."""
import numpy as np
import pytest
from onnx import helper

from conftest import assert_matches, bn_params, make_model, rand
from rvvkit.frontend.onnx import from_onnx
from rvvkit.ops.elementwise import CHANNEL_AFFINE
from rvvkit.passes import optimize
from rvvkit.passes.dce import remove_dead
from rvvkit.passes.simplify import remove_identities

node = helper.make_node


def ops(g):
    return [n.op for n in g.nodes]


def optimized(m, level=2):
    return optimize(from_onnx(m), level)


def conv_bn_model(act=None, bias=True):
    inits = {"w": rand(4, 3, 3, 3, seed=1), **bn_params(4)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand(4, seed=2)
        ins.append("b")
    nodes = [node("Conv", ins, ["c"], pads=[1, 1, 1, 1], name="conv"),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"],
                  ["n" if act else "y"], name="bn")]
    if act:
        nodes.append(node(act, ["n"], ["y"], name="act"))
    return make_model(nodes, [("x", (2, 3, 5, 5))], ["y"], inits)


# ---------------------------------------------------------------------------------------------
# BatchNormalization folding

@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_bn_folded_into_conv(bias):
    m = conv_bn_model(bias=bias)
    g = optimized(m)
    assert ops(g) == ["Conv"]
    conv = g.nodes[0]
    assert conv.outputs == ["y"]
    assert len(conv.inputs) == 3 and g.is_const(conv.inputs[2])  # BN's shift became a bias
    assert not any(n.op in ("BatchNormalization", CHANNEL_AFFINE) for n in g.nodes)
    assert conv.fused == [("BatchNormalization", "bn")]
    # the folded weights are the only ones left: BN's parameters are pruned
    assert not any(k in g.tensors for k in ("s", "bb", "mean", "var"))
    assert_matches(m, {"x": rand(2, 3, 5, 5)})


def test_bn_folding_math():
    m = conv_bn_model()
    g = optimized(m)
    conv = g.nodes[0]
    w, b = g.const(conv.inputs[1]), g.const(conv.inputs[2])
    p = bn_params(4)
    s = p["s"] / np.sqrt(p["var"].astype(np.float64) + 1e-5)
    np.testing.assert_allclose(w, rand(4, 3, 3, 3, seed=1) * s[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(b, (rand(4, seed=2) - p["mean"]) * s + p["bb"], rtol=1e-5,
                               atol=1e-6)


def test_bn_not_folded_at_opt_level_0():
    g = optimized(conv_bn_model(act="Relu"), level=0)
    assert ops(g) == ["Conv", CHANNEL_AFFINE, "Relu"]


def test_bn_folded_at_opt_level_1_without_fusion():
    g = optimized(conv_bn_model(act="Relu"), level=1)
    assert ops(g) == ["Conv", "Relu"]


def test_bn_not_folded_into_conv_with_two_readers():
    nodes = [node("Conv", ["x", "w"], ["c"]),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["y"]),
             node("Relu", ["c"], ["z"])]
    m = make_model(nodes, [("x", (1, 3, 5, 5))], ["y", "z"],
                   {"w": rand(4, 3, 3, 3, seed=1), **bn_params(4)})
    g = optimized(m)
    assert sorted(ops(g)) == ["Conv", "Relu", CHANNEL_AFFINE]
    assert_matches(m, {"x": rand(1, 3, 5, 5)})


def test_consecutive_affines_merge():
    nodes = [node("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["n"]),
             node("Mul", ["n", "k"], ["m"]), node("Add", ["m", "t"], ["y"])]
    m = make_model(nodes, [("x", (2, 4, 3, 3))], ["y"],
                   {**bn_params(4), "k": rand(4, 1, 1, seed=5), "t": np.float32(0.25)})
    g = optimized(m)
    assert ops(g) == [CHANNEL_AFFINE]
    assert g.nodes[0].fused == [("Mul", "mul_1"), ("Add", "add_2")]
    assert_matches(m, {"x": rand(2, 4, 3, 3)})


# ---------------------------------------------------------------------------------------------
# Activation and residual fusion

@pytest.mark.parametrize("act, kind", [("Relu", "relu"), ("Sigmoid", "sigmoid"),
                                       ("Tanh", "tanh"), ("LeakyRelu", "leaky_relu")])
def test_activation_fused_into_conv(act, kind):
    g = optimized(conv_bn_model(act=act))
    assert ops(g) == ["Conv"]
    assert g.nodes[0].act.kind == kind
    assert g.nodes[0].outputs == ["y"]
    assert g.nodes[0].fused == [("BatchNormalization", "bn"), (act, "act")]


def test_relu6_clip_fused_with_bounds():
    nodes = [node("Gemm", ["x", "w"], ["g"]), node("Clip", ["g", "lo", "hi"], ["y"])]
    m = make_model(nodes, [("x", (2, 3))], ["y"], {"w": rand(3, 4), "lo": np.float32(0),
                                                   "hi": np.float32(6)})
    g = optimized(m)
    assert ops(g) == ["Gemm"]
    act = g.nodes[0].act
    assert (act.kind, act.params) == ("clip", (0.0, 6.0))


def test_only_one_activation_fused_per_producer():
    nodes = [node("Add", ["a", "b"], ["s"]), node("Relu", ["s"], ["r"]),
             node("Sigmoid", ["r"], ["y"])]
    m = make_model(nodes, [("a", (2, 3)), ("b", (2, 3))], ["y"])
    g = optimized(m)
    assert ops(g) == ["Add", "Sigmoid"]
    assert g.nodes[0].act.kind == "relu"
    assert_matches(m, {"a": rand(2, 3, seed=1), "b": rand(2, 3, seed=2)})


def test_activation_not_fused_when_producer_output_is_read_elsewhere():
    nodes = [node("Add", ["a", "b"], ["s"]), node("Relu", ["s"], ["y"])]
    m = make_model(nodes, [("a", (2, 3)), ("b", (2, 3))], ["y", "s"])
    g = optimized(m)
    assert ops(g) == ["Add", "Relu"]
    assert g.nodes[0].act is None and g.nodes[0].fused == []


def test_activation_not_fused_into_matmul():
    """MatMul's lowering has no activation epilogue; the Relu must stay a step of its own."""
    nodes = [node("MatMul", ["x", "w"], ["g"]), node("Relu", ["g"], ["y"])]
    m = make_model(nodes, [("x", (3, 5))], ["y"], {"w": rand(5, 4)})
    assert ops(optimized(m)) == ["MatMul", "Relu"]


def residual_model(with_relu=True):
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             node("Relu", ["c1"], ["r1"], name="relu1"),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             node("Add", ["x", "c2"], ["s" if with_relu else "y"], name="add")]
    if with_relu:
        nodes.append(node("Relu", ["s"], ["y"], name="relu2"))
    inits = {"w1": rand(3, 3, 3, 3, seed=1), "b1": rand(3, seed=2),
             "w2": rand(3, 3, 3, 3, seed=3), "b2": rand(3, seed=4)}
    return make_model(nodes, [("x", (1, 3, 6, 6))], ["y"], inits)


def test_residual_fused():
    m = residual_model()
    g = optimized(m)
    assert ops(g) == ["Conv", "Conv"]
    first, second = g.nodes
    assert first.act.kind == "relu" and not first.residual
    assert first.fused == [("Relu", "relu1")]
    assert second.residual is True
    assert second.act.kind == "relu"
    assert second.fused == [("Add", "add"), ("Relu", "relu2")]
    assert second.inputs[0] == first.outputs[0] and second.inputs[3] == "x"
    assert second.outputs == ["y"]
    assert_matches(m, {"x": rand(1, 3, 6, 6)})


def test_residual_not_fused_at_opt_level_1():
    g = optimized(residual_model(), level=1)
    assert ops(g) == ["Conv", "Relu", "Conv", "Add", "Relu"]


def test_residual_not_fused_when_shapes_broadcast():
    nodes = [node("Conv", ["x", "w"], ["c"]), node("Add", ["c", "z"], ["y"])]
    m = make_model(nodes, [("x", (1, 3, 5, 5)), ("z", (1, 1, 3, 3))], ["y"],
                   {"w": rand(2, 3, 3, 3)})
    assert ops(optimized(m)) == ["Conv", "Add"]


# ---------------------------------------------------------------------------------------------
# Dead code and identities

def test_dead_code_removed():
    nodes = [node("Relu", ["x"], ["y"], name="live"),
             node("Conv", ["x", "w"], ["unused"], name="dead_conv"),
             node("Sigmoid", ["unused"], ["unused2"], name="dead_sigmoid")]
    m = make_model(nodes, [("x", (1, 3, 5, 5))], ["y"], {"w": rand(2, 3, 3, 3)})
    g = from_onnx(m)
    assert len(g.nodes) == 3
    assert remove_dead(g) == 2
    assert [n.name for n in g.nodes] == ["live"]
    assert "w" not in g.tensors and "unused" not in g.tensors  # pruned with their readers
    assert_matches(m, {"x": rand(1, 3, 5, 5)})


def test_dead_code_removed_by_optimize():
    nodes = [node("Relu", ["x"], ["y"]), node("Tanh", ["x"], ["t"])]
    m = make_model(nodes, [("x", (4,))], ["y"])
    assert ops(optimized(m, level=0)) == ["Relu"]


def test_identity_in_the_middle_removed():
    nodes = [node("Relu", ["x"], ["a"]), node("Identity", ["a"], ["b"]),
             node("Dropout", ["b"], ["c"]), node("Sigmoid", ["c"], ["y"])]
    m = make_model(nodes, [("x", (2, 3))], ["y"])
    g = from_onnx(m)
    remove_identities(g)
    assert ops(g) == ["Relu", "Sigmoid"]
    assert g.nodes[1].inputs == ["a"]
    assert g.outputs == ["y"]


def test_identity_to_graph_output_renames_producer():
    nodes = [node("Relu", ["x"], ["a"]), node("Identity", ["a"], ["y"])]
    m = make_model(nodes, [("x", (2, 3))], ["y"])
    g = from_onnx(m)
    remove_identities(g)
    assert ops(g) == ["Relu"]
    assert g.nodes[0].outputs == ["y"] and g.outputs == ["y"]
    assert_matches(m, {"x": rand(2, 3)})


def test_identity_of_graph_input_to_output_stays_a_copy():
    m = make_model([node("Identity", ["x"], ["y"])], [("x", (2, 3))], ["y"])
    g = from_onnx(m)
    remove_identities(g)
    assert ops(g) == ["Identity"]
    assert_matches(m, {"x": rand(2, 3)})


def test_identities_keep_every_graph_output():
    """a is an output and also feeds two identities that are outputs: three distinct buffers
    with the same values, under the graph's own output names and order."""
    nodes = [node("Relu", ["x"], ["a"]), node("Identity", ["a"], ["y1"]),
             node("Identity", ["a"], ["y2"]), node("Identity", ["y1"], ["y3"])]
    m = make_model(nodes, [("x", (2, 3))], ["y2", "a", "y3", "y1"])
    g = optimized(m)
    assert g.outputs == ["y2", "a", "y3", "y1"]
    produced = {o for n in g.nodes for o in n.outputs}
    assert set(g.outputs) <= produced
    ours = assert_matches(m, {"x": rand(2, 3)})
    assert list(ours) == ["y2", "a", "y3", "y1"]


def test_constant_folding_leaves_no_foldable_nodes():
    nodes = [node("Mul", ["k1", "k2"], ["k"]), node("Unsqueeze", ["k", "ax"], ["ku"]),
             node("Add", ["x", "ku"], ["y"])]
    m = make_model(nodes, [("x", (2, 3))], ["y"],
                   {"k1": rand(3, seed=1), "k2": rand(3, seed=2),
                    "ax": np.asarray([0], np.int64)})
    g = from_onnx(m)
    assert ops(g) == ["Add"]  # folded while parsing
    assert g.is_const(g.nodes[0].inputs[1])
    assert_matches(m, {"x": rand(2, 3)})


def test_gemm_transposes_resolved_at_build_time():
    nodes = [node("Gemm", ["a", "w", "c"], ["y"], transA=1, transB=1, beta=0.5)]
    m = make_model(nodes, [("a", (5, 3))], ["y"], {"w": rand(4, 5, seed=1),
                                                   "c": rand(4, seed=2)})
    g = optimized(m)
    assert ops(g) == ["Transpose", "Gemm"]  # dynamic A: a transpose step; constant B: folded
    gemm = g.nodes[1]
    assert gemm.attrs["transA"] == 0 and gemm.attrs["transB"] == 0
    assert gemm.attrs["beta"] == 1.0  # constant C pre-scaled
    assert g.t(gemm.inputs[1]).shape == (5, 4)
    assert_matches(m, {"a": rand(5, 3)})
