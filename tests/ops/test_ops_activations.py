"""Operator cases: activations and other unary ops, Clip, LRN, Softmax.

Each case is a tiny model, built once and run on every executor of the session (the `executor`
argument: host, QEMU at several VLENs, the CUDA emulator; tests/executors.py), and compared
with onnxruntime (single-threaded). Shapes are deliberately awkward: primes, 1x1 spatial,
non-square windows, batch 2, padding on one side only."""
import numpy as np
import pytest
from onnx import helper

from conftest import ATOL, RTOL, assert_matches, make_model, rand, run_rvvkit
from ops_support import check_single

node = helper.make_node


# Activations and other unary element-wise ops

UNARY_CASES = [
    ("relu", "Relu", {}, 13),
    ("sigmoid", "Sigmoid", {}, 13),
    ("tanh", "Tanh", {}, 13),
    ("leakyrelu_default", "LeakyRelu", {}, 13),
    ("leakyrelu_alpha0.2", "LeakyRelu", dict(alpha=0.2), 13),
    ("identity", "Identity", {}, 13),
    ("dropout_opset7_ratio_attr", "Dropout", dict(ratio=0.3), 7),
    ("dropout_opset13", "Dropout", {}, 13),
    # Clip-6 (bounds as attributes) is the Clip of opsets 7..10.
    ("clip6_attrs", "Clip", dict(min=-0.5, max=0.7), 7),
    ("clip6_min_only", "Clip", dict(min=0.0), 10),
    ("clip6_defaults", "Clip", {}, 7),
    ("clip11_no_bounds", "Clip", {}, 11),
]


@pytest.mark.parametrize("op, attrs, opset", [c[1:] for c in UNARY_CASES],
                         ids=[c[0] for c in UNARY_CASES])
@pytest.mark.parametrize("x_shape", [(2, 3, 5, 7), (13,)], ids=["2x3x5x7", "13"])
def test_unary(op, attrs, opset, x_shape, executor):
    check_single(executor, op, x_shape, attrs, opset=opset, x=rand(*x_shape, scale=2))


CLIP_INPUT_CASES = [
    # id, min, max, opset
    ("min_max", -0.5, 0.5, 11),
    ("min_only", -0.25, None, 12),
    ("max_only", None, 0.3, 13),
    ("relu6", 0.0, 6.0, 13),
    ("min_greater_than_max", 0.5, -0.5, 13),
]


@pytest.mark.parametrize("lo, hi, opset", [c[1:] for c in CLIP_INPUT_CASES],
                         ids=[c[0] for c in CLIP_INPUT_CASES])
def test_clip_inputs(lo, hi, opset, executor):
    inits, ins = {}, ["x", "", ""]
    if lo is not None:
        inits["lo"], ins[1] = np.float32(lo), "lo"
    if hi is not None:
        inits["hi"], ins[2] = np.float32(hi), "hi"
    while ins[-1] == "":
        ins.pop()
    m = make_model([node("Clip", ins, ["y"])], [("x", (2, 3, 7))], ["y"], inits, opset=opset)
    assert_matches(m, {"x": rand(2, 3, 7, scale=4)}, on=executor)


@pytest.mark.parametrize("x_shape, attrs", [
    ((1, 7, 5, 5), dict(size=3)),
    ((2, 4, 3, 3), dict(size=2, alpha=1e-3, beta=0.5, bias=2.0)),
    ((1, 13, 1, 1), dict(size=5, alpha=0.01, beta=0.75, bias=1.0)),
    ((2, 6, 3, 2), dict(size=4)),
    ((1, 5, 4), dict(size=3, bias=1.5)),
], ids=["size3_default", "size2_even", "size5_spatial_1x1", "size4_even", "rank3"])
def test_lrn(x_shape, attrs, executor):
    if attrs["size"] % 2 and len(x_shape) == 4:
        check_single(executor, "LRN", x_shape, attrs)
        return
    # onnxruntime takes odd sizes and rank 4 only; elsewhere the ONNX formula is the judge.
    m = make_model([node("LRN", ["x"], ["y"], **attrs)], [("x", x_shape)], ["y"])
    x = rand(*x_shape)
    np.testing.assert_allclose(run_rvvkit(m, {"x": x}, on=executor)["y"],
                               lrn_reference(x, **attrs), rtol=RTOL, atol=ATOL)


