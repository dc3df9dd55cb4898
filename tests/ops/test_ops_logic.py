"""Operator cases: comparisons and logic (bool outputs), IsNaN/IsInf, Where, Cast/CastLike and
the integer index arithmetic of exported text models. One typed element-wise kernel computes
them all (rvvkit/codegen/kernels/math/logic.py); cases cover each element type, broadcasting on
either side, scalars and bools in and out. Ints and bools must match onnxruntime exactly."""
import numpy as np
import pytest
from onnx import TensorProto as TP, helper

from conftest import assert_matches, make_model, rand

node = helper.make_node
NP_OF = {TP.FLOAT: np.float32, TP.INT64: np.int64, TP.INT32: np.int32, TP.INT8: np.int8,
         TP.UINT8: np.uint8, TP.BOOL: np.bool_}


def data(elem, shape, seed=0):
    """Values of the element type: small ints with repeats (so Equal has hits), bools, floats
    with ties between the two operands of a comparison."""
    rng = np.random.default_rng(seed)
    if elem == TP.BOOL:
        return np.asarray(rng.random(shape) < 0.5)
    if elem == TP.FLOAT:
        return np.asarray(rng.integers(-3, 4, shape) / 2, np.float32)
    lo = 0 if elem == TP.UINT8 else -4
    return np.asarray(rng.integers(lo, 5, shape), NP_OF[elem])


def run(op_executor, nodes, inputs, outputs, opset=13, inits=None, feeds=None):
    """inputs: (name, elem, shape), outputs: (name, elem); feeds default to `data`."""
    vis = [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs]
    outs = [helper.make_tensor_value_info(n, e, None) for n, e in outputs]
    m = make_model(nodes, vis, outs, inits, opset=opset)
    feeds = feeds or {n: data(e, s, seed=i) for i, (n, e, s) in enumerate(inputs)}
    assert_matches(m, feeds, on=op_executor)


COMPARE_CASES = [
    # id, op, elem, a shape, b shape
    ("equal_int64_bcast", "Equal", TP.INT64, (2, 3, 4), (4,)),
    ("equal_bool", "Equal", TP.BOOL, (3, 5), (3, 1)),
    ("less_float_both_bcast", "Less", TP.FLOAT, (3, 1, 5), (1, 4, 1)),
    ("lessorequal_int32", "LessOrEqual", TP.INT32, (7, 3), (7, 3)),
    ("greater_float_scalar", "Greater", TP.FLOAT, (2, 7), ()),
    ("greaterorequal_int64", "GreaterOrEqual", TP.INT64, (1, 9), (5, 1)),
    ("equal_uint8", "Equal", TP.UINT8, (13,), (13,)),
    ("greater_int8", "Greater", TP.INT8, (2, 1, 6), (3, 6)),
]


@pytest.mark.parametrize("op, elem, sa, sb", [c[1:] for c in COMPARE_CASES],
                         ids=[c[0] for c in COMPARE_CASES])
def test_compare(op, elem, sa, sb, op_executor):
    run(op_executor, [node(op, ["a", "b"], ["y"])], [("a", elem, sa), ("b", elem, sb)],
        [("y", TP.BOOL)])


def test_and_or_xor_not(op_executor):
    nodes = [node("And", ["a", "b"], ["y0"]), node("Or", ["a", "b"], ["y1"]),
             node("Xor", ["a", "b"], ["y2"]), node("Not", ["a"], ["y3"])]
    run(op_executor, nodes, [("a", TP.BOOL, (4, 1, 6)), ("b", TP.BOOL, (3, 6))],
        [(f"y{i}", TP.BOOL) for i in range(4)])


def test_isnan_isinf(op_executor):
    nodes = [node("IsNaN", ["x"], ["y0"]), node("IsInf", ["x"], ["y1"]),
             node("IsInf", ["x"], ["y2"], detect_negative=0),
             node("IsInf", ["x"], ["y3"], detect_positive=0)]
    x = rand(3, 11)
    x.reshape(-1)[[0, 5, 9, 17, 30]] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
    run(op_executor, nodes, [("x", TP.FLOAT, (3, 11))], [(f"y{i}", TP.BOOL) for i in range(4)],
        feeds={"x": x})


