"""QDQ groups around operators that only move or select values (passes/qdq.py DROP): with the
same scale and zero point on both sides, DQ -> op -> Q runs the op on the integers, exactly as
onnxruntime drops the pair; interpolating modes keep the float path."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper

import rvvkit
from conftest import assert_matches, make_model

node = helper.make_node


def group(op, dt=np.int8, shape=(1, 3, 5, 6), **attrs):
    x = np.random.default_rng(0).integers(-128 if dt == np.int8 else 0, 128, shape).astype(dt)
    inits = {"s": np.float32(0.05), "z": dt(3)}
    extra = []
    if op == "Resize":
        inits.update(roi=np.zeros(0, np.float32), sc=np.array([1, 1, 2, 1.5], np.float32))
        extra = ["roi", "sc"]
    nodes = [node("DequantizeLinear", ["x", "s", "z"], ["f"]),
             node(op, ["f", *extra], ["g"], **attrs),
             node("QuantizeLinear", ["g", "s", "z"], ["y"])]
    code = TP.INT8 if dt == np.int8 else TP.UINT8
    m = make_model(nodes, [helper.make_tensor_value_info("x", code, shape)],
                   [helper.make_tensor_value_info("y", code, None)], inits, opset=13)
    return m, {"x": x}


CASES = {
    "resize_nearest_int8": (lambda: group("Resize", mode="nearest"), True),
    "resize_nearest_uint8": (lambda: group("Resize", np.uint8, mode="nearest",
                                           nearest_mode="floor"), True),
    "maxpool_int8": (lambda: group("MaxPool", kernel_shape=[2, 2], strides=[2, 2]), True),
    "transpose_uint8": (lambda: group("Transpose", np.uint8, perm=[0, 2, 3, 1]), True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_scale_groups_run_on_integers(case, op_executor):
    build, on_integers = CASES[case]
    m, feeds = build()
    ops = [s["op"] for s in rvvkit.build(m).meta["plan"]]
    assert ("QuantizeLinear" not in ops) == on_integers, ops
    assert_matches(m, feeds, on=op_executor)


def test_linear_resize_stays_float_within_one_quantum(op_executor):
    """A linear Resize between Q/DQ interpolates the dequantized floats in rvvkit; onnxruntime
    runs its own integer interpolation there, so a few outputs differ by one quantum."""
    from conftest import run_ort, run_rvvkit
    m, feeds = group("Resize", mode="linear")
    ops = [s["op"] for s in rvvkit.build(m).meta["plan"]]
    assert "Resize" in ops and "QuantizeLinear" in ops, ops
    got = run_rvvkit(m, feeds, on=op_executor)["y"].astype(int)
    want = run_ort(m, feeds)["y"].astype(int)
    assert np.abs(got - want).max() <= 1 and np.mean(got != want) <= 0.05
