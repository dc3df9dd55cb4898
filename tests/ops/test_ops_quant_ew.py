"""Operator cases of the quantized element-wise family: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, onnxruntime's com.microsoft QLinearAdd/Mul/Sigmoid/LeakyRelu/
GlobalAveragePool/AveragePool/Concat/Softmax, and max pooling of int8/uint8 tensors. One row
per op and variant (per tensor / per axis, int8 / uint8, broadcasting, odd sizes, exact ties),
each a one-node model run on every sampled executor and compared with onnxruntime's outputs of
the same model: integer outputs must be equal (rvvkit/ops/quant/numerics.py reproduces
onnxruntime's order of float operations, fused multiply-adds included)."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper

import rvvkit
from conftest import assert_matches, make_model

node = helper.make_node
F32, U8, I8, I32 = np.float32, np.uint8, np.int8, np.int32
CODE = {F32: TP.FLOAT, U8: TP.UINT8, I8: TP.INT8, I32: TP.INT32}


def ints(dt, shape, seed=0):
    info = np.iinfo(dt)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True
                                                ).astype(dt)


def ties(shape, scale, seed=0):
    """Floats at exact and near half-steps of `scale` (round-half-even cases), with NaN, +-inf
    and values far out of range."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-300, 300, shape)
    x = ((k + 0.5) * np.float32(scale)).astype(F32)
    x = (x + rng.choice([0, 0, 1, -1], shape) * np.spacing(x)).astype(F32)
    flat = x.reshape(-1)
    flat[:4] = [np.nan, np.inf, -np.inf, 1e10][:flat.size]
    return x


def model(nodes, inputs, out_types, inits, opset=21, ms=False):
    vis = [helper.make_tensor_value_info(n, CODE[v.dtype.type], v.shape) for n, v in inputs]
    outs = [helper.make_tensor_value_info(n, CODE[t], None) for n, t in out_types]
    m = make_model(nodes, vis, outs, inits, opset=opset)
    if ms:
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m, dict(inputs)


def quantize(dt, shape, axis=None, zp=True, opset=21):
    x = ties(shape, 0.05)
    k = shape[axis] if axis is not None else 1
    s = np.linspace(0.02, 0.07, k).astype(F32)
    z = ints(dt, (k,), seed=3)
    inits = {"s": s if axis is not None else s[0], "z": z if axis is not None else z[0]}
    ins = ["x", "s", "z"] if zp else ["x", "s"]
    attrs = {"axis": axis} if axis is not None else {}
    if not zp and opset >= 21 and dt == I8:
        attrs["output_dtype"] = TP.INT8
    if not zp:
        del inits["z"]
    return model([node("QuantizeLinear", ins, ["y"], **attrs)], [("x", x)],
                 [("y", dt if zp or attrs.get("output_dtype") else U8)], inits, opset)


def dequantize(dt, shape, axis=None):
    x = ints(dt, shape) if dt != I32 else \
        np.random.default_rng(0).integers(-2 ** 20, 2 ** 20, shape).astype(I32)
    k = shape[axis] if axis is not None else 1
    s = np.linspace(0.01, 0.09, k).astype(F32)
    z = ints(dt, (k,), seed=4) if dt != I32 else np.zeros(k, I32)
    inits = {"s": s if axis is not None else s[0], "z": z if axis is not None else z[0]}
    attrs = {"axis": axis} if axis is not None else {}
    return model([node("DequantizeLinear", ["x", "s", "z"], ["y"], **attrs)], [("x", x)],
                 [("y", F32)], inits)


def dynamic(shape, lo, hi):
    x = np.random.default_rng(1).uniform(lo, hi, shape).astype(F32)
    return model([node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])], [("x", x)],
                 [("y", U8), ("ys", F32), ("yz", U8)], {}, opset=11)


def qparams(dt, names, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    out = {}
    for n in names:
        out[n + "_s"] = F32(rng.uniform(0.005, 0.06))
        out[n + "_z"] = dt(rng.integers(info.min, info.max + 1))
    return out


def binary(op, dt, sa, sb, seed=0):
    a, b = ints(dt, sa, seed), ints(dt, sb, seed + 1)
    inits = qparams(dt, ["a", "b", "c"], seed)
    nd = node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"],
              domain="com.microsoft")
    return model([nd], [("a", a), ("b", b)], [("y", dt)], inits, ms=True)


def unary(op, dt, shape, seed=0, **attrs):
    x = ints(dt, shape, seed)
    inits = qparams(dt, ["x", "y"], seed)
    nd = node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft", **attrs)
    return model([nd], [("x", x)], [("y", dt)], inits, ms=True)


