"""rvvkit.QDQAdd (rvvkit/ops/quant/island.py): DQ(a), DQ(b) -> Add/Sum [-> Relu] -> Q, the float
joins onnxruntime keeps unfused (resnet50's residual Sum and Relu in QOperator models), run as
one integer kernel on every sampled executor and equal to onnxruntime's integers: every product
and the sum rounded on its own, as onnxruntime's separate float nodes round them."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper

import rvvkit
from conftest import assert_matches, make_model

node = helper.make_node
F32, U8, I8 = np.float32, np.uint8, np.int8
CODE = {F32: TP.FLOAT, U8: TP.UINT8, I8: TP.INT8}


def ints(dt, shape, seed):
    info = np.iinfo(dt)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True
                                                ).astype(dt)


def island(dt, op="Sum", relu=True, out_dt=None, shape=(4, 16, 37), b_shape=None,
           tap=False, params=None):
    """DQ(a) op DQ(b) [-> Relu] -> Q; `tap`: DQ(a) is also a graph output (a second reader);
    `params` (a, b): the operands and (sa, za, sb, zb, sy, zy)."""
    out_dt = out_dt or dt
    a, b = ints(dt, shape, 1), ints(dt, b_shape or shape, 2)
    sa, za, sb, zb, sy, zy = 0.0473, ints(dt, (), 3), 0.0291, ints(dt, (), 4), 0.0613, \
        ints(out_dt, (), 5)
    if params:
        (a, b), (sa, za, sb, zb, sy, zy) = params
    inits = {"sa": F32(sa), "za": dt(za), "sb": F32(sb), "zb": dt(zb), "sy": F32(sy),
             "zy": out_dt(zy)}
    nodes = [node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
             node("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
             node(op, ["fa", "fb"], ["s"])]
    if relu:
        nodes.append(node("Relu", ["s"], ["r"]))
    nodes.append(node("QuantizeLinear", ["r" if relu else "s", "sy", "zy"], ["y"]))
    outs = [helper.make_tensor_value_info("y", CODE[out_dt], None)]
    if tap:
        outs.append(helper.make_tensor_value_info("fa", TP.FLOAT, None))
    ins = [helper.make_tensor_value_info(n, CODE[dt], v.shape) for n, v in (("a", a), ("b", b))]
    return make_model(nodes, ins, outs, inits, opset=13), {"a": a, "b": b}


def residual_chain(dt=I8):
    """resnet50's identity blocks: r1 = Relu(DQ(a) + DQ(b)) is quantized and also read in float
    by the next join, r2 = Relu(DQ(c) + r1); and a float graph input joined with DQ(a)."""
    a, b, c = (ints(dt, (2, 8, 9, 11), k) for k in (1, 2, 3))
    x = (np.random.default_rng(4).standard_normal((2, 8, 9, 11)) * 3).astype(F32)
    inits = {"sa": F32(0.0473), "za": dt(2), "sb": F32(0.0291), "zb": dt(5),
             "sc": F32(0.0377), "zc": dt(7), "sy1": F32(0.0613), "zy1": dt(1),
             "sy2": F32(0.0821), "zy2": dt(3)}
    nodes = [node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
             node("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
             node("DequantizeLinear", ["c", "sc", "zc"], ["fc"]),
             node("Sum", ["fa", "fb"], ["s1"]), node("Relu", ["s1"], ["r1"]),
             node("QuantizeLinear", ["r1", "sy1", "zy1"], ["y1"]),
             node("Sum", ["fc", "r1"], ["s2"]), node("Relu", ["s2"], ["r2"]),
             node("QuantizeLinear", ["r2", "sy2", "zy2"], ["y2"]),
             node("Add", ["x", "fa"], ["s3"]),
             node("QuantizeLinear", ["s3", "sy2", "zy2"], ["y3"])]
    outs = [helper.make_tensor_value_info(n, CODE[dt], None) for n in ("y1", "y2", "y3")]
    outs.append(helper.make_tensor_value_info("s3", TP.FLOAT, None))
    ins = [helper.make_tensor_value_info(n, CODE[v.dtype.type], v.shape)
           for n, v in (("a", a), ("b", b), ("c", c), ("x", x))]
    return make_model(nodes, ins, outs, inits, opset=13), {"a": a, "b": b, "c": c, "x": x}


def test_residual_stream_stays_float_between_joins(op_executor):
    m, feeds = residual_chain()
    ops = [s["op"] for s in rvvkit.build(m).meta["plan"]]
    assert ops.count("rvvkit.QDQAdd") == 3 and "Sum" not in ops and "Add" not in ops, ops
    assert_matches(m, feeds, on=op_executor)


# Every pair of int8 values, with scales found by search where contracting either product into
# the sum (one fma) changes 5 of the 65536 outputs: the case that fails if a compiler fuses.
ALL_PAIRS = ((np.repeat(np.arange(-128, 128), 256).astype(I8).reshape(256, 256),
              np.tile(np.arange(-128, 128), 256).astype(I8).reshape(256, 256)),
             (0.06105365976691246, 3, 0.03602986037731171, -7, 0.03585067763924599, 0))

CASES = {
    "all_pairs_no_fma": (lambda: island(I8, shape=(256, 256), params=ALL_PAIRS), True),
    "sum_relu_int8": (lambda: island(I8), True),
    "add_relu_uint8": (lambda: island(U8, "Add"), True),
    "sum_int8_to_uint8": (lambda: island(I8, relu=False, out_dt=U8), True),
    "sum_uint8_odd_size": (lambda: island(U8, shape=(3, 5, 7)), True),
    "dq_with_a_second_reader": (lambda: island(I8, tap=True), True),
    # parts of BLOCK elements, the last one short, the float stream kept too
    "split_blocks_uint8_kept": (lambda: island(U8, shape=(3, 16, 1001), tap=True), True),
    # broadcasting is not an island: it stays float with Q/DQ as ops, and agrees the same way
    "broadcast_stays_float": (lambda: island(I8, b_shape=(1, 16, 1)), False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_island_equals_onnxruntime(case, op_executor):
    build, fused = CASES[case]
    m, feeds = build()
    ops = [s["op"] for s in rvvkit.build(m).meta["plan"]]
    assert ("rvvkit.QDQAdd" in ops) == fused, ops
    if fused:
        assert not {"Sum", "Add", "Relu", "QuantizeLinear"} & set(ops), ops
    assert_matches(m, feeds, on=op_executor)
