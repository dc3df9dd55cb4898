"""Pattern fusion (rvvkit/passes/patterns.py): the decomposed forms exporters write become one
node each, one plan step each, and fold into the producing Conv/Gemm's epilogue; a form with
an intermediate read elsewhere, or other constants, is left alone."""
import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model
from pattern_models import ACTIVATION_PATTERNS, layernorm, rmsnorm, silu
from rvvkit.frontend.onnx import from_onnx
from rvvkit.ops import REGISTRY
from rvvkit.passes import optimize

node = helper.make_node
SHAPE = (2, 5, 7)


def needs(*ops):
    missing = [op for op in ops if op not in REGISTRY]
    if missing:
        pytest.skip(f"ops not in the table yet: {missing}")


def plan_ops(m):
    return [s["op"] for s in rvvkit.build(m).meta["plan"]]


def model(builder, shape=SHAPE, opset=13, outputs=("y",)):
    nodes, inits = builder("x", "y")
    return make_model(nodes, [("x", shape)], list(outputs), inits, opset=opset)


@pytest.mark.parametrize("pid", sorted(ACTIVATION_PATTERNS))
def test_activation_pattern_is_one_step(pid):
    builder, op, ops = ACTIVATION_PATTERNS[pid]
    needs(*ops)
    m = model(builder)
    g = optimize(from_onnx(m))
    assert [n.op for n in g.nodes] == [op]
    fused = g.nodes[0].fused
    assert len(fused) == len(m.graph.node) - 1   # every other node, named for step comments
    assert {name for _, name in fused} | {g.nodes[0].name} == {n.name for n in m.graph.node}
    assert plan_ops(m) == [op]


def test_gelu_attributes():
    needs("Erf")
    g = optimize(from_onnx(model(ACTIVATION_PATTERNS["gelu_torch"][0])))
    assert g.nodes[0].attrs["approximate"] == "none"
    g = optimize(from_onnx(model(ACTIVATION_PATTERNS["gelu_tanh_torch"][0])))
    assert g.nodes[0].attrs["approximate"] == "tanh"


