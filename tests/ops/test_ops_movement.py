"""Operator cases: data movement on any dtype (Slice, Split, Expand, Tile, Pad, DepthToSpace,
SpaceToDepth, Trilu, OneHot, Range, Transpose/Concat of non-float data) and Resize/Upsample,
each a tiny model run on the sampled executors (`op_executor`) and compared with onnxruntime
(integers and bools exactly)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import assert_matches, make_model, rand

node = helper.make_node
ONNX_TYPE = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64,
             "int32": TensorProto.INT32, "bool": TensorProto.BOOL, "uint8": TensorProto.UINT8,
             "int8": TensorProto.INT8}


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rand(*shape, seed=seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(-100, 100, shape).astype(dtype)


def vi(name, dtype, shape=None):
    return helper.make_tensor_value_info(name, ONNX_TYPE[dtype], shape)


def check(on, nodes, x_shape, dtype="float32", inits=None, opset=13, outputs=("y",),
          out_dtype=None):
    m = make_model(nodes, [vi("x", dtype, list(x_shape))],
                   [vi(o, out_dtype or dtype) for o in outputs], inits, opset=opset)
    assert_matches(m, {"x": data(x_shape, dtype)}, on=on)


def i64(*v):
    return np.asarray(v, np.int64)


SLICE_CASES = [
    # id, dtype, x shape, starts, ends, axes, steps
    ("basic", "float32", (4, 6, 5), (1, 2), (3, 5), (0, 2), None),
    ("negative_steps", "float32", (3, 5, 7), (2, -1, 0), (-9, -100, 1000), (0, 1, 2), (-1, -2, 3)),
    ("clamped_ends_int64", "int64", (5, 9), (-3, 1), (2 ** 62, 2 ** 62), None, (1, 4)),
    ("negative_axes_bool", "bool", (2, 3, 8), (1,), (7,), (-1,), (2,)),
    ("empty", "float32", (4, 5), (3,), (1,), (0,), None),
]


@pytest.mark.parametrize("dtype, x_shape, starts, ends, axes, steps",
                         [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES])
def test_slice(dtype, x_shape, starts, ends, axes, steps, op_executor):
    inits = {"s": i64(*starts), "e": i64(*ends)}
    ins = ["x", "s", "e"]
    if axes is not None:
        inits["a"], ins = i64(*axes), ins + ["a"]
    elif steps is not None:
        ins.append("")
    if steps is not None:
        inits["st"], ins = i64(*steps), ins + ["st"]
    check(op_executor, [node("Slice", ins, ["y"])], x_shape, dtype, inits)


def test_slice_opset9_attrs(op_executor):
    check(op_executor, [node("Slice", ["x"], ["y"], starts=[1, -4], ends=[100, -1],
                             axes=[1, 2])], (2, 4, 6), opset=9)


SPLIT_CASES = [
    ("opset13_input_int64", "int64", 13, (3, 4, 5), 1, (1, 3), 2),
    ("opset18_num_outputs", "float32", 18, (2, 7), 1, None, 3),
    ("opset11_equal_bool", "bool", 11, (6, 2), 0, None, 3),
]


@pytest.mark.parametrize("dtype, opset, x_shape, axis, sizes, n", [c[1:] for c in SPLIT_CASES],
                         ids=[c[0] for c in SPLIT_CASES])
def test_split(dtype, opset, x_shape, axis, sizes, n, op_executor):
    outs = [f"y{j}" for j in range(n)]
    attrs, ins, inits = {"axis": axis}, ["x"], None
    if sizes is not None:
        ins, inits = ["x", "sp"], {"sp": i64(*sizes)}
    elif opset >= 18:
        attrs["num_outputs"] = n
    check(op_executor, [node("Split", ins, outs, **attrs)], x_shape, dtype, inits, opset,
          outputs=outs)


@pytest.mark.parametrize("dtype, x_shape, shape", [
    ("float32", (3, 1, 5), (2, 3, 4, 5)),
    ("bool", (4, 1), (1, 3)),
    ("int64", (1, 6), (5, 1)),
], ids=["float_4d", "bool_bidirectional", "int64"])
def test_expand(dtype, x_shape, shape, op_executor):
    check(op_executor, [node("Expand", ["x", "s"], ["y"])], x_shape, dtype, {"s": i64(*shape)})


@pytest.mark.parametrize("dtype, x_shape, reps", [
    ("float32", (2, 3, 4), (1, 2, 3)),
    ("int64", (3, 1), (2, 5)),
    ("uint8", (2, 5), (3, 1)),
], ids=["float", "int64", "uint8"])
def test_tile(dtype, x_shape, reps, op_executor):
    check(op_executor, [node("Tile", ["x", "r"], ["y"])], x_shape, dtype, {"r": i64(*reps)})


PAD_CASES = [
    # id, mode, dtype, x shape, pads, value, axes, opset
    ("constant_value_crop", "constant", "float32", (2, 3, 4), (0, 1, -1, 1, 2, 1), 1.5, None, 13),
    ("constant_int64_axes", "constant", "int64", (3, 4), (2, 1), 7, (1,), 18),
    ("reflect", "reflect", "float32", (1, 2, 4, 5), (0, 0, 2, 3, 0, 0, 3, 1), None, None, 13),
    ("edge_int32", "edge", "int32", (2, 3, 4), (1, 0, 2, 2, 3, 0), None, None, 13),
    ("wrap", "wrap", "float32", (2, 3, 4), (0, 2, 3, 1, 1, 5), None, None, 19),
    ("opset2_attr", "constant", "float32", (2, 3), (1, 0, 0, 2), -2.0, None, 7),
]


@pytest.mark.parametrize("mode, dtype, x_shape, pads, value, axes, opset",
                         [c[1:] for c in PAD_CASES], ids=[c[0] for c in PAD_CASES])
def test_pad(mode, dtype, x_shape, pads, value, axes, opset, op_executor):
    if opset < 11:
        n = node("Pad", ["x"], ["y"], mode=mode, pads=list(pads), value=value)
        return check(op_executor, [n], x_shape, dtype, None, opset)
    ins, inits = ["x", "p"], {"p": i64(*pads)}
    if value is not None or axes is not None:
        ins.append("v" if value is not None else "")
        if value is not None:
            inits["v"] = np.asarray(value, dtype)
    if axes is not None:
        ins, inits["a"] = ins + ["a"], i64(*axes)
    check(op_executor, [node("Pad", ins, ["y"], mode=mode)], x_shape, dtype, inits, opset)


@pytest.mark.parametrize("op, attrs, dtype, x_shape", [
    ("DepthToSpace", {"blocksize": 2, "mode": "DCR"}, "float32", (2, 8, 3, 2)),
    ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, "uint8", (1, 12, 2, 3)),
    ("SpaceToDepth", {"blocksize": 3}, "float32", (1, 2, 6, 3)),
], ids=["d2s_dcr", "d2s_crd_uint8", "s2d"])
def test_depth_space(op, attrs, dtype, x_shape, op_executor):
    check(op_executor, [node(op, ["x"], ["y"], **attrs)], x_shape, dtype)


@pytest.mark.parametrize("upper, k, dtype, x_shape", [
    (1, 1, "float32", (4, 5)), (0, -1, "int64", (2, 3, 5, 4)), (1, -2, "bool", (6, 3)),
], ids=["upper_k1", "lower_batched_int64", "upper_neg_bool"])
def test_trilu(upper, k, dtype, x_shape, op_executor):
    check(op_executor, [node("Trilu", ["x", "k"], ["y"], upper=upper)], x_shape, dtype,
          {"k": i64(k)}, opset=14)


def test_onehot(op_executor):
    m = make_model([node("OneHot", ["i", "d", "v"], ["y"], axis=1)], [vi("i", "int64", [2, 3])],
                   [vi("y", "float32")], {"d": i64(5), "v": np.asarray([-1, 3], np.float32)},
                   opset=11)
    assert_matches(m, {"i": i64([0, 4, -1], [2, -5, 7])}, on=op_executor)


def test_range_folds(op_executor):
    nodes = [node("Range", ["a", "b", "c"], ["r"]), node("Unsqueeze", ["r"], ["u"], axes=[0]),
             node("Concat", ["x", "u"], ["y"], axis=0)]
    check(op_executor, nodes, (2, 4), "int64",
          {"a": np.int64(3), "b": np.int64(-5), "c": np.int64(-2)}, opset=11)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_transpose_concat_typed(dtype, op_executor):
    nodes = [node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             node("Concat", ["t", "c"], ["y"], axis=1)]
    check(op_executor, nodes, (2, 3, 5), dtype, {"c": data((5, 1, 3), dtype, seed=4)})


def test_concat_in_place_int64(op_executor):
    """Computed int64 slices are written straight into the concat's buffer (no kernel)."""
    nodes = [node("Slice", ["x", "s", "e", "a", "st"], ["r"]),
             node("Tile", ["x", "rep"], ["t"]), node("Concat", ["r", "t"], ["c"], axis=0),
             node("Transpose", ["c"], ["y"])]
    inits = {"s": i64(-1), "e": i64(-100), "a": i64(0), "st": i64(-1), "rep": i64(2, 1)}
    m = make_model(nodes, [vi("x", "int64", [3, 5])], [vi("y", "int64")], inits)
    art = rvvkit.build(m)
    assert [s["op"] for s in art.meta["plan"]] == ["Slice", "Tile", "Transpose"]
    assert_matches(m, {"x": data((3, 5), "int64")}, artifact=art, on=op_executor)


