"""float16 tensors: stored and moved as float16, computed as float32 (rvvkit/frontend/stored_floats.py,
rvvkit/codegen/half.py). Conversions are bit-exact against numpy on every executor (all 65,536
halves, and the float32 values where rounding to half is hard: ties, subnormals, overflow);
models with float16 inputs, weights, outputs and casts match onnxruntime within a few ulps of
half (onnxruntime computes some float16 operators in half arithmetic, rvvkit in float32)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import make_model, run_ort

F16 = TensorProto.FLOAT16


def _cast_model(n, src, dst):
    x = helper.make_tensor_value_info("x", src, (n,))
    y = helper.make_tensor_value_info("y", dst, (n,))
    return make_model([helper.make_node("Cast", ["x"], ["y"], to=dst)], [x], [y])


def _same_bits_or_nan(got, want):
    """Equal bit patterns; a NaN only needs to stay a NaN of the same sign (payloads differ
    between numpy and C conversions, as IEEE allows)."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(np.signbit(got[nan]), np.signbit(want[nan]))
    width = np.uint16 if want.dtype == np.float16 else np.uint32
    bad = np.flatnonzero(got[~nan].view(width) != want[~nan].view(width))
    assert bad.size == 0, f"{bad.size} differ, first {got[~nan][bad[0]]!r} != " \
        f"{want[~nan][bad[0]]!r}"


def _hard_floats():
    """float32 values around every half (below, at, above), the midpoints between neighbouring
    halves (ties to even), and the edges: subnormal halves, 2^-25, 65504..65520, inf, NaN."""
    halves = np.arange(0, 0x7c00, dtype=np.uint16).view(np.float16).astype(np.float32)
    up = np.nextafter(halves, np.float32(np.inf))
    mids = (halves[:-1].astype(np.float64) + halves[1:]) / 2
    edges = np.asarray([2.0 ** -25, np.nextafter(2.0 ** -25, 1), 2.0 ** -24 * 1.5, 2.0 ** -26,
                        65504.0, 65519.996, 65520.0, 1e6, np.inf, np.nan, 1e-40, 0.0],
                       np.float32)
    out = np.concatenate([halves, up, np.nextafter(halves, np.float32(0)),
                          mids.astype(np.float32), edges])
    return np.concatenate([out, -out])


def test_every_half_converts_to_float_exactly(executor):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    x = bits.view(np.float16)
    art = rvvkit.build(_cast_model(x.size, F16, TensorProto.FLOAT))
    _same_bits_or_nan(executor.run(art, {"x": x})["y"], x.astype(np.float32))


def test_float_rounds_to_half_as_numpy_does(executor):
    x = _hard_floats()
    art = rvvkit.build(_cast_model(x.size, TensorProto.FLOAT, F16))
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    _same_bits_or_nan(executor.run(art, {"x": x})["y"], want)


@pytest.mark.parametrize("other", [TensorProto.INT64, TensorProto.INT32, TensorProto.INT8,
                                   TensorProto.UINT8, TensorProto.BOOL])
def test_half_casts_to_and_from_integers_and_bool(other, op_executor):
    """half -> integer truncates toward zero; -> bool is != 0 (-0 is false, NaN true);
    integer -> half rounds to nearest even (257 -> 256, 2049 -> 2048)."""
    code_name = {TensorProto.INT64: "int64", TensorProto.INT32: "int32", TensorProto.INT8: "int8",
                 TensorProto.UINT8: "uint8", TensorProto.BOOL: "bool"}[other]
    h = np.asarray([0.0, -0.0, 1.5, -1.5, 2.75, 100.9, 127.0, np.nan, 0.25, 3.0], np.float16)
    if code_name == "uint8":
        h = np.abs(h)
    if code_name != "bool":
        h = np.where(np.isnan(h), np.float16(7), h).astype(np.float16)
    i = np.asarray([0, 1, -1, 100, 127, 0, 3, 5, 2, 1], np.int64)
    if code_name in ("int64", "int32"):
        i = np.concatenate([i[:-2], [2049, -65536]])
    if code_name == "uint8":
        i = np.abs(i)
    ints = (i != 0) if code_name == "bool" else i.astype(code_name)
    down = _cast_model(h.size, F16, other)
    up = _cast_model(ints.size, other, F16)
    got = op_executor.run(rvvkit.build(down), {"x": h})["y"]
    np.testing.assert_array_equal(got, run_ort(down, {"x": h})["y"])
    got = op_executor.run(rvvkit.build(up), {"x": ints})["y"]
    np.testing.assert_array_equal(got, run_ort(up, {"x": ints})["y"])