@pytest.mark.parametrize("pid", ["silu", "hardswish_clip_div", "gelu_tanh_torch"])
def test_pattern_folds_into_conv_epilogue(pid):
    builder, op, _ = ACTIVATION_PATTERNS[pid]
    nodes, inits = builder("c", "y")
    inits.update(w=np.ones((4, 3, 3, 3), np.float32))
    m = make_model([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv")] + nodes,
                   [("x", (1, 3, 6, 5))], ["y"], inits)
    g = optimize(from_onnx(m))
    assert [n.op for n in g.nodes] == ["Conv"]
    kind = {"rvvkit.Silu": "silu", "HardSwish": "hard_swish"}.get(op, "gelu_tanh")
    assert g.nodes[0].act.kind == kind
    assert g.nodes[0].fused[0] == (op, m.graph.node[-1].name)
    assert plan_ops(m) == ["Conv"]


def test_not_at_opt_level_0():
    g = optimize(from_onnx(model(silu)), level=0)
    assert [n.op for n in g.nodes] == ["Sigmoid", "Mul"]


def test_intermediate_read_elsewhere_is_left_alone():
    # the sigmoid is a graph output too: it must stay
    g = optimize(from_onnx(model(silu, outputs=("y", "silu_s"))))
    assert sorted(n.op for n in g.nodes) == ["Mul", "Sigmoid"]
    # the HardSwish's Clip feeds another node
    nodes, inits = ACTIVATION_PATTERNS["hardswish_clip_div"][0]("x", "y")
    nodes.append(node("Relu", ["hsw_c"], ["r"]))
    g = optimize(from_onnx(make_model(nodes, [("x", SHAPE)], ["y", "r"], inits)))
    assert "HardSwish" not in [n.op for n in g.nodes]


def test_other_constants_are_left_alone():
    nodes, inits = ACTIVATION_PATTERNS["gelu_tanh_torch"][0]("x", "y")
    inits["gelu_half"] = np.float32(0.4)
    g = optimize(from_onnx(make_model(nodes, [("x", SHAPE)], ["y"], inits)))
    assert "Gelu" not in [n.op for n in g.nodes]
    # keras' hard sigmoid (alpha 0.2) times x is no HardSwish
    m = make_model([node("HardSigmoid", ["x"], ["h"]), node("Mul", ["x", "h"], ["y"])],
                   [("x", SHAPE)], ["y"])
    g = optimize(from_onnx(m))
    assert [n.op for n in g.nodes] == ["HardSigmoid", "Mul"]
    # x * sigmoid(z) is no SiLU
    m = make_model([node("Sigmoid", ["z"], ["s"]), node("Mul", ["x", "s"], ["y"])],
                   [("x", SHAPE), ("z", SHAPE)], ["y"])
    assert [n.op for n in optimize(from_onnx(m)).nodes] == ["Sigmoid", "Mul"]


def test_broadcasting_product_is_left_alone():
    # x * sigmoid(x) * k with a per-element k: the product is not an activation of x
    nodes, inits = silu("x", "m")
    nodes.append(node("Mul", ["m", "k"], ["y"]))
    m = make_model(nodes, [("x", (1, 7)), ("k", (3, 7))], ["y"], inits)
    ops = [n.op for n in optimize(from_onnx(m)).nodes]
    assert ops == ["rvvkit.Silu", "Mul"]


# ---------------------------------------------------------------------------------------------
# LayerNorm

LN_CASES = {
    # id: (kwargs, x shape)
    "pow_affine": (dict(), (2, 3, 16)),
    "mul_square": (dict(square="Mul"), (3, 8)),
    "no_affine": (dict(affine=False), (2, 5, 12)),
    "opset18_axes_input": (dict(opset=18), (1, 4, 10)),
}


@pytest.mark.parametrize("cid", sorted(LN_CASES))
def test_layernorm_becomes_one_node(cid):
    kw, shape = LN_CASES[cid]
    needs("Pow", "Sqrt", "LayerNormalization")
    nodes, inits = layernorm("x", "y", width=shape[-1], **kw)
    m = make_model(nodes, [("x", shape)], ["y"], inits, opset=kw.get("opset", 13))
    g = optimize(from_onnx(m))
    assert [n.op for n in g.nodes] == ["LayerNormalization"]
    ln = g.nodes[0]
    assert ln.attrs["axis"] in (-1, len(shape) - 1)
    assert ln.attrs["epsilon"] == pytest.approx(1e-5)
    assert ln.inputs[0] == "x" and len(ln.fused) == len(nodes) - 1
    scale, bias = g.const(ln.inputs[1]), g.const(ln.inputs[2])
    if kw.get("affine", True):
        np.testing.assert_array_equal(scale, inits["ln_weight"])
        np.testing.assert_array_equal(bias, inits["ln_bias"])
    else:
        assert (scale == 1).all() and (bias == 0).all() and scale.shape == (shape[-1],)
    assert plan_ops(m) == ["LayerNormalization"]


def test_layernorm_over_other_axes_is_left_alone():
    needs("Pow", "Sqrt", "LayerNormalization")
    nodes, inits = layernorm("x", "y", width=5, affine=False)
    for n in nodes:
        for a in n.attribute:
            if a.name == "axes":
                a.ints[:] = [1]
    m = make_model(nodes, [("x", (2, 5, 3))], ["y"], inits)
    assert "LayerNormalization" not in [n.op for n in optimize(from_onnx(m)).nodes]


RMS_CASES = {
    "reciprocal_weight": dict(),
    "div_no_weight": dict(inverse="Div", weight=False),
    "one_over_weight": dict(inverse="one_over"),
}


@pytest.mark.parametrize("cid", sorted(RMS_CASES))
def test_rmsnorm_becomes_one_node(cid):
    needs("Pow", "Sqrt", "Reciprocal", "RMSNormalization")
    kw = RMS_CASES[cid]
    nodes, inits = rmsnorm("x", "y", width=16, **kw)
    m = make_model(nodes, [("x", (2, 3, 16))], ["y"], inits)
    g = optimize(from_onnx(m))
    assert [n.op for n in g.nodes] == ["RMSNormalization"]
    rms = g.nodes[0]
    assert rms.inputs[0] == "x" and len(rms.fused) == len(nodes) - 1
    assert rms.attrs["epsilon"] == pytest.approx(1e-6)
    want = inits["rms_weight"] if kw.get("weight", True) else np.ones(16, np.float32)
    np.testing.assert_array_equal(g.const(rms.inputs[1]), want)
    assert plan_ops(m) == ["RMSNormalization"]


def test_layernorm_is_not_taken_for_an_rmsnorm():
    """LayerNorm's own Div(d, Sqrt(mean(d^2) + eps)) is an RMSNorm of d: the whole LayerNorm
    must win."""
    needs("Pow", "Sqrt", "LayerNormalization")
    nodes, inits = layernorm("x", "y", width=8, affine=False)
    g = optimize(from_onnx(make_model(nodes, [("x", (3, 8))], ["y"], inits)))
    assert [n.op for n in g.nodes] == ["LayerNormalization"]