RESIZE_CASES = [
    # id, opset, x shape, attrs, scales, sizes
    ("nearest_half_pixel_floor", 13, (1, 2, 3, 4), {"nearest_mode": "round_prefer_floor"},
     (1, 1, 2.5, 1.5), None),
    ("nearest_ceil_align", 13, (1, 1, 5, 4), {"nearest_mode": "ceil",
     "coordinate_transformation_mode": "align_corners"}, None, (1, 1, 3, 7)),
    ("nearest_prefer_ceil_symmetric", 19, (2, 1, 4, 4), {"nearest_mode": "round_prefer_ceil",
     "coordinate_transformation_mode": "half_pixel_symmetric"}, (1, 1, 0.5, 1.75), None),
    ("nearest_floor_asym_uint8", 13, (1, 3, 2, 3), {"nearest_mode": "floor",
     "coordinate_transformation_mode": "asymmetric"}, (1, 1, 3, 2), None),
    ("linear_half_pixel", 13, (1, 2, 4, 5), {"mode": "linear"}, (1, 1, 2, 1.5), None),
    ("linear_pytorch_down", 13, (1, 2, 6, 5), {"mode": "linear",
     "coordinate_transformation_mode": "pytorch_half_pixel"}, None, (1, 2, 3, 1)),
    ("linear_align_corners", 11, (2, 3, 3, 4), {"mode": "linear",
     "coordinate_transformation_mode": "align_corners"}, None, (2, 3, 7, 5)),
    ("linear_1d_asymmetric", 13, (3, 6), {"mode": "linear",
     "coordinate_transformation_mode": "asymmetric"}, (1, 1.5), None),
    ("cubic_exclude_outside", 13, (1, 1, 4, 5), {"mode": "cubic", "exclude_outside": 1,
     "cubic_coeff_a": -0.5}, (1, 1, 1.5, 2), None),
    ("linear_axes_opset18", 18, (1, 2, 4, 4), {"mode": "linear", "axes": [2, 3]}, None, (6, 3)),
    ("resize10_nearest", 10, (1, 2, 3, 3), {}, (1, 1, 2, 3), None),
    ("linear_tf_crop_extrapolate", 13, (1, 1, 4, 5), {"mode": "linear",
     "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 9.0},
     None, (1, 1, 3, 4)),
]


@pytest.mark.parametrize("case", RESIZE_CASES, ids=[c[0] for c in RESIZE_CASES])
def test_resize(case, op_executor):
    name, opset, x_shape, attrs, scales, sizes = case
    dtype = "uint8" if name.endswith("uint8") else "float32"
    inits = {}
    if opset == 10:
        ins, inits["sc"] = ["x", "sc"], np.asarray(scales, np.float32)
    elif sizes is None:
        ins, inits["sc"] = ["x", "", "sc"], np.asarray(scales, np.float32)
    else:
        ins, inits["sz"] = ["x", "", "", "sz"], i64(*sizes)
    if "tf_crop" in name:
        ins[1], inits["roi"] = "roi", np.asarray([0, 0, 0.4, -0.3, 1, 1, 1.2, 0.7], np.float32)
    if opset == 11:   # roi and scales are required inputs in opset 11
        ins[1:3] = ["roi", "sc"]
        inits["roi"] = np.zeros(0, np.float32)
        inits.setdefault("sc", np.zeros(0, np.float32))
    check(op_executor, [node("Resize", ins, ["y"], **attrs)], x_shape, dtype, inits, opset)


@pytest.mark.parametrize("opset, mode", [(7, "nearest"), (9, "linear")])
def test_upsample(opset, mode, op_executor):
    scales = [1.0, 1.0, 2.0, 3.0]
    if opset == 7:
        n, inits = node("Upsample", ["x"], ["y"], mode=mode, scales=scales), None
    else:
        n, inits = node("Upsample", ["x", "s"], ["y"], mode=mode), \
            {"s": np.asarray(scales, np.float32)}
    check(op_executor, [n], (1, 2, 3, 2), "float32", inits, opset)
