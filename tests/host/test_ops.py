"""Every operator rvvkit lowers, built into a tiny model, JIT-compiled on the host and compared
with onnxruntime (single-threaded). Shapes are deliberately awkward: primes, 1x1 spatial,
non-square windows, batch 2, padding on one side only."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import ATOL, RTOL, assert_matches, make_model, rand, run_rvvkit

node = helper.make_node


def positive(*shape, seed=0):
    """Values in [0.5, 2.5): safe denominators."""
    return np.asarray(0.5 + 2 * np.random.default_rng(seed).random(shape), np.float32)


def check_single(op, x_shape, attrs=None, opset=13, extra_inputs=(), initializers=None,
                 x=None):
    """One node `op` reading `x` (plus constant extra inputs) and writing `y`."""
    m = make_model([node(op, ["x", *extra_inputs], ["y"], **(attrs or {}))],
                   [("x", x_shape)], ["y"], initializers, opset=opset)
    return assert_matches(m, {"x": rand(*x_shape) if x is None else x})


def plan_ops(art):
    return [s["op"] for s in art.meta["plan"]]


# ---------------------------------------------------------------------------------------------
# Conv

CONV_CASES = [
    # id, x shape, w shape, attrs, bias
    ("3x3_pad1", (1, 3, 7, 7), (4, 3, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ("1x1", (1, 8, 5, 5), (6, 8, 1, 1), {}, True),
    ("1x1_spatial_1x1", (1, 5, 1, 1), (3, 5, 1, 1), {}, True),
    ("3x3_on_1x1_padded", (1, 2, 1, 1), (3, 2, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ("no_bias", (1, 3, 7, 7), (4, 3, 3, 3), {}, False),
    ("batch2", (2, 3, 7, 7), (5, 3, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ("stride2_pad_bottom_right", (1, 3, 13, 13), (5, 3, 3, 3),
     dict(strides=[2, 2], pads=[0, 0, 1, 1]), True),
    ("pad_top_left_only", (1, 3, 7, 7), (4, 3, 3, 3), dict(pads=[1, 2, 0, 0]), True),
    ("dilation2", (1, 2, 13, 13), (3, 2, 3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), True),
    ("dilation_2x1_stride_1x2", (1, 2, 11, 13), (3, 2, 3, 3),
     dict(dilations=[2, 1], strides=[1, 2], pads=[1, 0, 2, 1]), True),
    ("nonsquare_kernel", (1, 3, 7, 17), (4, 3, 2, 5), dict(strides=[1, 3], pads=[0, 2, 1, 0]),
     True),
    ("5x5_primes", (1, 3, 17, 13), (7, 3, 5, 5), dict(pads=[2, 2, 2, 2]), True),
    ("wide_channels", (1, 17, 7, 7), (13, 17, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ("group2", (1, 4, 7, 7), (6, 2, 3, 3), dict(group=2, pads=[1, 1, 1, 1]), True),
    ("group3_stride2", (2, 6, 9, 9), (9, 2, 3, 3), dict(group=3, strides=[2, 2]), True),
    ("depthwise", (1, 5, 7, 7), (5, 1, 3, 3), dict(group=5, pads=[1, 1, 1, 1]), True),
    ("depthwise_stride2_pad_top", (1, 6, 13, 13), (6, 1, 3, 3),
     dict(group=6, strides=[2, 2], pads=[1, 1, 0, 0]), True),
    ("depthwise_batch2_no_bias", (2, 4, 5, 7), (4, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1]),
     False),
    ("depthwise_multiplier2", (1, 3, 7, 7), (6, 1, 3, 3), dict(group=3), True),
    ("auto_same_upper_stride2", (1, 3, 7, 7), (4, 3, 4, 4),
     dict(auto_pad="SAME_UPPER", strides=[2, 2]), True),
    ("auto_same_lower_stride2", (1, 3, 7, 7), (4, 3, 4, 4),
     dict(auto_pad="SAME_LOWER", strides=[2, 2]), True),
    ("auto_same_upper_even_kernel", (1, 2, 6, 9), (3, 2, 2, 2), dict(auto_pad="SAME_UPPER"), True),
    ("auto_same_lower_even_kernel", (1, 2, 6, 9), (3, 2, 2, 2), dict(auto_pad="SAME_LOWER"), True),
    ("auto_valid_stride2", (1, 3, 13, 13), (4, 3, 3, 3), dict(auto_pad="VALID", strides=[2, 2]),
     True),
    ("kernel_shape_attr", (1, 3, 7, 7), (4, 3, 3, 3), dict(kernel_shape=[3, 3]), True),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias",
                         [c[1:] for c in CONV_CASES], ids=[c[0] for c in CONV_CASES])
def test_conv(x_shape, w_shape, attrs, bias):
    inits = {"w": rand(*w_shape, seed=1)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand(w_shape[0], seed=2)
        ins.append("b")
    m = make_model([node("Conv", ins, ["y"], **attrs)], [("x", x_shape)], ["y"], inits)
    assert_matches(m, {"x": rand(*x_shape)})


# ---------------------------------------------------------------------------------------------
# Pooling

MAXPOOL_CASES = [
    ("k3s2", (1, 3, 13, 13), dict(kernel_shape=[3, 3], strides=[2, 2])),
    ("k2s2_odd_input", (2, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("k2s2_ceil", (1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("k3s2_pad1_ceil", (1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2],
                                          pads=[1, 1, 1, 1], ceil_mode=1)),
    ("ceil_last_window_in_pad", (1, 1, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2],
                                                   pads=[1, 1, 1, 1], ceil_mode=1)),
    ("pad_bottom_right_only", (1, 3, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2],
                                                 pads=[0, 0, 1, 1])),
    ("pad_top_only", (1, 2, 7, 5), dict(kernel_shape=[3, 3], pads=[2, 0, 0, 0])),
    ("dilations2", (1, 2, 7, 7), dict(kernel_shape=[2, 2], dilations=[2, 2])),
    ("dilations_ceil", (1, 2, 9, 9), dict(kernel_shape=[2, 2], dilations=[2, 2], strides=[2, 2],
                                          ceil_mode=1)),
    ("nonsquare", (2, 3, 5, 13), dict(kernel_shape=[1, 3], strides=[1, 2])),
    ("auto_same_upper", (1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2],
                                           auto_pad="SAME_UPPER")),
    ("auto_same_lower", (1, 2, 6, 6), dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER")),
    ("auto_valid", (1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID")),
    ("spatial_1x1", (1, 4, 1, 1), dict(kernel_shape=[1, 1])),
]


@pytest.mark.parametrize("x_shape, attrs", [c[1:] for c in MAXPOOL_CASES],
                         ids=[c[0] for c in MAXPOOL_CASES])
def test_maxpool(x_shape, attrs):
    check_single("MaxPool", x_shape, attrs, opset=12)


AVGPOOL_CASES = [
    ("k3s1_pad1_cip0", (1, 3, 7, 7), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("k3s1_pad1_cip1", (1, 3, 7, 7), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                          count_include_pad=1)),
    ("k2s2_nopad", (2, 2, 13, 13), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("k3s2_ceil_cip0", (1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2],
                                          pads=[1, 1, 1, 1], ceil_mode=1)),
    ("k3s2_ceil_cip1", (1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2],
                                          pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)),
    ("ceil_no_pad", (1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("pads_one_side_cip0", (1, 2, 7, 5), dict(kernel_shape=[3, 2], pads=[1, 0, 0, 1])),
    ("pads_one_side_cip1", (1, 2, 7, 5), dict(kernel_shape=[3, 2], pads=[1, 0, 0, 1],
                                              count_include_pad=1)),
    ("auto_same_upper", (1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2],
                                           auto_pad="SAME_UPPER")),
    ("auto_same_lower_cip1", (1, 2, 6, 6), dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER",
                                                count_include_pad=1)),
    ("nonsquare_window", (1, 3, 5, 17), dict(kernel_shape=[5, 3], strides=[1, 2])),
]


@pytest.mark.parametrize("x_shape, attrs", [c[1:] for c in AVGPOOL_CASES],
                         ids=[c[0] for c in AVGPOOL_CASES])
def test_averagepool(x_shape, attrs):
    check_single("AveragePool", x_shape, attrs, opset=11)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x_shape", [(2, 3, 5, 7), (1, 4, 1, 1), (1, 3, 13, 1), (1, 2, 17)],
                         ids=["2x3x5x7", "spatial_1x1", "13x1", "rank3"])
def test_global_pool(op, x_shape):
    check_single(op, x_shape)


# ---------------------------------------------------------------------------------------------
# BatchNormalization and the affine path

def _bn_params(c, seed=3):
    rng = np.random.default_rng(seed)
    return {"s": rng.standard_normal(c).astype(np.float32),
            "bb": rng.standard_normal(c).astype(np.float32),
            "mean": rng.standard_normal(c).astype(np.float32),
            "var": (0.5 + rng.random(c)).astype(np.float32)}


@pytest.mark.parametrize("x_shape, eps", [((2, 3, 5, 5), 1e-5), ((1, 7, 1, 1), 1e-3),
                                          ((4, 6), 1e-5), ((2, 5, 13), 0.1)],
                         ids=["nchw", "spatial_1x1_eps1e-3", "rank2", "rank3_eps0.1"])
def test_batchnorm_alone(x_shape, eps):
    bn = node("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["y"], epsilon=eps)
    m = make_model([bn], [("x", x_shape)], ["y"], _bn_params(x_shape[1]))
    art = rvvkit.build(m)
    assert plan_ops(art) == ["ChannelAffine"]
    assert_matches(m, {"x": rand(*x_shape)}, artifact=art)


@pytest.mark.parametrize("bias", [True, False], ids=["conv_bias", "conv_no_bias"])
def test_batchnorm_after_conv_is_folded(bias):
    inits = {"w": rand(4, 3, 3, 3, seed=1), **_bn_params(4)}
    ins = ["x", "w"] + (["b"] if bias else [])
    if bias:
        inits["b"] = rand(4, seed=2)
    nodes = [node("Conv", ins, ["c"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["y"])]
    m = make_model(nodes, [("x", (2, 3, 7, 7))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Conv"]
    assert_matches(m, {"x": rand(2, 3, 7, 7)}, artifact=art)


# ---------------------------------------------------------------------------------------------
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
def test_unary(op, attrs, opset, x_shape):
    check_single(op, x_shape, attrs, opset=opset, x=rand(*x_shape, scale=2))


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
def test_clip_inputs(lo, hi, opset):
    inits, ins = {}, ["x", "", ""]
    if lo is not None:
        inits["lo"], ins[1] = np.float32(lo), "lo"
    if hi is not None:
        inits["hi"], ins[2] = np.float32(hi), "hi"
    while ins[-1] == "":
        ins.pop()
    m = make_model([node("Clip", ins, ["y"])], [("x", (2, 3, 7))], ["y"], inits, opset=opset)
    assert_matches(m, {"x": rand(2, 3, 7, scale=4)})


@pytest.mark.parametrize("x_shape, attrs", [
    ((1, 7, 5, 5), dict(size=3)),
    ((2, 4, 3, 3), dict(size=2, alpha=1e-3, beta=0.5, bias=2.0)),
    ((1, 13, 1, 1), dict(size=5, alpha=0.01, beta=0.75, bias=1.0)),
    ((2, 6, 3, 2), dict(size=4)),
    ((1, 5, 4), dict(size=3, bias=1.5)),
], ids=["size3_default", "size2_even", "size5_spatial_1x1", "size4_even", "rank3"])
def test_lrn(x_shape, attrs):
    if attrs["size"] % 2 and len(x_shape) == 4:
        check_single("LRN", x_shape, attrs)
        return
    # onnxruntime takes odd sizes and rank 4 only; elsewhere the ONNX formula is the judge.
    m = make_model([node("LRN", ["x"], ["y"], **attrs)], [("x", x_shape)], ["y"])
    x = rand(*x_shape)
    np.testing.assert_allclose(run_rvvkit(m, {"x": x})["y"], lrn_reference(x, **attrs),
                               rtol=RTOL, atol=ATOL)


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
def test_softmax(op, opset, axis, shape):
    attrs = {} if axis is None else {"axis": axis}
    check_single(op, shape, attrs, opset=opset, x=rand(*shape, scale=3))


# ---------------------------------------------------------------------------------------------
# Gemm / MatMul

GEMM_CASES = [
    # id, M, K, N, attrs, C shape (None: no C), B constant, C constant
    ("basic_no_c", 3, 5, 4, {}, None, True, True),
    ("transA", 5, 7, 3, dict(transA=1), (3,), True, True),
    ("transB", 3, 7, 5, dict(transB=1), (5,), True, True),
    ("transA_transB", 4, 3, 6, dict(transA=1, transB=1), (4, 6), True, True),
    ("alpha_beta", 3, 5, 4, dict(alpha=0.5, beta=2.0), (3, 4), True, True),
    ("c_scalar", 3, 5, 4, {}, (), True, True),
    ("c_single_elem", 3, 5, 4, dict(beta=0.5), (1,), True, True),
    ("c_vector_n", 3, 5, 4, {}, (4,), True, True),
    ("c_column_m1", 3, 5, 4, {}, (3, 1), True, True),
    ("c_row_1n", 3, 5, 4, {}, (1, 4), True, True),
    ("c_full_mn", 3, 5, 4, {}, (3, 4), True, True),
    ("fc_m1_primes", 1, 13, 17, dict(transB=1), (17,), True, True),
    ("fc_batch2", 2, 17, 7, dict(transB=1), (7,), True, True),
    ("m1_c_1x1", 1, 5, 1, {}, (1, 1), True, True),
    ("dynamic_b", 3, 5, 4, {}, (4,), False, True),
    ("dynamic_b_transB", 3, 5, 4, dict(transB=1), (3, 4), False, True),
    ("dynamic_a_transA_dynamic_b", 3, 5, 4, dict(transA=1, alpha=2.0), None, False, True),
    ("dynamic_c_beta", 3, 5, 4, dict(beta=0.5), (3, 4), True, False),
    ("dynamic_c_row", 3, 5, 4, {}, (3, 1), True, False),
    ("dynamic_b_dynamic_c_vec", 3, 5, 4, dict(alpha=0.25, beta=3.0), (4,), False, False),
]


@pytest.mark.parametrize("M, K, N, attrs, c_shape, b_const, c_const",
                         [c[1:] for c in GEMM_CASES], ids=[c[0] for c in GEMM_CASES])
def test_gemm(M, K, N, attrs, c_shape, b_const, c_const):
    a_shape = (K, M) if attrs.get("transA") else (M, K)
    b_shape = (N, K) if attrs.get("transB") else (K, N)
    inits, inputs, feeds = {}, [("a", a_shape)], {"a": rand(*a_shape, seed=1)}
    b = rand(*b_shape, seed=2)
    if b_const:
        inits["b"] = b
    else:
        inputs.append(("b", b_shape))
        feeds["b"] = b
    ins = ["a", "b"]
    if c_shape is not None:
        c = rand(*c_shape, seed=3)
        if c_const:
            inits["c"] = c
        else:
            inputs.append(("c", c_shape))
            feeds["c"] = c
        ins.append("c")
    m = make_model([node("Gemm", ins, ["y"], **attrs)], inputs, ["y"], inits)
    assert_matches(m, feeds)


MATMUL_CASES = [
    # id, A shape, B shape, B constant
    ("2d", (3, 5), (5, 4), False),
    ("2d_const_b_primes", (7, 13), (13, 17), True),
    ("batched_3d", (2, 3, 5), (2, 5, 4), False),
    ("batched_const_b", (2, 3, 5), (2, 5, 4), True),
    ("bcast_b_2d_const", (2, 3, 5), (5, 4), True),
    ("bcast_b_2d_dynamic", (2, 3, 5), (5, 4), False),
    ("bcast_a_2d", (3, 5), (2, 5, 4), False),
    ("bcast_both_4d", (2, 1, 3, 5), (3, 5, 4), False),
    ("a_1d", (5,), (5, 4), True),
    ("b_1d", (3, 5), (5,), False),
    ("both_1d", (7,), (7,), False),
    ("a_1d_b_3d", (5,), (2, 5, 3), False),
    ("a_4d_b_1d", (2, 3, 4, 5), (5,), True),
    ("m1_row", (1, 13), (13, 7), True),
]


@pytest.mark.parametrize("a_shape, b_shape, b_const", [c[1:] for c in MATMUL_CASES],
                         ids=[c[0] for c in MATMUL_CASES])
def test_matmul(a_shape, b_shape, b_const):
    b = rand(*b_shape, seed=2)
    inputs, feeds, inits = [("a", a_shape)], {"a": rand(*a_shape, seed=1)}, {}
    if b_const:
        inits["b"] = b
    else:
        inputs.append(("b", b_shape))
        feeds["b"] = b
    m = make_model([node("MatMul", ["a", "b"], ["y"])], inputs, ["y"], inits)
    assert_matches(m, feeds)


# ---------------------------------------------------------------------------------------------
# Binary element-wise ops

BINARY_CASES = [
    # id, A shape, B shape, which operand is a constant ("" / "a" / "b")
    ("same_shape", (2, 3, 4), (2, 3, 4), ""),
    ("bcast_b_last_axis", (2, 3, 4), (4,), ""),
    ("bcast_a_last_axis", (4,), (2, 3, 4), ""),
    ("bcast_both_ways", (3, 1), (1, 4), ""),
    ("bcast_both_ways_3d", (2, 1, 5), (3, 1), ""),
    ("bcast_scalar_input", (2, 3, 5), (), ""),
    ("const_scalar", (2, 3, 5, 5), (), "b"),
    ("const_scalar_first", (), (2, 3, 5, 5), "a"),
    ("const_per_channel", (2, 3, 5, 5), (3, 1, 1), "b"),
    ("const_per_channel_first", (1, 3, 1, 1), (2, 3, 5, 5), "a"),
    ("const_per_channel_rank2", (2, 6), (6,), "b"),
    ("const_last_axis", (1, 3, 5, 7), (7,), "b"),
    ("const_full", (2, 3, 4), (2, 3, 4), "b"),
    ("const_full_first", (2, 3, 4), (2, 3, 4), "a"),
    ("const_bcast_output_grows", (3, 5), (2, 1, 1), "b"),
    ("spatial_1x1", (1, 17, 1, 1), (1, 17, 1, 1), ""),
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("a_shape, b_shape, const", [c[1:] for c in BINARY_CASES],
                         ids=[c[0] for c in BINARY_CASES])
def test_binary(op, a_shape, b_shape, const):
    gen = positive if op == "Div" else rand
    a, b = gen(*a_shape, seed=1), gen(*b_shape, seed=2)
    inputs, feeds, inits = [], {}, {}
    for name, arr, shape in (("a", a, a_shape), ("b", b, b_shape)):
        if const == name:
            inits[name] = arr
        else:
            inputs.append((name, shape))
            feeds[name] = arr
    m = make_model([node(op, ["a", "b"], ["y"])], inputs, ["y"], inits)
    assert_matches(m, feeds)


def test_per_channel_constants_become_one_affine():
    """x*s + t - u / v with per-channel constants: one ChannelAffine step, same numbers."""
    inits = {"s": rand(1, 5, 1, 1, seed=1), "t": rand(5, 1, 1, seed=2),
             "u": rand(5, 1, 1, seed=3), "v": positive(1, 5, 1, 1, seed=4)}
    nodes = [node("Mul", ["x", "s"], ["m"]), node("Add", ["t", "m"], ["a"]),
             node("Sub", ["a", "u"], ["d"]), node("Div", ["d", "v"], ["y"])]
    m = make_model(nodes, [("x", (2, 5, 3, 7))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["ChannelAffine"]
    assert_matches(m, {"x": rand(2, 5, 3, 7)}, artifact=art)


SUM_CASES = [
    ("one_input", [(2, 3, 4)]),
    ("two_same", [(2, 3, 4), (2, 3, 4)]),
    ("two_bcast", [(2, 3, 4), (3, 1)]),
    ("three_same", [(1, 5, 7), (1, 5, 7), (1, 5, 7)]),
    ("three_bcast", [(2, 3, 4), (3, 1), (4,)]),
]


@pytest.mark.parametrize("shapes", [c[1] for c in SUM_CASES], ids=[c[0] for c in SUM_CASES])
def test_sum(shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    m = make_model([node("Sum", names, ["y"])], list(zip(names, shapes)), ["y"])
    assert_matches(m, {n: rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes))})


def test_sum_with_constant_operand():
    m = make_model([node("Sum", ["x", "c", "z"], ["y"])], [("x", (2, 3, 4)), ("z", (4,))],
                   ["y"], {"c": rand(3, 4, seed=5)})
    assert_matches(m, {"x": rand(2, 3, 4), "z": rand(4, seed=1)})


# ---------------------------------------------------------------------------------------------
# Shape and data-movement ops. A Relu before and after keeps them between real kernels, so
# they are exercised as buffer aliases; the "_io" variants read a graph input / write a graph
# output directly, which needs a copy.

def _wrapped(op_nodes, x_shape, opset=13, inits=None, io=False):
    if io:
        nodes = op_nodes("x", "y")
    else:
        nodes = [node("Relu", ["x"], ["r0"])] + op_nodes("r0", "r1") + \
                [node("Relu", ["r1"], ["y"])]
    m = make_model(nodes, [("x", x_shape)], ["y"], inits, opset=opset)
    return assert_matches(m, {"x": rand(*x_shape)})


RESHAPE_CASES = [
    ("zero_and_minus1", (2, 3, 4), [0, -1]),
    ("minus1_middle", (2, 3, 4), [4, -1, 2]),
    ("flat", (2, 3, 4), [-1]),
    ("add_unit_dims", (2, 3, 4), [1, 2, 1, 12, 1]),
    ("zero_keeps_two", (2, 3, 5, 1), [0, 0, -1]),
]


@pytest.mark.parametrize("io", [False, True], ids=["alias", "io"])
@pytest.mark.parametrize("x_shape, shape", [c[1:] for c in RESHAPE_CASES],
                         ids=[c[0] for c in RESHAPE_CASES])
def test_reshape(x_shape, shape, io):
    _wrapped(lambda i, o: [node("Reshape", [i, "shape"], [o])], x_shape,
             inits={"shape": np.asarray(shape, np.int64)}, io=io)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, 4, -1, -4])
def test_flatten(axis):
    _wrapped(lambda i, o: [node("Flatten", [i], [o], axis=axis)], (2, 3, 4, 5))


def test_flatten_io():
    _wrapped(lambda i, o: [node("Flatten", [i], [o])], (2, 3, 1, 5), io=True)


@pytest.mark.parametrize("x_shape, perm", [
    ((2, 3, 4, 5), (0, 2, 3, 1)),
    ((2, 3, 4, 5), (3, 1, 0, 2)),
    ((2, 3, 4), None),
    ((7, 13), (1, 0)),
    ((1, 5, 1, 3), (0, 3, 1, 2)),
], ids=["nchw_to_nhwc", "scramble4d", "default_reverse", "2d_primes", "unit_dims"])
def test_transpose(x_shape, perm):
    attrs = {} if perm is None else {"perm": list(perm)}
    _wrapped(lambda i, o: [node("Transpose", [i], [o], **attrs)], x_shape)


CONCAT_CASES = [
    ("axis0", 0, [(1, 3, 4), (2, 3, 4)]),
    ("axis1_three", 1, [(2, 1, 4), (2, 3, 4), (2, 2, 4)]),
    ("axis2", 2, [(2, 3, 1), (2, 3, 5)]),
    ("axis3_nchw", 3, [(1, 2, 3, 4), (1, 2, 3, 1)]),
    ("axis_neg1", -1, [(3, 7), (3, 13)]),
    ("axis_neg3", -3, [(1, 2, 2, 2), (1, 5, 2, 2)]),
]


@pytest.mark.parametrize("axis, shapes", [c[1:] for c in CONCAT_CASES],
                         ids=[c[0] for c in CONCAT_CASES])
def test_concat(axis, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    m = make_model([node("Concat", names, ["y"], axis=axis)], list(zip(names, shapes)), ["y"])
    assert_matches(m, {n: rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes))})


def test_concat_with_constant_and_intermediate():
    nodes = [node("Relu", ["x"], ["r"]), node("Concat", ["c", "r", "x"], ["y"], axis=1)]
    m = make_model(nodes, [("x", (2, 3, 5))], ["y"], {"c": rand(2, 2, 5, seed=3)})
    assert_matches(m, {"x": rand(2, 3, 5)})


def test_concat_in_place_nested_with_extra_reader():
    """Batch-1 concats of computed tensors are written in place (slices of one buffer), also
    when nested and when an input has another reader after the concat."""
    nodes = [node("Relu", ["x"], ["a"]), node("Sigmoid", ["x"], ["b"]),
             node("Concat", ["a", "b"], ["c"], axis=1),
             node("Tanh", ["a"], ["d"]),
             node("Concat", ["c", "d"], ["e"], axis=1),
             node("Mul", ["e", "e"], ["y"]),
             node("Add", ["a", "d"], ["z"])]
    m = make_model(nodes, [("x", (1, 3, 5))], ["y", "z"])
    assert_matches(m, {"x": rand(1, 3, 5, scale=2)})


@pytest.mark.parametrize("axis, batch", [(1, 1), (1, 2), (2, 1), (3, 1)],
                         ids=["axis1_batch1", "axis1_batch2", "axis2_batch1", "axis3_batch1"])
def test_concat_of_convs(axis, batch):
    nodes = [node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Conv", ["x", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Concat", ["c1", "c2"], ["cat"], axis=axis),
             node("Relu", ["cat"], ["y"])]
    inits = {"w1": rand(2, 3, 3, 3, seed=1), "w2": rand(2, 3, 3, 3, seed=2)}
    m = make_model(nodes, [("x", (batch, 3, 5, 5))], ["y"], inits)
    assert_matches(m, {"x": rand(batch, 3, 5, 5)})


UNSQUEEZE_CASES = [
    # id, opset, x shape, axes
    ("opset11_axis0", 11, (3, 4), [0]),
    ("opset11_two_axes", 11, (3, 4), [1, 3]),
    ("opset11_negative", 11, (3, 4), [-1]),
    ("opset13_axis0", 13, (3, 4), [0]),
    ("opset13_unsorted", 13, (3, 4, 5), [4, 0]),
    ("opset13_negative", 13, (3, 4), [-2]),
]


@pytest.mark.parametrize("opset, x_shape, axes", [c[1:] for c in UNSQUEEZE_CASES],
                         ids=[c[0] for c in UNSQUEEZE_CASES])
def test_unsqueeze(opset, x_shape, axes):
    if opset < 13:
        ops, inits = (lambda i, o: [node("Unsqueeze", [i], [o], axes=axes)]), None
    else:
        ops, inits = (lambda i, o: [node("Unsqueeze", [i, "axes"], [o])]), \
            {"axes": np.asarray(axes, np.int64)}
    _wrapped(ops, x_shape, opset=opset, inits=inits)


SQUEEZE_CASES = [
    ("opset11_axis1", 11, (3, 1, 4), [1]),
    ("opset11_all", 11, (1, 3, 1, 4, 1), None),
    ("opset11_negative", 11, (3, 4, 1), [-1]),
    ("opset13_two_axes", 13, (1, 3, 1, 4), [0, 2]),
    ("opset13_negative", 13, (1, 3, 1, 4), [-2]),
    ("opset13_all", 13, (1, 5, 1, 1), None),
]


@pytest.mark.parametrize("opset, x_shape, axes", [c[1:] for c in SQUEEZE_CASES],
                         ids=[c[0] for c in SQUEEZE_CASES])
def test_squeeze(opset, x_shape, axes):
    if axes is None:
        ops, inits = (lambda i, o: [node("Squeeze", [i], [o])]), None
    elif opset < 13:
        ops, inits = (lambda i, o: [node("Squeeze", [i], [o], axes=axes)]), None
    else:
        ops, inits = (lambda i, o: [node("Squeeze", [i, "axes"], [o])]), \
            {"axes": np.asarray(axes, np.int64)}
    _wrapped(ops, x_shape, opset=opset, inits=inits)


# ---------------------------------------------------------------------------------------------
# Build-time constant folding: shape arithmetic and in-graph constants leave no steps behind

def test_reshape_shape_from_shape_gather_unsqueeze_concat():
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
    assert_matches(m, {"x": rand(2, 3, 5, 7)}, artifact=art)


def test_shape_of_graph_input_opset15_start_end():
    """Shape with start/end (opset 15) of a graph input, driving a Reshape."""
    nodes = [node("Shape", ["x"], ["s"], start=1, end=-1),
             node("Concat", ["one", "s", "minus1"], ["shape"], axis=0),
             node("Reshape", ["x", "shape"], ["r"]),
             node("Relu", ["r"], ["y"])]
    inits = {"one": np.asarray([1], np.int64), "minus1": np.asarray([-1], np.int64)}
    m = make_model(nodes, [("x", (2, 3, 5, 7))], ["y"], inits, opset=15)
    art = rvvkit.build(m)
    assert art.meta["outputs"][0]["shape"] == [1, 3, 5, 14]
    assert_matches(m, {"x": rand(2, 3, 5, 7)}, artifact=art)


def test_constant_of_shape_and_constant_nodes():
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
    assert plan_ops(art) == ["Add", "ChannelAffine"]  # the Constant* nodes folded away
    assert_matches(m, {"x": rand(2, 3, 4)}, artifact=art)


def test_gather_of_constant_weights():
    nodes = [node("Gather", ["table", "idx"], ["rows"], axis=0),
             node("MatMul", ["x", "rows"], ["y"])]
    inits = {"table": rand(6, 5, seed=3), "idx": np.asarray([4, 0, 2], np.int64)}
    m = make_model(nodes, [("x", (2, 3))], ["y"], inits)
    assert_matches(m, {"x": rand(2, 3)})


def test_constant_graph_output_is_materialised():
    fill = helper.make_tensor("fill", TensorProto.FLOAT, [1], [2.5])
    nodes = [node("ConstantOfShape", ["shape"], ["k"], value=fill),
             node("Relu", ["x"], ["y"])]
    m = make_model(nodes, [("x", (3,))], ["y", "k"], {"shape": np.asarray([2, 3], np.int64)})
    ours = assert_matches(m, {"x": rand(3)})
    np.testing.assert_array_equal(ours["k"], np.full((2, 3), 2.5, np.float32))


# ---------------------------------------------------------------------------------------------
# Fusion patterns: fewer steps, same numbers

def _conv_inits(cin=3, cout=4, seed=1):
    return {"w": rand(cout, cin, 3, 3, seed=seed), "b": rand(cout, seed=seed + 1)}


def _fused(m, feeds, expect_ops):
    art = rvvkit.build(m)
    assert plan_ops(art) == expect_ops
    assert_matches(m, feeds, artifact=art)


@pytest.mark.parametrize("act_nodes", [
    lambda: [node("Relu", ["c"], ["y"])],
    lambda: [node("LeakyRelu", ["c"], ["y"], alpha=0.1)],
    lambda: [node("Sigmoid", ["c"], ["y"])],
    lambda: [node("Tanh", ["c"], ["y"])],
    lambda: [node("Clip", ["c", "zero", "six"], ["y"])],
], ids=["relu", "leakyrelu", "sigmoid", "tanh", "relu6_clip"])
def test_conv_activation_fused(act_nodes):
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])] + act_nodes()
    inits = dict(_conv_inits(), zero=np.float32(0), six=np.float32(6))
    m = make_model(nodes, [("x", (1, 3, 7, 7))], ["y"], inits)
    _fused(m, {"x": rand(1, 3, 7, 7, scale=3)}, ["Conv"])


def test_conv_bn_relu_fused():
    nodes = [node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[0, 0, 1, 1]),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["n"]),
             node("Relu", ["n"], ["y"])]
    m = make_model(nodes, [("x", (2, 3, 13, 13))], ["y"], {**_conv_inits(), **_bn_params(4)})
    _fused(m, {"x": rand(2, 3, 13, 13)}, ["Conv"])


def test_conv_residual_add_relu_fused():
    """Two convs and a residual Add of the block input: the Add and Relu vanish."""
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Add", ["c2", "x"], ["s"]),
             node("Relu", ["s"], ["y"])]
    inits = {"w1": rand(4, 4, 3, 3, seed=1), "b1": rand(4, seed=2),
             "w2": rand(4, 4, 3, 3, seed=3), "b2": rand(4, seed=4)}
    m = make_model(nodes, [("x", (1, 4, 7, 7))], ["y"], inits)
    _fused(m, {"x": rand(1, 4, 7, 7)}, ["Conv", "Conv"])


def test_conv_residual_from_two_convs_with_bn():
    """Projection shortcut: conv+BN on both branches, Add of the two, Relu."""
    nodes = [node("Conv", ["x", "w1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c1", "s", "bb", "mean", "var"], ["n1"]),
             node("Conv", ["x", "w2"], ["c2"], strides=[2, 2]),
             node("Add", ["n1", "c2"], ["s2"]),
             node("Relu", ["s2"], ["y"])]
    inits = {"w1": rand(4, 3, 3, 3, seed=1), "w2": rand(4, 3, 1, 1, seed=2), **_bn_params(4)}
    m = make_model(nodes, [("x", (1, 3, 9, 9))], ["y"], inits)
    _fused(m, {"x": rand(1, 3, 9, 9)}, ["Conv", "Conv"])


def test_conv_residual_constant_operand():
    nodes = [node("Conv", ["x", "w"], ["c"]), node("Add", ["k", "c"], ["y"])]
    m = make_model(nodes, [("x", (1, 3, 5, 5))], ["y"],
                   {"w": rand(2, 3, 3, 3, seed=1), "k": rand(1, 2, 3, 3, seed=2)})
    _fused(m, {"x": rand(1, 3, 5, 5)}, ["Conv"])


def test_gemm_relu_fused():
    nodes = [node("Gemm", ["x", "w", "b"], ["g"], transB=1), node("Relu", ["g"], ["y"])]
    m = make_model(nodes, [("x", (2, 13))], ["y"], {"w": rand(7, 13, seed=1), "b": rand(7)})
    _fused(m, {"x": rand(2, 13)}, ["Gemm"])


def test_matmul_then_relu():
    nodes = [node("MatMul", ["x", "w"], ["g"]), node("Relu", ["g"], ["y"])]
    m = make_model(nodes, [("x", (3, 5))], ["y"], {"w": rand(5, 4, seed=1)})
    assert_matches(m, {"x": rand(3, 5)})


def test_add_activation_fused():
    nodes = [node("Add", ["a", "b"], ["s"]), node("LeakyRelu", ["s"], ["y"], alpha=0.3)]
    m = make_model(nodes, [("a", (2, 3, 4)), ("b", (3, 1))], ["y"])
    _fused(m, {"a": rand(2, 3, 4), "b": rand(3, 1, seed=1)}, ["Add"])


def test_bn_relu_without_conv_fused():
    nodes = [node("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["n"]),
             node("Relu", ["n"], ["y"])]
    m = make_model(nodes, [("x", (2, 4, 3, 5))], ["y"], _bn_params(4))
    _fused(m, {"x": rand(2, 4, 3, 5)}, ["ChannelAffine"])


def test_activation_not_fused_into_multi_use_output():
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["y"]), node("Sigmoid", ["c"], ["z"])]
    m = make_model(nodes, [("x", (1, 3, 5, 5))], ["y", "z", "c"], _conv_inits())
    _fused(m, {"x": rand(1, 3, 5, 5)}, ["Conv", "Relu", "Sigmoid"])


# ---------------------------------------------------------------------------------------------
# Whole-graph plumbing

def test_identity_input_to_output_and_multiple_outputs():
    nodes = [node("Identity", ["x"], ["y"]), node("Relu", ["x"], ["r"]),
             node("Identity", ["r"], ["z"]), node("Dropout", ["r"], ["d"])]
    m = make_model(nodes, [("x", (2, 5))], ["y", "z", "d"])
    assert_matches(m, {"x": rand(2, 5)})


def test_small_cnn_end_to_end():
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
    inits = {"w1": rand(4, 3, 3, 3, seed=1), "b1": rand(4, seed=2), **_bn_params(4),
             "zero": np.float32(0), "six": np.float32(6), "wd": rand(4, 1, 3, 3, seed=5),
             "wf": rand(5, 4, seed=6), "bf": rand(5, seed=7)}
    m = make_model(nodes, [("x", (2, 3, 17, 13))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Conv", "MaxPool", "Conv", "GlobalAveragePool", "Gemm", "Softmax"]
    assert_matches(m, {"x": rand(2, 3, 17, 13)}, artifact=art)


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
def test_edge_graphs(name):
    nodes, shape, inits = EDGE_GRAPHS[name]()
    m = make_model(nodes, [("x", shape)], ["y"], inits)
    assert_matches(m, {"x": rand(*shape, scale=300 if "large" in name else 1)})
