"""A bias Add after a MatMul by a constant (passes/fuse.py fuse_matmul_bias) becomes one Gemm
over the rows of x, the bias and the Add's activation in its epilogue; anything else (a bias
that is not one value per column, a product read elsewhere, a graph output needing a copy) is
left as exported. Outputs match onnxruntime on every executor."""
import numpy as np
import pytest
from onnx import helper

from conftest import assert_matches, make_model, rand
from rvvkit.frontend.onnx import from_onnx
from rvvkit.passes import optimize

node = helper.make_node
K, N = 700, 20   # K over one k-block (KC_MAX 640): a single-k-block product is left alone


def projection(x_shape, bias_shape=(N,), act=None, extra_use=False, y_is_output=False, k=K):
    ini = {"w": rand(k, N, seed=1, scale=0.05), "b": rand(*bias_shape, seed=2)}
    nodes = [node("MatMul", ["x", "w"], ["p"]), node("Add", ["p", "b"], ["s"])]
    last = "s"
    if act:
        nodes.append(node(act, ["s"], ["a"]))
        last = "a"
    outs = [last]
    if not y_is_output:
        nodes.append(node("Mul", [last, last], ["y"]))   # the projection's output stays inside
        outs = ["y"]
    if extra_use:
        nodes.append(node("Abs", ["p"], ["q"]))
        outs.append("q")
    return make_model(nodes, [("x", x_shape)], outs, ini, opset=17)


def gemms(model):
    g = optimize(from_onnx(model))
    return [n for n in g.nodes if n.op == "Gemm"], [n.op for n in g.nodes]


@pytest.mark.parametrize("x_shape", [(7, K), (2, 7, K), (1, 3, 5, K)])
def test_bias_moves_into_one_gemm(x_shape):
    found, ops = gemms(projection(x_shape, bias_shape=(1, N)))
    assert len(found) == 1 and "Add" not in ops and "MatMul" not in ops
    gemm = found[0]
    # (on [M, N], to_affine had made the Add a ChannelAffine first)
    assert len(gemm.inputs) == 3 and "add_1" in [name for _, name in gemm.fused]
    assert ops.count("Reshape") == (2 if len(x_shape) > 2 else 0)


def test_k_block_bound_is_the_gemms():
    from rvvkit.codegen.kernels.gemm import tiling
    from rvvkit.passes import fuse
    assert fuse.KC_MAX == tiling.KC_MAX


def test_activation_comes_along():
    found, ops = gemms(projection((2, 7, K), act="Relu"))
    assert found and found[0].act is not None and "Relu" not in ops


@pytest.mark.parametrize("kw", [{"bias_shape": (7, N)}, {"extra_use": True},
                                {"y_is_output": True}, {"k": 64}])
def test_left_as_exported(kw):
    found, ops = gemms(projection((2, 7, kw.get("k", K)), **kw))
    assert not found and "Add" in ops


def test_two_d_output_is_fused_in_place():
    found, ops = gemms(projection((7, K), y_is_output=True))
    assert len(found) == 1 and ops == ["Gemm"]


@pytest.mark.parametrize("kw", [{"x_shape": (2, 7, K), "act": "Relu"},
                                {"x_shape": (7, K), "bias_shape": (1, 1, N)},
                                {"x_shape": (2, 7, K), "y_is_output": True}])
def test_matches_onnxruntime(kw, executor):
    m = projection(**kw)
    feeds = {"x": rand(*kw["x_shape"], seed=3)}
    assert_matches(m, feeds, on=executor)
    assert np.isfinite(feeds["x"]).all()
