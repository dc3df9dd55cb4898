"""Operator cases: element-wise math. Unary math (activation-table rows: libm functions, the
exponential-linear units, vector exp under RVV), fused into a producer, and the broadcasting
binaries and variadics (Pow, Mod, Min/Max/Mean, PRelu, integer Add/Sub/Mul/Div).

Unary ops are grouped several to a model (one output each) so one build covers them; inputs
hold awkward values: halves (Round is half to even), large magnitudes (exp overflow and
underflow), zeros."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import assert_matches, make_model, rand
from ops_support import plan_ops

node = helper.make_node
I64, I32, F32 = TensorProto.INT64, TensorProto.INT32, TensorProto.FLOAT


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _real(shape, seed=0):
    x = rand(*shape, seed=seed, scale=3).reshape(-1)
    special = [-100.0, 100.0, 0.5, 1.5, 2.5, -0.5, -2.5, 0.0, 88.5, -90.0, 1e-4, -1e-3]
    x[:len(special)] = special
    return x.reshape(shape)


def _unit(shape, seed=0):        # (-1, 1), open
    return np.asarray(np.random.default_rng(seed).uniform(-0.99, 0.99, shape), np.float32)


def _positive(shape, seed=0):    # [1, 30): Acosh needs >= 1
    return np.asarray(np.random.default_rng(seed).uniform(1.0, 30.0, shape), np.float32)


UNARY_GROUPS = [
    # id, [(op, attrs)], input maker
    ("real_plain", [("Abs", {}), ("Neg", {}), ("Exp", {}), ("Floor", {}), ("Ceil", {}),
                    ("Round", {}), ("Sign", {}), ("Sin", {}), ("Cos", {}), ("Atan", {}),
                    ("Sinh", {}), ("Cosh", {}), ("Asinh", {}), ("Erf", {})], _real),
    ("real_smooth", [("Sigmoid", {}), ("Tanh", {}), ("Softplus", {}), ("Softsign", {}),
                     ("Mish", {}), ("Elu", {}), ("Selu", {}), ("Celu", {})], _real),
    ("real_params", [("Elu", dict(alpha=0.5)), ("Selu", dict(alpha=1.5, gamma=2.0)),
                     ("Celu", dict(alpha=2.0)), ("ThresholdedRelu", dict(alpha=0.3)),
                     ("ThresholdedRelu", {})], _real),
    ("unit_interval", [("Asin", {}), ("Acos", {}), ("Atanh", {}), ("Tan", {}),
                       ("Exp", {}), ("Tanh", {}), ("Sigmoid", {})], _unit),
    ("positive", [("Log", {}), ("Sqrt", {}), ("Reciprocal", {}), ("Acosh", {})], _positive),
]


@pytest.mark.parametrize("ops, make", [c[1:] for c in UNARY_GROUPS],
                         ids=[c[0] for c in UNARY_GROUPS])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (37,)], ids=["2x3x5x7", "37"])
def test_unary_math(ops, make, shape, op_executor):
    nodes = [node(op, ["x"], [f"y{i}"], **attrs) for i, (op, attrs) in enumerate(ops)]
    m = make_model(nodes, [("x", shape)], [f"y{i}" for i in range(len(ops))], opset=18)
    assert_matches(m, {"x": make(shape)}, on=op_executor)


FUSED_CASES = [
    # id, activation, producer: depthwise conv (EfficientNet's SE gate), conv, gemm, add
    ("dwconv_sigmoid", "Sigmoid", "dw"),
    ("conv_elu", "Elu", "conv"),
    ("gemm_tanh", "Tanh", "gemm"),
    ("add_mish", "Mish", "add"),
]


@pytest.mark.parametrize("act, producer", [c[1:] for c in FUSED_CASES],
                         ids=[c[0] for c in FUSED_CASES])
def test_fused_math_activation(act, producer, op_executor):
    inits = {"w": rand(6, 1 if producer == "dw" else 6, 3, 3, seed=1), "b": rand(6, seed=2),
             "fw": rand(6 * 7 * 5, 19, seed=3), "fb": rand(19, seed=4)}
    shape = (2, 6, 7, 5)
    if producer == "gemm":
        first = [node("Flatten", ["x"], ["f"]), node("Gemm", ["f", "fw", "fb"], ["p"])]
        inits = {k: inits[k] for k in ("fw", "fb")}
    elif producer == "add":
        first = [node("Add", ["x", "b4"], ["p"])]
        inits = {"b4": rand(1, 6, 1, 5, seed=5)}
    else:
        first = [node("Conv", ["x", "w", "b"], ["p"], pads=[1, 1, 1, 1],
                      group=6 if producer == "dw" else 1)]
        inits = {k: inits[k] for k in ("w", "b")}
    m = make_model(first + [node(act, ["p"], ["y"])], [("x", shape)], ["y"], inits, opset=18)
    art = rvvkit.build(m)
    assert act not in plan_ops(art)       # applied in the producer's epilogue
    assert_matches(m, {"x": rand(*shape, scale=2)}, artifact=art, on=op_executor)


def _data(elem, shape, seed, kind):
    rng = np.random.default_rng(seed)
    if elem == F32:
        if kind == "positive":
            return np.asarray(rng.uniform(0.2, 3.0, shape), np.float32)
        return np.asarray(rng.uniform(-4, 4, shape), np.float32)
    ty = {I64: np.int64, I32: np.int32, TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}
    lo = 0 if elem == TensorProto.UINT8 else (1 if kind == "positive" else -9)
    out = rng.integers(lo, 10, shape).astype(ty[elem])
    if kind == "nonzero":
        out[out == 0] = 3
    return np.asarray(out)


BINARY_CASES = [
    # id, op, attrs, [(elem, shape, kind)] per input, output elem, opset
    ("pow_float_bcast", "Pow", {}, [(F32, (2, 3, 5), "positive"), (F32, (5,), "any")], F32, 13),
    ("pow_float_int_exponent", "Pow", {}, [(F32, (4, 7), "any"), (I64, (1, 7), "small")], F32,
     13),
    ("pow_int64", "Pow", {}, [(I64, (3, 4), "any"), (I64, (4,), "positive")], I64, 13),
    ("mod_fmod_float", "Mod", dict(fmod=1), [(F32, (3, 6), "any"), (F32, (6,), "positive")],
     F32, 13),
    ("mod_int64_floor", "Mod", {}, [(I64, (5, 4), "any"), (I64, (5, 1), "nonzero")], I64, 13),
    ("mod_int32_fmod", "Mod", dict(fmod=1), [(I32, (11,), "any"), (I32, (11,), "nonzero")],
     I32, 13),
    ("min3_float_bcast", "Min", {}, [(F32, (2, 1, 5), "any"), (F32, (3, 5), "any"),
                                     (F32, (1,), "any")], F32, 13),
    ("max2_int64", "Max", {}, [(I64, (4, 6), "any"), (I64, (6,), "any")], I64, 13),
    ("max1_float", "Max", {}, [(F32, (9,), "any")], F32, 13),
    ("mean3_bcast", "Mean", {}, [(F32, (2, 3, 4), "any"), (F32, (3, 1), "any"),
                                 (F32, (4,), "any")], F32, 13),
    ("prelu_channel_slope", "PRelu", {}, [(F32, (2, 3, 4, 5), "any"), (F32, (3, 1, 1), "any")],
     F32, 13),
    ("prelu_scalar_slope", "PRelu", {}, [(F32, (17,), "any"), (F32, (1,), "any")], F32, 13),
    ("bitshift_left_uint8", "BitShift", dict(direction="LEFT"),
     [(TensorProto.UINT8, (3, 5), "any"), (TensorProto.UINT8, (5,), "small")],
     TensorProto.UINT8, 13),
    ("bitshift_right_uint8", "BitShift", dict(direction="RIGHT"),
     [(TensorProto.UINT8, (13,), "any"), (TensorProto.UINT8, (1,), "small")],
     TensorProto.UINT8, 13),
]


@pytest.mark.parametrize("op, attrs, ins, out, opset", [c[1:] for c in BINARY_CASES],
                         ids=[c[0] for c in BINARY_CASES])
def test_binary_math(op, attrs, ins, out, opset, op_executor):
    names = [f"x{i}" for i in range(len(ins))]
    feeds = {}
    for i, (elem, shape, kind) in enumerate(ins):
        feeds[names[i]] = _data(elem, shape, i, kind)
        if kind == "small":      # exponents and shift amounts in [0, 3]
            feeds[names[i]] = np.abs(feeds[names[i]]) % 4
    m = make_model([node(op, names, ["y"], **attrs)],
                   [vi(n, e, s) for n, (e, s, _) in zip(names, ins)], [vi("y", out, None)],
                   opset=opset)
    assert_matches(m, feeds, on=op_executor)


INT_ARITH_CASES = [
    # id, elem: Add/Sub/Mul/Div (negative operands: Div truncates toward zero), Min, Neg...
    ("int64", I64),
    ("int32", I32),
]


@pytest.mark.parametrize("elem", [c[1] for c in INT_ARITH_CASES],
                         ids=[c[0] for c in INT_ARITH_CASES])
def test_integer_arithmetic(elem, op_executor):
    nodes = [node("Add", ["a", "b"], ["y0"]), node("Sub", ["a", "b"], ["y1"]),
             node("Mul", ["a", "b"], ["y2"]), node("Div", ["a", "b"], ["y3"]),
             node("Min", ["a", "b", "a"], ["y4"]), node("Neg", ["a"], ["y5"]),
             node("Abs", ["a"], ["y6"]), node("Sign", ["b"], ["y7"])]
    m = make_model(nodes, [vi("a", elem, (3, 1, 7)), vi("b", elem, (4, 7))],
                   [vi(f"y{i}", elem, None) for i in range(8)])
    feeds = {"a": _data(elem, (3, 1, 7), 0, "any"), "b": _data(elem, (4, 7), 1, "nonzero")}
    assert_matches(m, feeds, on=op_executor)