def lrn_reference(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = x.astype(np.float64) ** 2
    acc = np.stack([sq[:, max(0, i - lo):min(c, i + hi + 1)].sum(axis=1) for i in range(c)], 1)
    return (x / (bias + alpha / size * acc) ** beta).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Softmax / LogSoftmax

SOFTMAX_CASES = [
    # id, opset, axis (None: default), shape
    ("opset11_default_axis_coerce2d", 11, None, (2, 3, 4)),
    ("opset11_axis1_4d", 11, 1, (2, 3, 2, 5)),
    ("opset11_axis2", 11, 2, (2, 3, 4)),
    ("opset11_axis_neg1", 11, -1, (2, 3, 4)),
    ("opset11_axis0", 11, 0, (3, 5)),
    ("opset13_default_last", 13, None, (2, 3, 4)),
    ("opset13_axis1", 13, 1, (2, 3, 4)),
    ("opset13_axis2", 13, 2, (2, 3, 4)),
    ("opset13_axis_neg1_2d", 13, -1, (3, 17)),
    ("opset13_axis1_4d", 13, 1, (1, 5, 3, 2)),
]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis, shape", [c[1:] for c in SOFTMAX_CASES],
                         ids=[c[0] for c in SOFTMAX_CASES])
def test_softmax(op, opset, axis, shape, executor):
    attrs = {} if axis is None else {"axis": axis}
    check_single(executor, op, shape, attrs, opset=opset, x=rand(*shape, scale=3))


# ---------------------------------------------------------------------------------------------


# e^x and what is made of it (sigmoid, SiLU, tanh, both GELUs, ELU, SELU, CELU): one algorithm
# on every executor (rvvkit/codegen/expmath.py), so the host's bits. A decoder's int8 activations round these values: a last-bit difference flips a
# quantum (issue 39). The model is built and run on the host once; each executor compares.
_EXP_BITS = {}


def _exp_model_and_host():
    if not _EXP_BITS:
        xs = [np.linspace(-110, 95, 3001), rand(1000, seed=4) * 6,
              [np.nan, np.inf, -np.inf, 0.0, -0.0, -87.4, 88.72, 1e-30, -1e-30]]
        x = np.concatenate(xs).astype(np.float32)[None]
        nodes = [node("Exp", ["x"], ["e"]), node("Sigmoid", ["x"], ["s"]),
                 node("Mul", ["x", "s"], ["silu"]), node("Tanh", ["x"], ["tanh"]),
                 node("Gelu", ["x"], ["gelu"]), node("Gelu", ["x"], ["gelu_tanh"],
                                                     approximate="tanh"),
                 node("Elu", ["x"], ["elu"], alpha=0.7), node("Selu", ["x"], ["selu"]),
                 node("Celu", ["x"], ["celu"], alpha=1.3)]
        m = make_model(nodes, [("x", list(x.shape))], [n.output[0] for n in nodes], opset=20)
        _EXP_BITS.update(model=m, x=x, host=run_rvvkit(m, {"x": x}))
    return _EXP_BITS


def test_exp_and_its_activations_give_the_hosts_bits(executor):
    built = _exp_model_and_host()
    got = run_rvvkit(built["model"], {"x": built["x"]}, on=executor)
    for name, want in built["host"].items():
        nan = np.isnan(want)   # a NaN's sign and payload are the hardware's (x86: negative)
        np.testing.assert_array_equal(np.isnan(got[name]), nan, err_msg=f"{executor.id}: {name}")
        np.testing.assert_array_equal(got[name][~nan].view(np.int32), want[~nan].view(np.int32),
                                      err_msg=f"{executor.id}: {name}")
