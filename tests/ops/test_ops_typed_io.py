"""Graph inputs and outputs of every element type rvvkit computes with (rvvkit/dtypes.py) travel
through every executor bit-exactly: as host buffers (cffi), as .npy files through the C runner
(QEMU, boards) and as device buffers (CUDA). Typed constants travel in the weights blob. Types
outside the table (bfloat16, int16, ...) are refused at build time naming the type, except as
constants, which fold through Cast. float16 and float64 are computed as float32 and have
their own tests (test_ops_half.py)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import assert_matches, make_model

TYPES = [("float32", TensorProto.FLOAT), ("int64", TensorProto.INT64),
         ("int32", TensorProto.INT32), ("int8", TensorProto.INT8),
         ("uint8", TensorProto.UINT8), ("bool", TensorProto.BOOL),
         ("float16", TensorProto.FLOAT16), ("float64", TensorProto.DOUBLE)]


def _values(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if name in ("float32", "float16", "float64"):   # float64 travels through float32
        return rng.standard_normal(shape).astype(np.float32).astype(name)
    info = np.iinfo(name)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(name)


def _io_model():
    """Each typed input copied to an output; odd sizes (7 elements) so byte types end mid-word;
    a typed constant output needs a copy out of the weights blob."""
    shape = (1, 7)
    nodes, ins, outs = [], [], []
    for name, code in TYPES:
        ins.append(helper.make_tensor_value_info(f"x_{name}", code, shape))
        outs.append(helper.make_tensor_value_info(f"y_{name}", code, shape))
        nodes.append(helper.make_node("Identity", [f"x_{name}"], [f"y_{name}"]))
    outs.append(helper.make_tensor_value_info("k", TensorProto.INT64, (3,)))
    nodes.append(helper.make_node("Identity", ["kc"], ["k"]))
    const = np.array([-(2 ** 62), 5, 2 ** 40], np.int64)
    return make_model(nodes, ins, outs, {"kc": const}), const


def test_typed_inputs_and_outputs_are_bit_exact(executor):
    model, const = _io_model()
    art = rvvkit.build(model)
    assert [i["dtype"] for i in art.meta["inputs"]] == [n for n, _ in TYPES]
    feeds = {f"x_{n}": _values(n, (1, 7), seed=i) for i, (n, _) in enumerate(TYPES)}
    out = executor.run(art, feeds)
    for name, _ in TYPES:
        got = out[f"y_{name}"]
        assert got.dtype == np.dtype(name)
        assert np.array_equal(got.view(np.uint8), feeds[f"x_{name}"].view(np.uint8)), name
    assert out["k"].dtype == np.int64 and np.array_equal(out["k"], const)


def test_wrong_input_dtype_is_named():
    model, _ = _io_model()
    with rvvkit.load(rvvkit.build(model), on="host") as sess:
        feeds = sess.random_feeds()
        assert feeds["x_int64"].dtype == np.int64 and feeds["x_bool"].dtype == bool
        feeds["x_int64"] = feeds["x_int64"].astype(np.float32)
        with pytest.raises(rvvkit.InputError, match="x_int64.*float32, expected int64"):
            sess.run(feeds)


def test_unsupported_input_dtype_is_a_clear_build_error():
    x = helper.make_tensor_value_info("x", TensorProto.INT16, (2,))
    y = helper.make_tensor_value_info("y", TensorProto.INT16, (2,))
    with pytest.raises(rvvkit.ModelError, match="input 'x' has dtype int16"):
        rvvkit.build(make_model([helper.make_node("Identity", ["x"], ["y"])], [x], [y]))


@pytest.mark.parametrize("to, shown", [
    (TensorProto.INT16, "int16"), (TensorProto.UINT32, "uint32"),
    (TensorProto.UINT64, "uint64"), (TensorProto.BFLOAT16, "bfloat16"), (TensorProto.STRING, "string"),
    (TensorProto.INT4, "int4")])
def test_run_time_cast_to_a_type_outside_rvvkit_is_a_clear_build_error(to, shown):
    """Cast may name the other integer widths, whose constants fold at build time;
    on a run-time tensor (no C type) it is refused naming the type, not a KeyError."""
    y = helper.make_tensor_value_info("y", to, (2,))
    m = make_model([helper.make_node("Cast", ["x"], ["y"], to=to, name="the_cast")],
                   [("x", (2,))], [y])
    with pytest.raises(rvvkit.ModelError, match=rf"the_cast.*\b{shown}\b") as info:
        rvvkit.build(m)
    assert "internal error" not in str(info.value)


def test_float64_constants_fold_through_casts(op_executor):
    """A float64 initializer cast to float32 (and float32 constants through float64 and back)
    fold at build time and meet run-time data."""
    c = np.asarray([1.5, -2.25, 1e-3], np.float64)
    nodes = [helper.make_node("Cast", ["c"], ["cf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["k"], ["kd"], to=TensorProto.DOUBLE),
             helper.make_node("Cast", ["kd"], ["kf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["cf", "kf"], ["s"]),
             helper.make_node("Add", ["x", "s"], ["y"])]
    m = make_model(nodes, [("x", (3,))], ["y"], {"c": c, "k": np.asarray([4, 5, 6], np.float32)})
    assert_matches(m, {"x": _values("float32", (3,))}, on=op_executor)