WHERE_CASES = [
    # id, x/y elem, cond shape, x shape, y shape
    ("float_bcast", TP.FLOAT, (2, 1, 5), (3, 5), (1,)),
    ("int64_same", TP.INT64, (4, 6), (4, 6), (4, 6)),
    ("uint8_values", TP.UINT8, (7,), (1,), (7,)),
    ("int32_scalar_cond", TP.INT32, (), (3, 2), (2,)),
]


@pytest.mark.parametrize("elem, sc, sx, sy", [c[1:] for c in WHERE_CASES],
                         ids=[c[0] for c in WHERE_CASES])
def test_where(elem, sc, sx, sy, op_executor):
    run(op_executor, [node("Where", ["c", "x", "y"], ["out"])],
        [("c", TP.BOOL, sc), ("x", elem, sx), ("y", elem, sy)], [("out", elem)])


CAST_CASES = [
    # id, source elem, target elems: one output per target
    ("from_float", TP.FLOAT, (TP.INT64, TP.INT32, TP.INT8, TP.BOOL, TP.FLOAT)),
    ("from_int64", TP.INT64, (TP.FLOAT, TP.INT32, TP.UINT8, TP.BOOL)),
    ("from_bool", TP.BOOL, (TP.FLOAT, TP.INT64, TP.INT8)),
    ("from_uint8", TP.UINT8, (TP.FLOAT, TP.INT32, TP.INT64)),
]


@pytest.mark.parametrize("src, targets", [c[1:] for c in CAST_CASES],
                         ids=[c[0] for c in CAST_CASES])
def test_cast(src, targets, op_executor):
    nodes = [node("Cast", ["x"], [f"y{i}"], to=t) for i, t in enumerate(targets)]
    feeds = None
    if src == TP.FLOAT:      # truncation toward zero, both signs, and zeros (-> false)
        x = rand(4, 9, scale=40)
        x.reshape(-1)[:6] = [-2.7, -0.5, 0.0, 0.5, 2.5, -0.0]
        feeds = {"x": x}
    run(op_executor, nodes, [("x", src, (4, 9))], [(f"y{i}", t) for i, t in enumerate(targets)],
        feeds=feeds)


def test_castlike(op_executor):
    nodes = [node("CastLike", ["x", "like"], ["y"])]
    feeds = {"x": rand(2, 5, scale=9), "like": np.zeros((3,), np.int64)}
    run(op_executor, nodes, [("x", TP.FLOAT, (2, 5)), ("like", TP.INT64, (3,))], [("y", TP.INT64)],
        opset=15, feeds=feeds)


def test_position_ids(op_executor):
    """What exported text models do to position ids: int64 arithmetic, a mask by comparison,
    Where, Cast to float."""
    nodes = [node("Add", ["ids", "one"], ["p1"]),
             node("Mul", ["p1", "three"], ["p2"]),
             node("Sub", ["p2", "ids"], ["p3"]),
             node("Div", ["p3", "neg_two"], ["p4"]),        # truncates toward zero
             node("Greater", ["ids", "zero"], ["valid"]),
             node("Where", ["valid", "p4", "ids"], ["w"]),
             node("Neg", ["w"], ["nw"]),
             node("Cast", ["nw"], ["y"], to=TP.FLOAT),
             node("Abs", ["p4"], ["a"])]
    inits = {"one": np.array(1, np.int64), "three": np.array([3], np.int64),
             "neg_two": np.array([-2, 2, 5, -7, 1, 3, 4], np.int64),
             "zero": np.array(0, np.int64)}
    ids = np.array([[0, 1, 2, 3, 4, 5, 6], [-3, -2, -1, 7, 100, -100, 9]], np.int64)
    run(op_executor, nodes, [("ids", TP.INT64, (2, 7))],
        [("y", TP.FLOAT), ("w", TP.INT64), ("a", TP.INT64)], inits=inits,
        feeds={"ids": ids})
