"""Operator cases: index ops with run-time indices (Gather, GatherElements, GatherND,
ScatterND, ScatterElements) on float, int64 and bool data with int64/int32 indices, negative
indices, and an index out of range, which every executor reports as an ExecutionError naming
the node (the kernel's data status), compared with onnxruntime otherwise; GatherND and
ScatterND index tuples on constants too, which fold at build time (swin_t's attention mask)."""
import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import assert_matches, make_model
from rvvkit.errors import ExecutionError
from test_ops_movement import data, vi

node = helper.make_node


def i64(*v):
    return np.asarray(v, np.int64)


def run(on, op, x, ind, attrs=None, upd=None, const_data=False, opset=16):
    """One `op` node on data x and run-time indices ind (and updates upd)."""
    dt, it = x.dtype.name, ind.dtype.name
    ins, inits = [vi("ind", it, list(ind.shape))], {}
    feeds = {"ind": ind}
    if const_data:
        inits["x"] = x
    else:
        ins.insert(0, vi("x", dt, list(x.shape)))
        feeds["x"] = x
    names = ["x", "ind"]
    if upd is not None:
        ins.append(vi("u", upd.dtype.name, list(upd.shape)))
        feeds["u"] = upd
        names.append("u")
    m = make_model([node(op, names, ["y"], **(attrs or {}))], ins, [vi("y", dt)], inits,
                   opset=opset)
    return m, feeds


GATHER_CASES = [
    # id, data, indices, axis, constant data
    ("embedding_rows", data((50, 16), "float32"), i64([1, 49, -1], [0, 3, 3]), 0, True),
    ("axis1_int32_negative", data((3, 7, 2), "float32"), np.asarray([-7, 6, 0, -1], np.int32),
     1, False),
    ("int64_data_scalar_index", data((4, 5), "int64"), np.asarray(2, np.int64), 0, False),
    ("bool_last_axis", data((2, 3, 6), "bool"), i64([5, 0], [-2, 1]), -1, False),
]


@pytest.mark.parametrize("x, ind, axis, const", [c[1:] for c in GATHER_CASES],
                         ids=[c[0] for c in GATHER_CASES])
def test_gather(x, ind, axis, const, op_executor):
    m, feeds = run(op_executor, "Gather", x, ind, {"axis": axis}, const_data=const)
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("x, ind, axis", [
    (data((3, 4), "float32"), i64([0, 2, -1], [1, -3, 2], [2, 2, 0]), 0),
    (data((2, 5, 3), "int64"), np.asarray([[[4, -1, 0]], [[-5, 2, 2]]], np.int32), 1),
], ids=["axis0_negative", "int64_axis1_int32_idx"])
def test_gather_elements(x, ind, axis, op_executor):
    m, feeds = run(op_executor, "GatherElements", x, ind, {"axis": axis})
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("x, ind, batch_dims", [
    (data((3, 4, 5), "float32"), i64([[0, 1], [2, -1]], [[-3, 0], [1, 3]]), 0),
    (data((2, 3, 4), "int64"), i64([[1], [-1]], [[0], [2]]), 1),
    (data((2, 5), "bool"), i64([1, 4], [0, -5], [1, 0]), 0),
], ids=["pairs_rows", "batch_dims1_int64", "full_index_bool"])
def test_gather_nd(x, ind, batch_dims, op_executor):
    m, feeds = run(op_executor, "GatherND", x, ind, {"batch_dims": batch_dims})
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("reduction, dtype", [("none", "float32"), ("add", "float32"),
                                              ("mul", "int64")])
def test_scatter_nd(reduction, dtype, op_executor):
    x = data((4, 3, 2), dtype)
    ind = i64([[1], [-1]], [[0], [1]]) if reduction != "none" else i64([[1, 2]], [[-4, 0]])
    upd = data(ind.shape[:-1] + x.shape[ind.shape[-1]:], dtype, seed=5)
    m, feeds = run(op_executor, "ScatterND", x, ind, {"reduction": reduction}, upd)
    assert_matches(m, feeds, on=op_executor)