def _half_mlp():
    """float16 input, weights, bias and outputs; LayerNorm, MatMul, Gelu-free tanh, Softmax;
    an intermediate graph output (the pre-Softmax logits) that later nodes read too, and an
    explicit Cast to float16 of a float32 branch."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((16, 24)) * 0.3).astype(np.float16)
    b = (rng.standard_normal(24) * 0.1).astype(np.float16)
    scale = (1 + 0.1 * rng.standard_normal(16)).astype(np.float16)
    bias = (0.1 * rng.standard_normal(16)).astype(np.float16)
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "w"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["logits"]),
             helper.make_node("Tanh", ["logits"], ["t"]),
             helper.make_node("Softmax", ["t"], ["p"], axis=-1),
             helper.make_node("Cast", ["logits"], ["lf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["lf", "lf"], ["sq"]),
             helper.make_node("Cast", ["sq"], ["sqh"], to=F16),
             helper.make_node("Add", ["sqh", "p"], ["z"])]
    x = helper.make_tensor_value_info("x", F16, (2, 5, 16))
    outs = [helper.make_tensor_value_info(n, F16, (2, 5, 24)) for n in ("logits", "p", "z")]
    consts = {"w": w, "b": b, "scale": scale, "bias": bias}
    return make_model(nodes, [x], outs, consts, opset=17)


def _close_in_half(got, want):
    """Half's precision (2^-11) over a few operators: onnxruntime rounds to half after the
    operators it has half kernels for (LayerNormalization, MatMul, Softmax), rvvkit only where
    the model says (its outputs and Casts)."""
    assert got.dtype == want.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                               rtol=1e-2, atol=1e-2 * float(np.abs(want).max()))


def test_half_model_matches_onnxruntime(op_executor):
    m = _half_mlp()
    x = np.random.default_rng(4).standard_normal((2, 5, 16)).astype(np.float16)
    art = rvvkit.build(m)
    assert [t["dtype"] for t in art.meta["inputs"] + art.meta["outputs"]] == ["float16"] * 4
    got, want = op_executor.run(art, {"x": x}), run_ort(m, {"x": x})
    for name in ("logits", "p", "z"):
        _close_in_half(got[name], want[name])


def test_half_weights_are_converted_once_at_build_time():
    """The kernels read float32 weights: the artifact holds the float16 matrix widened, and
    no step of the plan converts a weight (Casts read the graph's input or computed values)."""
    art = rvvkit.build(_half_mlp())
    casts = [s for s in art.meta["plan"] if s["op"] == "Cast"]
    assert casts and all(a["kind"] in ("input", "arena", "output") for s in casts for a in s["args"])
    assert casts[0]["node"] == "x/to_float32" and casts[0]["args"][0]["dtype"] == "float16"
    assert len(art.weights) >= 16 * 24 * 4


def test_explicit_half_rounding_is_kept():
    """x + 1e-4 rounded to half is x again for x = 1: a graph that casts to float16 and back
    must show it, even though rvvkit computes in float32."""
    nodes = [helper.make_node("Add", ["x", "eps"], ["s"]),
             helper.make_node("Cast", ["s"], ["h"], to=F16),
             helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["y", "x"], ["d"])]
    m = make_model(nodes, [("x", (3,))], ["d"], {"eps": np.asarray([1e-4], np.float32)})
    x = np.ones(3, np.float32)
    with rvvkit.load(rvvkit.build(m), on="host") as sess:
        np.testing.assert_array_equal(sess.run({"x": x})["d"], np.zeros(3, np.float32))


def test_half_input_takes_half_feeds_only():
    with rvvkit.load(rvvkit.build(_half_mlp()), on="host") as sess:
        feeds = sess.random_feeds()
        assert feeds["x"].dtype == np.float16 and np.abs(feeds["x"]).max() > 0.1
        with pytest.raises(rvvkit.InputError, match="float32, expected float16"):
            sess.run({"x": feeds["x"].astype(np.float32)})


def test_compare_reference_computes_half_models_in_float32():
    """`rvvkit compare`'s onnxruntime reference runs a float16 model as rvvkit computes it
    (onnxruntime's float16 arithmetic overflows to NaN on the float16 ShuffleNet), says so,
    and rvvkit's host outputs then match it within half's rounding of the outputs."""
    from rvvkit.measure.reference import run_reference
    m = _half_mlp()
    x = np.random.default_rng(4).standard_normal((2, 5, 16)).astype(np.float16)
    ref = run_reference(m, {"x": x}, ["logits", "p", "z"], repeat=1, warmup=0)
    assert "computed in float32" in ref.note
    with rvvkit.load(rvvkit.build(m), on="host") as sess:
        got = sess.run({"x": x})
    for name, want in ref.outputs.items():
        assert want.dtype == np.float16
        np.testing.assert_allclose(got[name].astype(np.float32), want.astype(np.float32),
                                   rtol=2 ** -10, atol=1e-3)


def test_half_light_model_matches_its_float32_computation(op_executor):
    """SqueezeNet with float16 weights, input and output: within half's rounding of
    onnxruntime running the same graph in float32 (its classes agree)."""
    from rvvkit.measure.reference import run_reference
    from rvvkit.zoo import light_model
    from rvvkit.zoo.llm import to_half
    m = to_half(light_model("squeezenet"))
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float16)
    (name, want), = run_reference(m, {"data_0": x}, [m.graph.output[0].name],
                                  repeat=1, warmup=0).outputs.items()
    got = op_executor.run(rvvkit.build(m), {"data_0": x})[name]
    assert got.dtype == np.float16 and np.argmax(got) == np.argmax(want)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 ** -9,
                               atol=1e-4)


@pytest.mark.parametrize("code", [F16, TensorProto.DOUBLE], ids=["float16", "float64"])
def test_constant_outputs_keep_their_type(code, op_executor):
    """A float16/float64 initializer that is also a graph output comes out in its type (the
    planner copies it out of the weights), while what reads it computes in float32."""
    dtype = np.float16 if code == F16 else np.float64
    c = np.asarray([1.5, -2.0, 3.25], dtype)
    x = helper.make_tensor_value_info("x", code, [3])
    outs = [helper.make_tensor_value_info(n, code, [3]) for n in ("c", "y")]
    m = make_model([helper.make_node("Add", ["x", "c"], ["y"])], [x], outs, {"c": c})
    feeds = {"x": np.asarray([1, 2, 3], dtype)}
    got, want = op_executor.run(rvvkit.build(m), feeds), run_ort(m, feeds)
    for name in ("c", "y"):
        assert got[name].dtype == dtype
        np.testing.assert_array_equal(got[name], want[name])