def softmax(dt, shape, axis, opset):
    x = ints(dt, shape, 2)
    inits = {"x_s": F32(0.07), "x_z": dt(3), "y_s": F32(1 / 256), "y_z": dt(0 if dt == U8 else -128)}
    nd = node("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft",
              axis=axis, opset=opset)
    return model([nd], [("x", x)], [("y", dt)], inits, ms=True)


def concat(dt, shapes, axis, same=(False,)):
    inits = qparams(dt, ["y"], 9)
    names, ins = ["y_s", "y_z"], []
    for j, sh in enumerate(shapes):
        ins.append((f"x{j}", ints(dt, sh, j)))
        if j < len(same) and same[j]:
            inits[f"x{j}_s"], inits[f"x{j}_z"] = inits["y_s"], inits["y_z"]
        else:
            inits.update(qparams(dt, [f"x{j}"], 20 + j))
        names += [f"x{j}", f"x{j}_s", f"x{j}_z"]
    nd = node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=axis)
    return model([nd], ins, [("y", dt)], inits, ms=True)


def maxpool(dt, shape, **attrs):
    return model([node("MaxPool", ["x"], ["y"], **attrs)], [("x", ints(dt, shape))], [("y", dt)],
                 {}, opset=13)


CASES = [
    ("q_u8_tensor", lambda: quantize(U8, (3, 37))),
    ("q_i8_axis1", lambda: quantize(I8, (2, 4, 5, 3), axis=1)),
    ("q_u8_axis_last", lambda: quantize(U8, (3, 7), axis=-1)),
    ("q_no_zp_u8", lambda: quantize(U8, (11,), zp=False)),
    ("q_no_zp_i8_output_dtype", lambda: quantize(I8, (11,), zp=False)),
    ("q_opset13", lambda: quantize(I8, (5, 9), opset=13)),
    ("dq_u8_tensor", lambda: dequantize(U8, (4, 33))),
    ("dq_i8_axis0", lambda: dequantize(I8, (3, 5, 2), axis=0)),
    ("dq_i32", lambda: dequantize(I32, (17,))),
    ("dynamic_mixed", lambda: dynamic((3, 41), -3.0, 5.0)),
    ("dynamic_positive", lambda: dynamic((7,), 0.5, 2.0)),
    ("dynamic_negative", lambda: dynamic((2, 9), -4.0, -1.0)),
    ("add_u8_same", lambda: binary("QLinearAdd", U8, (6, 37), (6, 37))),
    ("add_i8_bcast_b_inner", lambda: binary("QLinearAdd", I8, (3, 1, 5), (1, 4, 1))),
    ("add_u8_bcast_a_inner", lambda: binary("QLinearAdd", U8, (4, 1), (1, 5))),
    ("add_i8_scalar_a", lambda: binary("QLinearAdd", I8, (1,), (5, 7))),
    ("add_u8_scalar_b", lambda: binary("QLinearAdd", U8, (2, 3, 5), ())),
    ("add_u8_all_pairs", lambda: binary("QLinearAdd", U8, (256, 1), (1, 256), seed=5)),
    ("mul_u8_same", lambda: binary("QLinearMul", U8, (5, 19), (5, 19))),
    ("mul_i8_bcast", lambda: binary("QLinearMul", I8, (2, 3, 4), (4,))),
    ("sigmoid_u8", lambda: unary("QLinearSigmoid", U8, (3, 85))),
    ("sigmoid_i8", lambda: unary("QLinearSigmoid", I8, (1, 256), seed=2)),
    ("leakyrelu_i8", lambda: unary("QLinearLeakyRelu", I8, (2, 57), alpha=0.1)),
    ("leakyrelu_u8", lambda: unary("QLinearLeakyRelu", U8, (31,), alpha=0.2)),
    ("gap_u8", lambda: unary("QLinearGlobalAveragePool", U8, (2, 5, 7, 7))),
    ("gap_i8_odd", lambda: unary("QLinearGlobalAveragePool", I8, (1, 3, 5, 3), seed=1)),
    ("avgpool_u8_3x3_pad", lambda: unary("QLinearAveragePool", U8, (1, 3, 9, 8),
                                         kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("avgpool_i8_s2_cip", lambda: unary("QLinearAveragePool", I8, (2, 2, 7, 7), seed=3,
                                        kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1],
                                        count_include_pad=1)),
    ("avgpool_u8_ceil", lambda: unary("QLinearAveragePool", U8, (1, 2, 6, 6), seed=4,
                                      kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("softmax_u8_last", lambda: softmax(U8, (3, 37), -1, 13)),
    ("softmax_i8_axis1", lambda: softmax(I8, (2, 10, 3), 1, 13)),
    ("softmax_u8_opset12", lambda: softmax(U8, (2, 3, 7), 1, 12)),
    ("concat_u8_requant", lambda: concat(U8, [(2, 3, 4), (2, 5, 4)], 1)),
    ("concat_i8_copy_and_requant", lambda: concat(I8, [(1, 2, 3), (1, 2, 5), (1, 2, 1)], -1,
                                                  same=(True, False, True))),
    ("maxpool_u8_3x3_s2", lambda: maxpool(U8, (1, 3, 9, 9), kernel_shape=[3, 3],
                                          strides=[2, 2], pads=[1, 1, 1, 1])),
    ("maxpool_i8_dilated", lambda: maxpool(I8, (2, 2, 8, 7), kernel_shape=[2, 3],
                                           dilations=[2, 1], ceil_mode=1, strides=[2, 2])),
    ("maxpool_u8_1d", lambda: maxpool(U8, (1, 4, 13), kernel_shape=[3], pads=[1, 1])),
    # tensors large enough to split into parts (quant_ew.part_range; tests split every kernel
    # that has more than one): blocks of one tensor or row, groups of rows or planes
    ("split_q_u8_tensor_blocks", lambda: quantize(U8, (5, 7001))),
    ("split_dq_i8_axis1_rows", lambda: dequantize(I8, (2, 4, 50, 90), axis=1)),
    ("split_add_u8_same_blocks", lambda: binary("QLinearAdd", U8, (3, 12011), (3, 12011))),
    ("split_mul_i8_bcast_rows", lambda: binary("QLinearMul", I8, (40, 1001), (1001,))),
    ("split_sigmoid_u8_blocks", lambda: unary("QLinearSigmoid", U8, (2, 20003))),
    ("split_gap_i8_planes", lambda: unary("QLinearGlobalAveragePool", I8, (2, 5, 60, 61))),
    ("split_avgpool_u8_planes", lambda: unary("QLinearAveragePool", U8, (1, 3, 50, 47),
                                              kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("split_softmax_u8_rows", lambda: softmax(U8, (70, 301), -1, 13)),
    ("split_concat_i8_rows", lambda: concat(I8, [(5, 2, 1000), (5, 3, 1000)], 1)),
    ("split_maxpool_i8_planes", lambda: maxpool(I8, (2, 3, 41, 40), kernel_shape=[3, 3],
                                                strides=[2, 2], pads=[1, 1, 1, 1])),
]


@pytest.mark.parametrize("build", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_quant_ew(build, op_executor):
    m, feeds = build()
    assert_matches(m, feeds, on=op_executor)


def test_int8_tensors_through_data_movement(op_executor):
    """Reshape, Flatten, Transpose, Concat, Identity, Squeeze, Unsqueeze, Slice and Gather carry
    int8/uint8 tensors unchanged (QOperator models keep them between QLinear ops; ONNX's
    Dropout takes float types only)."""
    x = ints(I8, (2, 3, 4))
    nodes = [node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             node("Reshape", ["t", "shape"], ["r"]),
             node("Unsqueeze", ["r", "ax0"], ["u"]), node("Squeeze", ["u", "ax0"], ["s"]),
             node("Flatten", ["s"], ["f"], axis=1),
             node("Identity", ["f"], ["i"]), node("Slice", ["i", "st", "en"], ["sl"]),
             node("Gather", ["sl", "idx"], ["g"], axis=1),
             node("Concat", ["g", "g"], ["y"], axis=0)]
    inits = {"shape": np.array([2, 12], np.int64), "ax0": np.array([0], np.int64),
             "st": np.array([1], np.int64), "en": np.array([9], np.int64),
             "idx": np.array([0, 3, 5], np.int64)}
    m, feeds = model(nodes, [("x", x)], [("y", I8)], inits, opset=13)
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("why, build", [
    ("must be a build-time constant", lambda: _runtime_scale()),
    ("int16 is not supported", lambda: _int16_output()),
])
def test_clear_errors(why, build):
    with pytest.raises(rvvkit.RvvkitError, match=why):
        rvvkit.build(build())


def _runtime_scale():
    x = helper.make_tensor_value_info("x", TP.FLOAT, (3,))
    s = helper.make_tensor_value_info("s", TP.FLOAT, ())
    y = helper.make_tensor_value_info("y", TP.UINT8, None)
    return make_model([node("QuantizeLinear", ["x", "s"], ["y"])], [x, s], [y])


def _int16_output():
    x = helper.make_tensor_value_info("x", TP.FLOAT, (3,))
    y = helper.make_tensor_value_info("y", TP.INT16, None)
    return make_model([node("QuantizeLinear", ["x", "s", "z"], ["y"])], [x], [y],
                      {"s": F32(0.1), "z": np.int16(0)})