def block(rows, cols):
    """Index tuples of the block data[rows][:, cols], shape (len(rows), len(cols), 2): what
    torch's legacy ONNX export writes for a slice assignment `mask[r0:r1, c0:c1] = v`."""
    r, c = np.meshgrid(rows, cols, indexing="ij")
    return np.stack([r, c], -1).astype(np.int64)


# swin_t's shifted-window attention mask: a zero (H, W) map whose regions a chain of ScatterNDs
# with (h, w, 2) index blocks sets to 0, 1, 2, ... (here with negative indices too)
MASK_BLOCKS = [(range(0, 4), range(0, 4), 0.0), (range(0, 4), range(-3, 0), 1.0),
               (range(4, 7), range(0, 4), 2.0), (range(-3, 0), range(4, 7), 3.0)]


@pytest.mark.parametrize("const_map", [True, False], ids=["folded", "run_time_map"])
def test_scatter_nd_slice_assignment(const_map, op_executor):
    """On a constant map the chain folds at build time (ScatterND's numpy form, whose
    per-axis index check once took only one axis), then meets a run-time input; on a run-time
    map its kernels run."""
    nodes, inits, src = [], {}, "zeros" if const_map else "x"
    if const_map:
        inits["zeros"] = np.zeros((7, 7), np.float32)
    for k, (rows, cols, v) in enumerate(MASK_BLOCKS):
        idx = block(rows, cols)
        inits[f"i{k}"], inits[f"u{k}"] = idx, np.full(idx.shape[:-1], v, np.float32)
        nodes.append(node("ScatterND", [src, f"i{k}", f"u{k}"], [f"m{k}"]))
        src = f"m{k}"
    nodes.append(node("Add", [src, "x"], ["y"]))
    m = make_model(nodes, [vi("x", "float32", [7, 7])], [vi("y", "float32")], inits,
                   opset=16)
    assert_matches(m, {"x": data((7, 7), "float32")}, on=op_executor)


def test_gather_nd_folds_index_tuples(op_executor):
    """GatherND of constants with a (3, 2, 2) block of index tuples, negative ones too, folds
    at build time."""
    idx = block(range(-2, 1), range(1, 3))
    m = make_model([node("GatherND", ["c", "i"], ["g"]), node("Mul", ["g", "x"], ["y"])],
                   [vi("x", "float32", [3, 2])], [vi("y", "float32")],
                   {"c": data((4, 5), "float32", seed=3), "i": idx})
    assert_matches(m, {"x": data((3, 2), "float32")}, on=op_executor)


@pytest.mark.parametrize("reduction, dtype, axis", [
    ("none", "float32", 1), ("add", "float32", 0), ("max", "int64", -1), ("min", "float32", 1),
])
def test_scatter_elements(reduction, dtype, axis, op_executor):
    x = data((3, 5), dtype)
    ind = i64([1, -1, 0], [4, 4, 2]) if axis != 0 else i64([2, 0, 1], [2, 2, 0])
    if reduction == "none":
        ind = i64([1, -1, 0], [4, 3, 2])   # no duplicates: their order is unspecified
    upd = data(ind.shape, dtype, seed=7)
    m, feeds = run(op_executor, "ScatterElements", x, ind,
                   {"axis": axis, "reduction": reduction}, upd, opset=18)
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("op, bad", [("Gather", i64(0, 5)), ("GatherND", i64([0, 7])),
                                     ("ScatterElements", i64([0, -6]))])
def test_index_out_of_range_is_reported(op, bad, op_executor):
    x = data((2, 5), "float32")
    if op == "ScatterElements":
        m, feeds = run(op_executor, op, x, bad.reshape(1, 2), {"axis": 1},
                       upd=data((1, 2), "float32"))
    else:
        m, feeds = run(op_executor, op, x, bad, {"axis": 1} if op == "Gather" else {})
    art = rvvkit.build(m)
    with pytest.raises(ExecutionError, match=f"{op.lower()}_0"):
        op_executor.run(art, feeds)
