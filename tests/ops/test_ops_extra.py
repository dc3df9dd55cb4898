"""Operator cases: LpPool (1-D, 2-D, 3-D), Shrink, Det, SwiGLU, RotaryEmbedding.

Each case is a tiny model run on every executor of the sample (`op_executor`: host, QEMU at
two VLENs, the CUDA emulator) and compared with onnxruntime (SwiGLU, an opset newer than
onnxruntime's, against its defining formula). Shapes are awkward on purpose."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import assert_matches, make_model, rand, run_rvvkit_all
from rvvkit.errors import ExecutionError

node = helper.make_node


LPPOOL_CASES = [
    # id, x shape, attrs, opset
    ("2d_p2_pads", (1, 2, 5, 6), dict(kernel_shape=[3, 2], pads=[1, 0, 1, 1], p=2), 11),
    ("2d_p1_strides", (2, 3, 7, 5), dict(kernel_shape=[2, 3], strides=[2, 1], p=1), 11),
    ("2d_p3_dil_ceil", (1, 2, 8, 7), dict(kernel_shape=[2, 2], dilations=[2, 1], strides=[2, 2],
                                          ceil_mode=1, p=3), 18),
    ("1d_same_upper", (2, 3, 9), dict(kernel_shape=[4], strides=[2], auto_pad="SAME_UPPER"), 18),
    ("3d_p2", (1, 2, 4, 3, 5), dict(kernel_shape=[2, 2, 3], pads=[0, 1, 1, 1, 0, 1]), 18),
]


@pytest.mark.parametrize("shape, attrs, opset", [c[1:] for c in LPPOOL_CASES],
                         ids=[c[0] for c in LPPOOL_CASES])
def test_lppool(shape, attrs, opset, op_executor):
    m = make_model([node("LpPool", ["x"], ["y"], **attrs)], [("x", shape)], ["y"], opset=opset)
    assert_matches(m, {"x": rand(*shape)}, on=op_executor)


@pytest.mark.parametrize("attrs", [dict(), dict(bias=0.5, lambd=0.5), dict(bias=-1.0, lambd=0.2)],
                         ids=["hard", "soft", "neg_bias"])
def test_shrink(attrs, op_executor):
    m = make_model([node("Shrink", ["x"], ["y"], **attrs)], [("x", (3, 17))], ["y"])
    assert_matches(m, {"x": rand(3, 17)}, on=op_executor)


@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 4, 4), (1, 1)], ids=["2d", "batched", "1x1"])
def test_det(shape, op_executor):
    m = make_model([node("Det", ["x"], ["y"])], [("x", shape)], ["y"], opset=22)
    x = rand(*shape)
    if len(shape) == 4:
        x[0, 1] = 0.0                    # a singular matrix
        x[1, 2, 0] = x[1, 2, 3]          # two equal rows
    assert_matches(m, {"x": x}, on=op_executor)


@pytest.mark.parametrize("alpha", [1.0, 0.7])
def test_swiglu(alpha, op_executor):
    m = make_model([node("SwiGLU", ["a", "b"], ["y"], alpha=alpha)],
                   [("a", (3, 37)), ("b", (3, 37))], ["y"], opset=28)
    a, b = rand(3, 37, seed=1, scale=3.0), rand(3, 37, seed=2)
    want = a / (1.0 + np.exp(-alpha * a.astype(np.float64))) * b
    for label, got in run_rvvkit_all(m, {"a": a, "b": b}, on=op_executor).items():
        np.testing.assert_allclose(got["y"], want, rtol=1e-5, atol=1e-6, err_msg=label)


ROPE_CASES = [
    # id, x shape, attrs, cache rows (None: per batch and position), half
    ("4d_positions", (2, 3, 5, 8), dict(), 11, 4),
    ("4d_interleaved_partial", (1, 2, 4, 10), dict(interleaved=1, rotary_embedding_dim=6),
     7, 3),
    ("3d_heads", (2, 4, 12), dict(num_heads=2), 9, 3),
    ("4d_no_positions", (2, 2, 3, 6), dict(), None, 3),
]


@pytest.mark.parametrize("shape, attrs, rows, half", [c[1:] for c in ROPE_CASES],
                         ids=[c[0] for c in ROPE_CASES])
def test_rotary_embedding(shape, attrs, rows, half, op_executor):
    batch, seq = shape[0], shape[2] if len(shape) == 4 else shape[1]
    cache = (rows, half) if rows else (batch, seq, half)
    ins = [("x", shape), ("cos", cache), ("sin", cache)]
    feeds = {"x": rand(*shape), "cos": np.cos(rand(*cache, seed=3)),
             "sin": np.sin(rand(*cache, seed=3))}
    if rows:
        ins.append(helper.make_tensor_value_info("pos", TensorProto.INT64, (batch, seq)))
        feeds["pos"] = np.random.default_rng(4).integers(0, rows, (batch, seq))
    names = ["x", "cos", "sin"] + (["pos"] if rows else [])
    m = make_model([node("RotaryEmbedding", names, ["y"], **attrs)], ins, ["y"], opset=23)
    assert_matches(m, feeds, on=op_executor)


def test_rotary_position_out_of_range_is_reported(op_executor):
    pos = helper.make_tensor_value_info("pos", TensorProto.INT64, (1, 3))
    m = make_model([node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"])],
                   [("x", (1, 2, 3, 4)), ("cos", (5, 2)), ("sin", (5, 2)), pos], ["y"],
                   opset=23)
    feeds = {"x": rand(1, 2, 3, 4), "cos": rand(5, 2), "sin": rand(5, 2),
             "pos": np.array([[0, 5, 1]], np.int64)}
    with pytest.raises(ExecutionError, match="rotaryembedding_0"):
        op_executor.run(rvvkit.build(m), feeds)
