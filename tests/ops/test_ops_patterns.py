"""Operator cases: HardSigmoid, HardSwish, Gelu and Swish as ops, and the decomposed SiLU /
GELU / HardSwish / LayerNorm / RMSNorm forms that passes/patterns.py fuses, on every sampled
executor against onnxruntime (which runs the decomposed graph as written). Shapes are awkward
on purpose: odd lengths so vector strips end part-way, and values wide enough to reach every
branch (HardSwish's clamps, GELU's tails)."""
import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import assert_matches, make_model, rand
from ops_support import check_single, fused
from pattern_models import ACTIVATION_PATTERNS, layernorm, rmsnorm
from rvvkit.ops import REGISTRY

node = helper.make_node


def needs(*ops):
    missing = [op for op in ops if op not in REGISTRY]
    if missing:
        pytest.skip(f"ops not in the table yet: {missing}")


ACT_OPS = [
    # id, op, attrs, opset
    ("hardsigmoid_default", "HardSigmoid", {}, 13),
    ("hardsigmoid_alpha_beta", "HardSigmoid", dict(alpha=0.35, beta=0.4), 6),
    ("hardswish", "HardSwish", {}, 14),
    ("gelu", "Gelu", {}, 20),
    ("gelu_tanh", "Gelu", dict(approximate="tanh"), 20),
    ("swish_alpha", "Swish", dict(alpha=0.6), 24),
]


@pytest.mark.parametrize("op, attrs, opset", [c[1:] for c in ACT_OPS], ids=[c[0] for c in ACT_OPS])
def test_activation_op(op, attrs, opset, op_executor):
    check_single(op_executor, op, (2, 3, 5, 7), attrs, opset=opset, x=rand(2, 3, 5, 7, scale=4))


# one numeric case per op a pattern becomes (tests/unit/passes/test_patterns.py checks every form
# fuses; what runs then is the same kernel)
@pytest.mark.parametrize("pid", ["silu", "quick_gelu", "gelu_hf", "gelu_tanh_torch",
                                 "hardswish_clip_mul_sixth"])
def test_activation_pattern(pid, op_executor):
    builder, _, ops = ACTIVATION_PATTERNS[pid]
    needs(*ops)
    nodes, inits = builder("x", "y")
    m = make_model(nodes, [("x", (3, 37))], ["y"], inits)
    assert_matches(m, {"x": rand(3, 37, scale=4)}, on=op_executor)


@pytest.mark.parametrize("pid", ["silu", "hardswish_clip_div", "gelu_tanh_hf"])
def test_pattern_in_conv_epilogue(pid, op_executor):
    builder, _, ops = ACTIVATION_PATTERNS[pid]
    needs(*ops)
    nodes, inits = builder("c", "y")
    inits.update(w=rand(5, 3, 3, 3, seed=1), b=rand(5, seed=2))
    m = make_model([node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])] + nodes,
                   [("x", (1, 3, 7, 9))], ["y"], inits)
    fused(op_executor, m, {"x": rand(1, 3, 7, 9, scale=2)}, ["Conv"])


def test_gelu_in_gemm_epilogue(op_executor):
    needs("Erf")
    nodes, inits = ACTIVATION_PATTERNS["gelu_torch"][0]("h", "y")
    inits.update(w=rand(19, 11, seed=3), b=rand(11, seed=4))
    m = make_model([node("Gemm", ["x", "w", "b"], ["h"])] + nodes, [("x", (3, 19))], ["y"],
                   inits)
    fused(op_executor, m, {"x": rand(3, 19)}, ["Gemm"])


@pytest.mark.parametrize("kw, shape", [
    (dict(), (2, 3, 24)),
    (dict(square="Mul", affine=False, eps=1e-6), (5, 17)),
], ids=["pow_affine", "mul_square_plain"])
def test_layernorm_pattern(kw, shape, op_executor):
    needs("Pow", "Sqrt", "LayerNormalization")
    nodes, inits = layernorm("x", "y", width=shape[-1], **kw)
    m = make_model(nodes, [("x", shape)], ["y"], inits)
    x = rand(*shape, scale=3) + np.float32(1.5)   # a mean away from zero
    fused(op_executor, m, {"x": x}, ["LayerNormalization"])


def test_rmsnorm_pattern(op_executor):
    needs("Pow", "Sqrt", "Reciprocal", "RMSNormalization")
    nodes, inits = rmsnorm("x", "y", width=29)
    m = make_model(nodes, [("x", (2, 3, 29))], ["y"], inits)
    fused(op_executor, m, {"x": rand(2, 3, 29, scale=3)}, ["RMSNormalization"])


def test_transformer_mlp_block(op_executor):
    """MatMul + bias -> GELU (torch's Erf form) -> MatMul + bias -> residual -> LayerNorm, as
    a BERT layer exports before opset 17: the GELU runs in the bias Add's epilogue and the
    LayerNorm is one step."""
    needs("Erf", "Pow", "Sqrt", "LayerNormalization")
    gelu, g_inits = ACTIVATION_PATTERNS["gelu_torch"][0]("h", "a")
    ln, ln_inits = layernorm("r", "y", width=12)
    inits = dict(w1=rand(12, 20, seed=1, scale=0.3), b1=rand(20, seed=2),
                 w2=rand(20, 12, seed=3, scale=0.3), b2=rand(12, seed=4), **g_inits, **ln_inits)
    nodes = [node("MatMul", ["x", "w1"], ["hm"]), node("Add", ["hm", "b1"], ["h"]), *gelu,
             node("MatMul", ["a", "w2"], ["om"]), node("Add", ["om", "b2"], ["o"]),
             node("Add", ["o", "x"], ["r"]), *ln]
    m = make_model(nodes, [("x", (2, 5, 12))], ["y"], inits)
    art = rvvkit.build(m)
    plan = art.meta["plan"]
    assert [s["op"] for s in plan] == ["MatMul", "Add", "MatMul", "Add", "Add",
                                       "LayerNormalization"]
    assert plan[1]["fused"][0]["op"] == "Gelu"   # in the bias Add's epilogue
    assert_matches(m, {"x": rand(2, 5, 12)}, artifact=art, on=op_executor)
