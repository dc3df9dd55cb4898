"""Operator cases: Conv, pooling, BatchNormalization.

Each case is a tiny model, built once and run on every executor of the session (the `executor`
argument: host, QEMU at several VLENs, the CUDA emulator; tests/executors.py), and compared
with onnxruntime (single-threaded). Shapes are deliberately awkward: primes, 1x1 spatial,
non-square windows, batch 2, padding on one side only."""
import re

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import assert_matches, bn_params, make_model, rand, run_ort
from executors import Executor
from ops_support import check_single, plan_ops

node = helper.make_node


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
def test_conv(x_shape, w_shape, attrs, bias, executor):
    inits = {"w": rand(*w_shape, seed=1)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand(w_shape[0], seed=2)
        ins.append("b")
    m = make_model([node("Conv", ins, ["y"], **attrs)], [("x", x_shape)], ["y"], inits)
    assert_matches(m, {"x": rand(*x_shape)}, on=executor)


# float16 (`--precision auto` on the K1 profile: Zvfh), every case at VLEN 128 and 512 with
# poisoned tails, relative to the largest output: the staged GEMM's float16 sums of up to 32
# products (tests/qemu/test_precision_fp16.py measures 5e-4..2.1e-3 on its cases), Winograd's
# amplified rounding (2e-2 there)
HALF_TOLERANCE = {"direct": 5e-3, "winograd": 2e-2}


@pytest.mark.qemu
@pytest.mark.parametrize("x_shape, w_shape, attrs, bias",
                         [c[1:] for c in CONV_CASES], ids=[c[0] for c in CONV_CASES])
def test_conv_float16_on_k1(x_shape, w_shape, attrs, bias):
    why = Executor("qemu", "qemu").why_not()
    if why:
        pytest.skip(why)
    inits = {"w": rand(*w_shape, seed=1)}
    ins = ["x", "w"] + (["b"] if bias else [])
    if bias:
        inits["b"] = rand(w_shape[0], seed=2)
    m = make_model([node("Conv", ins, ["y"], **attrs)], [("x", x_shape)], ["y"], inits)
    feeds = {"x": rand(*x_shape)}
    want = run_ort(m, feeds)["y"]
    scale = float(np.abs(want).max())
    art = rvvkit.build(m, precision="auto", cuda=False)
    tol = HALF_TOLERANCE["winograd" if "winograd" in art.c_source else "direct"]
    # a conv of one group always takes a float16 form (grouped ones keep float32)
    half = attrs.get("group", 1) == 1
    for vlen in (128, 512):
        with rvvkit.load(art, on="qemu", vlen=vlen, isa="k1", tail_ones=True) as sess:
            got = sess.run(feeds)["y"]
        err = float(np.abs(got - want).max())
        assert err <= tol * scale, (vlen, err / scale)
        if half:
            assert err > 1e-6 * scale, f"VLEN {vlen}: float32 results, no float16 form ran"


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
    ("whole_plane_strided", (1, 3, 5, 6), dict(kernel_shape=[5, 6], strides=[2, 3])),
    # rows of >= 32 inside outputs: the portable kernel folds their columns tap by tap
    ("wide_row_pad1_s2", (1, 2, 5, 75), dict(kernel_shape=[3, 3], strides=[2, 2],
                                             pads=[1, 1, 1, 1])),
    ("wide_row_dilated", (1, 2, 4, 40), dict(kernel_shape=[2, 3], dilations=[1, 2])),
]


@pytest.mark.parametrize("x_shape, attrs", [c[1:] for c in MAXPOOL_CASES],
                         ids=[c[0] for c in MAXPOOL_CASES])
def test_maxpool(x_shape, attrs, executor):
    check_single(executor, "MaxPool", x_shape, attrs, opset=12)


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
    ("whole_plane", (2, 5, 7, 7), dict(kernel_shape=[7, 7])),     # ResNet's final pool
    # rows of >= 32 inside outputs: the portable kernel folds their columns tap by tap
    ("wide_row_cip0", (1, 2, 5, 40), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("wide_row_cip1_s2", (1, 2, 6, 75), dict(kernel_shape=[3, 3], strides=[2, 2],
                                             pads=[1, 2, 1, 0], count_include_pad=1)),
    ("wide_row_k2x4_s3", (1, 2, 5, 110), dict(kernel_shape=[2, 4], strides=[1, 3])),
]


@pytest.mark.parametrize("x_shape, attrs", [c[1:] for c in AVGPOOL_CASES],
                         ids=[c[0] for c in AVGPOOL_CASES])
def test_averagepool(x_shape, attrs, executor):
    check_single(executor, "AveragePool", x_shape, attrs, opset=11)


