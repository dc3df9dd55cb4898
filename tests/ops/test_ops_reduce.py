"""Operator cases: Reduce* (attribute and input axes, keepdims, empty axes, strided axes,
integer tensors), ArgMax/ArgMin, TopK, CumSum, Hardmax, long Softmax rows; compared with
onnxruntime on every sampled executor. Shapes are awkward on purpose: primes, rows longer than
one LMUL-8 register group at VLEN 512, reduced axes split by kept ones."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import assert_matches, make_model, rand

node = helper.make_node
TYPES = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64,
         np.int32: TensorProto.INT32}


def _data(shape, dtype, seed=0, positive=False):
    if dtype is np.float32:
        x = rand(*shape, seed=seed)
        return np.abs(x) + 0.5 if positive else x
    return np.random.default_rng(seed).integers(-5, 6, shape).astype(dtype)


def _run(op_executor, nodes, x, inits=None, opset=13, outputs=("y",), out_types=()):
    """One model reading x; outputs typed like x unless `out_types` says otherwise."""
    vi = helper.make_tensor_value_info("x", TYPES[x.dtype.type], list(x.shape))
    types = list(out_types) or [x.dtype.type] * len(outputs)
    outs = [helper.make_tensor_value_info(o, TYPES[t], None) for o, t in zip(outputs, types)]
    m = make_model(nodes, [vi], outs, inits, opset=opset)
    assert_matches(m, {"x": x}, on=op_executor)


REDUCE_CASES = [
    # id, op, shape, axes (None: not given), keepdims, opset, dtype
    ("sum_last_in13", "ReduceSum", (3, 5, 7), [-1], 1, 13, np.float32),
    ("sum_mid_attr11", "ReduceSum", (3, 5, 7), [1], 0, 11, np.float32),
    ("sum_all_default", "ReduceSum", (4, 6), None, 0, 13, np.float32),
    ("sum_long_row", "ReduceSum", (2, 1031), [1], 1, 13, np.float32),
    ("sum_split_axes18", "ReduceSum", (2, 3, 5, 7), [0, 2], 1, 18, np.float32),
    ("mean_gap18", "ReduceMean", (2, 8, 5, 7), [2, 3], 1, 18, np.float32),
    ("mean_first_attr", "ReduceMean", (5, 3, 4), [0], 0, 13, np.float32),
    ("max_split18", "ReduceMax", (3, 4, 5, 6), [1, 3], 0, 18, np.float32),
    ("max_inner_long", "ReduceMax", (3, 4, 301), [1], 1, 13, np.float32),
    ("min_last", "ReduceMin", (6, 37), [1], 1, 13, np.float32),
    ("prod_mid", "ReduceProd", (2, 5, 3), [1], 1, 13, np.float32),
    ("l1_two_last18", "ReduceL1", (3, 4, 11), [-1, -2], 0, 18, np.float32),
    ("l2_first", "ReduceL2", (7, 13), [0], 1, 13, np.float32),
    ("l2_long_row", "ReduceL2", (3, 700), [1], 0, 13, np.float32),
    ("logsum_row", "ReduceLogSum", (3, 9), [1], 1, 13, np.float32),
    ("lse_split18", "ReduceLogSumExp", (4, 5, 6), [0, 2], 1, 18, np.float32),
    ("lse_rows", "ReduceLogSumExp", (5, 67), [1], 0, 13, np.float32),
    ("lse_inner", "ReduceLogSumExp", (3, 6, 10), [1], 0, 13, np.float32),
    ("sumsquare_inner18", "ReduceSumSquare", (2, 3, 129), [1], 1, 18, np.float32),
    ("sum_int64", "ReduceSum", (3, 4), [1], 0, 13, np.int64),
    ("max_int32_split", "ReduceMax", (3, 4, 5), [0, 2], 1, 13, np.int32),
    ("min_int64_all18", "ReduceMin", (3, 5), None, 1, 18, np.int64),
]


@pytest.mark.parametrize("op, shape, axes, keep, opset, dtype",
                         [c[1:] for c in REDUCE_CASES], ids=[c[0] for c in REDUCE_CASES])
def test_reduce(op, shape, axes, keep, opset, dtype, op_executor):
    from_input = opset >= (13 if op == "ReduceSum" else 18)
    inits, ins, attrs = {}, ["x"], dict(keepdims=keep)
    if axes is not None:
        if from_input:
            inits["axes"], ins = np.array(axes, np.int64), ["x", "axes"]
        else:
            attrs["axes"] = axes
    x = _data(shape, dtype, positive=op == "ReduceLogSum")
    _run(op_executor, [node(op, ins, ["y"], **attrs)], x, inits, opset)


def test_reduce_noop_empty_axes(op_executor):
    x = rand(3, 4)
    _run(op_executor, [node("ReduceSumSquare", ["x"], ["y"], noop_with_empty_axes=1)], x,
         opset=18)


ARG_CASES = [
    # id, op, shape, axis, keepdims, select_last_index, dtype
    ("argmax_last", "ArgMax", (4, 5, 7), -1, 1, 0, np.float32),
    ("argmin_mid_nokeep", "ArgMin", (4, 5, 7), 1, 0, 0, np.float32),
    ("argmax_ties_last", "ArgMax", (6, 9), 1, 1, 1, np.int64),
    ("argmin_ties_first", "ArgMin", (6, 9), 0, 0, 0, np.int32),
]


@pytest.mark.parametrize("op, shape, axis, keep, last, dtype", [c[1:] for c in ARG_CASES],
                         ids=[c[0] for c in ARG_CASES])
def test_argmax(op, shape, axis, keep, last, dtype, op_executor):
    attrs = dict(axis=axis, keepdims=keep, select_last_index=last)
    _run(op_executor, [node(op, ["x"], ["y"], **attrs)], _data(shape, dtype), opset=13,
         out_types=[np.int64])


TOPK_CASES = [
    # id, shape, k, axis, largest, dtype
    ("largest_last", (5, 13), 4, -1, 1, np.float32),
    ("smallest_first", (7, 3, 4), 3, 0, 0, np.float32),
    ("ties_int64_all", (3, 8), 8, 1, 1, np.int64),
]


@pytest.mark.parametrize("shape, k, axis, largest, dtype", [c[1:] for c in TOPK_CASES],
                         ids=[c[0] for c in TOPK_CASES])
def test_topk(shape, k, axis, largest, dtype, op_executor):
    n = node("TopK", ["x", "k"], ["values", "indices"], axis=axis, largest=largest, sorted=1)
    _run(op_executor, [n], _data(shape, dtype), {"k": np.array([k], np.int64)}, 13,
         outputs=("values", "indices"), out_types=[dtype, np.int64])


CUMSUM_CASES = [
    # id, shape, axis, exclusive, reverse, dtype
    ("axis0", (5, 3), 0, 0, 0, np.float32),
    ("mid_exclusive", (3, 4, 5), 1, 1, 0, np.float32),
    ("last_reverse", (3, 4, 5), -1, 0, 1, np.float32),
    ("int64_excl_rev", (2, 7, 3), 1, 1, 1, np.int64),
]


@pytest.mark.parametrize("shape, axis, excl, rev, dtype", [c[1:] for c in CUMSUM_CASES],
                         ids=[c[0] for c in CUMSUM_CASES])
def test_cumsum(shape, axis, excl, rev, dtype, op_executor):
    n = node("CumSum", ["x", "axis"], ["y"], exclusive=excl, reverse=rev)
    _run(op_executor, [n], _data(shape, dtype), {"axis": np.array(axis, np.int32)}, 14)


@pytest.mark.parametrize("axis, opset", [(-1, 13), (1, 11)], ids=["axis_last13", "coerce11"])
def test_hardmax(axis, opset, op_executor):
    _run(op_executor, [node("Hardmax", ["x"], ["y"], axis=axis)], rand(3, 4, 5), opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_long_rows(op, op_executor):
    """Rows longer than one LMUL-4 register group at VLEN 512 (the vector exp's main loop)."""
    _run(op_executor, [node(op, ["x"], ["y"], axis=-1)], rand(3, 197, scale=4), opset=13)