# Dilated windows that ceil_mode lets reach past the padded input: with count_include_pad the
# divisor counts the taps inside it (ONNX's reference), fewer than the window's span there
AVGPOOL_DILATED_CASES = [
    ("d2_s3_ceil_cip1", (1, 2, 12, 12), dict(kernel_shape=[3, 3], dilations=[2, 2],
                                             strides=[3, 3], ceil_mode=1, count_include_pad=1)),
    ("wide_row_d3x2_pads_ceil_cip1", (1, 2, 8, 70),
     dict(kernel_shape=[2, 3], dilations=[3, 2], strides=[2, 2], pads=[1, 1, 0, 1],
          ceil_mode=1, count_include_pad=1)),
    ("d2_ceil_cip0", (1, 2, 12, 12), dict(kernel_shape=[3, 3], dilations=[2, 2],
                                          strides=[3, 3], ceil_mode=1)),
]


@pytest.mark.parametrize("x_shape, attrs", [c[1:] for c in AVGPOOL_DILATED_CASES],
                         ids=[c[0] for c in AVGPOOL_DILATED_CASES])
def test_averagepool_dilated(x_shape, attrs, executor):
    check_single(executor, "AveragePool", x_shape, attrs, opset=19)


@pytest.mark.parametrize("op, kind", [("AveragePool", "avg"), ("MaxPool", "max")])
def test_whole_plane_pool_lowers_to_global(op, kind):
    """A window over the whole unpadded plane (one output per channel) runs the global pool's
    per-channel reduction, not the windowed kernel's one-column vectors."""
    m = make_model([node(op, ["x"], ["y"], kernel_shape=[7, 7])], [("x", (1, 4, 7, 7))], ["y"])
    src = rvvkit.build(m).c_source
    assert re.search(rf"\bk0_global{kind}pool\b", src) and not re.search(rf"_{kind}pool\b", src)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x_shape", [(2, 3, 5, 7), (1, 4, 1, 1), (1, 3, 13, 1), (1, 2, 17)],
                         ids=["2x3x5x7", "spatial_1x1", "13x1", "rank3"])
def test_global_pool(op, x_shape, executor):
    check_single(executor, op, x_shape)


# ---------------------------------------------------------------------------------------------
# BatchNormalization and the affine path

@pytest.mark.parametrize("x_shape, eps", [((2, 3, 5, 5), 1e-5), ((1, 7, 1, 1), 1e-3),
                                          ((4, 6), 1e-5), ((2, 5, 13), 0.1)],
                         ids=["nchw", "spatial_1x1_eps1e-3", "rank2", "rank3_eps0.1"])
def test_batchnorm_alone(x_shape, eps, executor):
    bn = node("BatchNormalization", ["x", "s", "bb", "mean", "var"], ["y"], epsilon=eps)
    m = make_model([bn], [("x", x_shape)], ["y"], bn_params(x_shape[1]))
    art = rvvkit.build(m)
    assert plan_ops(art) == ["rvvkit.ChannelAffine"]
    assert_matches(m, {"x": rand(*x_shape)}, artifact=art, on=executor)


@pytest.mark.parametrize("bias", [True, False], ids=["conv_bias", "conv_no_bias"])
def test_batchnorm_after_conv_is_folded(bias, executor):
    inits = {"w": rand(4, 3, 3, 3, seed=1), **bn_params(4)}
    ins = ["x", "w"] + (["b"] if bias else [])
    if bias:
        inits["b"] = rand(4, seed=2)
    nodes = [node("Conv", ins, ["c"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["y"])]
    m = make_model(nodes, [("x", (2, 3, 7, 7))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Conv"]
    assert_matches(m, {"x": rand(2, 3, 7, 7)}, artifact=art, on=executor)


# ---------------------------------------------------------------------------------------------
# 1-D (lowered onto the 2-D kernels with H = 1) and 3-D (direct kernels) convolution / pooling

CONV_ND_CASES = [
    # id, x shape, w shape, attrs, bias
    ("1d_k3_pad1", (1, 3, 17), (4, 3, 3), dict(pads=[1, 1]), True),
    ("1d_wav2vec_k10_s5", (1, 1, 163), (8, 1, 10), dict(strides=[5]), False),
    ("1d_pointwise_batch2", (2, 6, 9), (5, 6, 1), {}, True),
    ("1d_stride2_same_upper", (1, 4, 13), (3, 4, 3), dict(strides=[2], auto_pad="SAME_UPPER"),
     True),
    ("1d_depthwise", (1, 5, 11), (5, 1, 5), dict(group=5, pads=[2, 1]), True),
    ("1d_group2_stride2", (2, 4, 15), (6, 2, 3), dict(group=2, strides=[2]), True),
    ("3d_k3_pad1", (1, 2, 5, 6, 7), (3, 2, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1]), True),
    ("3d_stride2_dil_group", (2, 4, 7, 5, 6), (4, 2, 2, 3, 2),
     dict(strides=[2, 1, 2], dilations=[1, 2, 1], group=2, pads=[0, 1, 1, 1, 0, 0]), False),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias",
                         [c[1:] for c in CONV_ND_CASES], ids=[c[0] for c in CONV_ND_CASES])
def test_conv_1d_3d(x_shape, w_shape, attrs, bias, op_executor):
    inits = {"w": rand(*w_shape, seed=1)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand(w_shape[0], seed=2)
        ins.append("b")
    m = make_model([node("Conv", ins, ["y"], **attrs)], [("x", x_shape)], ["y"], inits)
    assert_matches(m, {"x": rand(*x_shape)}, on=op_executor)


def test_conv1d_bn_relu_residual(op_executor):
    """BatchNorm folds into a 1-D conv; Relu and a residual Add fuse into its epilogue."""
    inits = {"w": rand(4, 4, 3, seed=1), **bn_params(4)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
             node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["d"]),
             node("Add", ["d", "x"], ["e"]), node("Relu", ["e"], ["y"])]
    m = make_model(nodes, [("x", (2, 4, 9))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Conv"]
    assert_matches(m, {"x": rand(2, 4, 9)}, artifact=art, on=op_executor)


POOL_ND_CASES = [
    ("max_1d_k3s2_pad1", "MaxPool", (2, 3, 17), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ("avg_1d_k4s3_ceil", "AveragePool", (1, 2, 16), dict(kernel_shape=[4], strides=[3],
                                                        ceil_mode=1)),
    ("avg_1d_cip1", "AveragePool", (1, 2, 9), dict(kernel_shape=[3], pads=[1, 2],
                                                   count_include_pad=1)),
    ("max_3d_k2s2", "MaxPool", (1, 2, 6, 5, 7), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2])),
    ("max_3d_dil_pad", "MaxPool", (1, 2, 6, 5, 7), dict(kernel_shape=[2, 3, 2],
                                                        dilations=[2, 1, 1],
                                                        pads=[1, 1, 0, 0, 1, 1])),
    ("avg_3d_pad_cip0", "AveragePool", (2, 2, 5, 4, 6), dict(kernel_shape=[3, 3, 3],
                                                            pads=[1, 1, 1, 1, 1, 1])),
    ("avg_3d_pad_cip1_ceil", "AveragePool", (1, 2, 5, 4, 6),
     dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2], pads=[1, 0, 1, 1, 0, 1],
          count_include_pad=1, ceil_mode=1)),
    # dilated windows past the padded input (see AVGPOOL_DILATED_CASES)
    ("avg_1d_dil_ceil_cip1", "AveragePool", (1, 2, 12),
     dict(kernel_shape=[3], dilations=[2], strides=[3], ceil_mode=1, count_include_pad=1)),
    ("avg_3d_dil_ceil_cip1", "AveragePool", (1, 2, 9, 8, 10),
     dict(kernel_shape=[2, 3, 2], dilations=[3, 2, 2], strides=[2, 3, 2],
          pads=[1, 0, 0, 0, 1, 1], ceil_mode=1, count_include_pad=1)),
]


@pytest.mark.parametrize("op, x_shape, attrs", [c[1:] for c in POOL_ND_CASES],
                         ids=[c[0] for c in POOL_ND_CASES])
def test_pool_1d_3d(op, x_shape, attrs, op_executor):
    check_single(op_executor, op, x_shape, attrs, opset=19)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_3d(op, op_executor):
    check_single(op_executor, op, (2, 3, 4, 5, 3))


def test_conv3d_bias_residual_relu(op_executor):
    """Add and Relu fuse into the 3-D conv's GEMM epilogue (input 2 channels, output 2)."""
    inits = {"w": rand(2, 2, 3, 1, 3, seed=1), "b": rand(2, seed=2)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 1, 0, 1]),
             node("Add", ["c", "x"], ["e"]), node("Relu", ["e"], ["y"])]
    m = make_model(nodes, [("x", (2, 2, 4, 3, 5))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Conv"]
    assert_matches(m, {"x": rand(2, 2, 4, 3, 5)}, artifact=art, on=op_executor)


def test_conv_on_constants_folds(op_executor):
    """A Conv whose inputs are all initializers is evaluated at build time (numpy)."""
    inits = {"c": rand(1, 4, 9, seed=3), "w": rand(4, 2, 3, seed=1), "b": rand(4, seed=2)}
    nodes = [node("Conv", ["c", "w", "b"], ["k"], group=2, strides=[2], pads=[1, 0]),
             node("Add", ["x", "k"], ["y"])]
    m = make_model(nodes, [("x", (1, 4, 4))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["Add"]
    assert_matches(m, {"x": rand(1, 4, 4)}, artifact=art, on=op_executor)
