"""NaN and +-inf through the ops whose kernels compare, clamp or take a max/min (Relu, Clip,
LeakyRelu, HardSigmoid, Max/Min, max pooling, ReduceMax/Min, ArgMax/Min, Softmax, LayerNorm
and activations fused into Conv/Gemm/MatMul epilogues), compared with onnxruntime with NaN
positions equal (assert_allclose's equal_nan). Every case is a tiny model run on the sampled
executors (`op_executor`: the host C, QEMU at VLEN 128 and 512 with agnostic lanes all ones,
the CUDA source on the CPU emulator): the C, RVV and CUDA forms each have to keep the NaN that
a plain comparison, vfmax/vfmin or fmaxf would drop.

Max pooling is the one place onnxruntime is not consistent (see rvvkit/codegen/kernels/
pool.py): its result for a window mixing NaN and numbers depends on the MLAS kernel and the
NaN's position. The onnxruntime cases keep to windows where it agrees with itself (all NaN,
+-inf among numbers); mixed windows are checked against rvvkit's rule, any NaN -> NaN, in
numpy. ReduceMax/Min follow onnxruntime's rule (a NaN counts when it is the first element),
which the random NaN placements here exercise both ways."""
import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import assert_matches, make_model, run_rvvkit

node = helper.make_node
NAN, INF = np.float32(np.nan), np.float32(np.inf)
FLT_MAX = np.finfo(np.float32).max


def special(*shape, seed=0, p_nan=0.1, p_inf=0.05):
    """Normal values with NaN, +inf and -inf sprinkled in (each element independently)."""
    rng = np.random.default_rng(seed)
    x = (2 * rng.standard_normal(shape)).astype(np.float32)
    u = rng.random(shape)
    x[u < p_nan] = NAN
    x[(u >= p_nan) & (u < p_nan + p_inf)] = INF
    x[(u >= p_nan + p_inf) & (u < p_nan + 2 * p_inf)] = -INF
    return x


def every_special(n=211, seed=1):
    """n values (a prime: vector strips and a tail) starting with each special and zeros."""
    x = special(n, seed=seed)
    x[:6] = [NAN, INF, -INF, 0.0, -0.0, NAN]
    return x


# -- element-wise ----------------------------------------------------------------------------

UNARY = [
    ("relu", "Relu", {}, 13, {}),
    ("leaky0.1", "LeakyRelu", {"alpha": 0.1}, 13, {}),
    ("leaky0", "LeakyRelu", {"alpha": 0.0}, 13, {}),      # 0 * -inf = NaN
    ("leaky2", "LeakyRelu", {"alpha": 2.0}, 13, {}),
    ("hardsigmoid", "HardSigmoid", {}, 13, {}),
    ("hardsigmoid_a.5", "HardSigmoid", {"alpha": 0.5, "beta": 0.2}, 13, {}),
    ("hardswish", "HardSwish", {}, 14, {}),
    ("sigmoid", "Sigmoid", {}, 13, {}),
    ("tanh", "Tanh", {}, 13, {}),
    ("elu", "Elu", {}, 13, {}),
    ("clip6_attrs", "Clip", {"min": -0.5, "max": 0.7}, 7, {}),
    ("clip6_defaults", "Clip", {}, 7, {}),                 # +-inf -> +-FLT_MAX
    ("clip6_min_only", "Clip", {"min": 0.0}, 10, {}),
    ("clip_relu6", "Clip", {}, 13, {"lo": 0.0, "hi": 6.0}),
    ("clip_min_only", "Clip", {}, 13, {"lo": 0.0}),
    ("clip_max_only", "Clip", {}, 13, {"hi": 1.0}),
    ("clip_no_bounds", "Clip", {}, 13, {}),
    ("clip_inf_bounds", "Clip", {}, 13, {"lo": -INF, "hi": INF}),
    ("clip_lo_above_hi", "Clip", {}, 13, {"lo": 2.0, "hi": 1.0}),
]


# One model per opset holds every row of that opset as a branch with its own output (y_<row
# id>): one build and one compile per executor instead of one per row, with failures still
# named by row.
UNARY_OPSETS = sorted({c[3] for c in UNARY})


@pytest.mark.parametrize("opset", UNARY_OPSETS)
def test_unary(opset, op_executor):
    x = every_special().reshape(1, 211)
    nodes, inits = [], {}
    for name, op, attrs, row_opset, bounds in UNARY:
        if row_opset != opset:
            continue
        ins = ["x"]
        for key in ("lo", "hi") if bounds else ():
            if key in bounds:
                inits[f"{key}_{name}"] = np.float32(bounds[key])
            ins.append(f"{key}_{name}" if key in bounds else "")
        nodes.append(node(op, ins, [f"y_{name}"], **attrs))
    m = make_model(nodes, [("x", x.shape)], [n.output[0] for n in nodes], inits, opset=opset)
    assert_matches(m, {"x": x}, on=op_executor)


@pytest.mark.parametrize("shapes", [((211,), (211,)), ((3, 37), (37,)), ((3, 37), (3, 1)),
                                    ((29,), (29,), (29,))],
                         ids=["same", "row", "column", "three"])
def test_max_min(shapes, op_executor):
    """A NaN in any operand is the result (onnxruntime; the comparison alone keeps only the
    second operand's)."""
    feeds = {f"x{i}": special(*s, seed=10 + i, p_nan=0.2) for i, s in enumerate(shapes)}
    m = make_model([node(op, list(feeds), [f"y_{op}"]) for op in ("Max", "Min")],
                   [(k, v.shape) for k, v in feeds.items()], ["y_Max", "y_Min"])
    assert_matches(m, feeds, on=op_executor)


# -- reductions --------------------------------------------------------------------------------

REDUCE_AXES = [((5, 37), [1]), ((37, 6), [0]), ((3, 7, 5), [1]), ((3, 4, 5), [0, 2]),
               ((4, 9), None), ((2, 3, 70), [2])]


REDUCE_OPS = ["ReduceMax", "ReduceMin", "ReduceMean", "ReduceL1", "ReduceLogSumExp"]


@pytest.mark.parametrize("shape, axes", REDUCE_AXES,
                         ids=[f"{'x'.join(map(str, s))}-{a}" for s, a in REDUCE_AXES])
def test_reduce(shape, axes, op_executor):
    """Every reduction of REDUCE_OPS over the same input, one output each (one compile)."""
    x = special(*shape, seed=len(shape) + shape[0], p_nan=0.08)
    x.reshape(-1)[0] = NAN            # a NaN first element on at least one line
    attrs = {"keepdims": 0} if axes is None else {"axes": axes, "keepdims": 1}
    m = make_model([node(op, ["x"], [f"y_{op}"], **attrs) for op in REDUCE_OPS],
                   [("x", shape)], [f"y_{op}" for op in REDUCE_OPS])
    assert_matches(m, {"x": x}, on=op_executor)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1])
def test_arg(op, axis, op_executor):
    x = special(9, 13, seed=4, p_nan=0.15)
    x[2, :] = NAN
    x[:, 3] = -INF
    m = make_model([node(op, ["x"], ["y"], axis=axis, keepdims=0)], [("x", x.shape)],
                   [helper.make_tensor_value_info("y", 7, None)])
    assert_matches(m, {"x": x}, on=op_executor)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax(op, axis, op_executor):
    """A NaN or +inf in a line (inf - inf), or a line of -inf, makes the whole line NaN."""
    x = (2 * np.random.default_rng(5).standard_normal((6, 37))).astype(np.float32)
    x[1, 7], x[2, 30], x[3, :], x[4, 0] = NAN, INF, -INF, -INF
    m = make_model([node(op, ["x"], ["y"], axis=axis)], [("x", x.shape)], ["y"])
    assert_matches(m, {"x": x}, on=op_executor)


def test_layernorm(op_executor):
    x = (2 * np.random.default_rng(6).standard_normal((5, 37))).astype(np.float32)
    x[1, 3], x[2, 36], x[3, 0] = NAN, INF, -INF
    inits = {"s": np.linspace(0.5, 1.5, 37, dtype=np.float32),
             "b": np.linspace(-1, 1, 37, dtype=np.float32)}
    m = make_model([node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1)],
                   [("x", x.shape)], ["y"], inits, opset=17)
    assert_matches(m, {"x": x}, on=op_executor)


# -- pooling -----------------------------------------------------------------------------------

def pool_input(shape, seed=7):
    """Channels: all NaN, numbers with +inf, numbers with -inf, numbers; then repeated."""
    x = (2 * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)
    u = np.random.default_rng(seed + 1).random(shape)
    x[:, 0::4] = NAN
    x[:, 1::4][u[:, 1::4] < 0.1] = INF
    x[:, 2::4][u[:, 2::4] < 0.3] = -INF
    return x


POOLS = [("maxpool_3x3s2", "MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2]), (1, 8, 9, 9)),
         ("maxpool_2x2s2", "MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2]), (2, 4, 8, 8)),
         ("maxpool_3d", "MaxPool", dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
          (1, 4, 4, 4, 4)),
         ("globalmax_5x5", "GlobalMaxPool", {}, (1, 8, 5, 5)),
         ("globalmax_9x9", "GlobalMaxPool", {}, (1, 4, 9, 9)),
         ("avgpool", "AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), (1, 4, 6, 6)),
         ("globalavg", "GlobalAveragePool", {}, (1, 4, 5, 5))]


@pytest.mark.parametrize("op, attrs, shape", [c[1:] for c in POOLS], ids=[c[0] for c in POOLS])
def test_pool(op, attrs, shape, op_executor):
    m = make_model([node(op, ["x"], ["y"], **attrs)], [("x", shape)], ["y"])
    assert_matches(m, {"x": pool_input(shape)}, on=op_executor)


def test_global_max_all_minus_inf(op_executor):
    """A plane of -inf gives -FLT_MAX, as onnxruntime's MLAS (its fold starts from lowest())."""
    x = np.full((1, 3, 7, 7), -INF, np.float32)
    x[0, 1, 3, 3] = 2.0
    m = make_model([node("GlobalMaxPool", ["x"], ["y"])], [("x", x.shape)], ["y"])
    y = assert_matches(m, {"x": x}, on=op_executor)["y"]
    assert y[0, 0, 0, 0] == -FLT_MAX and y[0, 1, 0, 0] == 2.0


def max_pool_ref(x, k, s):
    """rvvkit's max pooling rule in numpy: any NaN in the window -> NaN, floor -FLT_MAX."""
    n, c, h, w = x.shape
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    y = np.empty((n, c, ho, wo), np.float32)
    for i in range(ho):
        for j in range(wo):
            win = x[:, :, i * s:i * s + k, j * s:j * s + k].reshape(n, c, -1)
            y[:, :, i, j] = np.maximum(win.max(axis=2), -FLT_MAX)   # np.max propagates NaN
    return y


@pytest.mark.parametrize("op", ["MaxPool", "GlobalMaxPool"])
def test_max_pool_mixed_windows(op, op_executor):
    """Windows mixing NaN and numbers (where onnxruntime depends on the NaN's position)."""
    x = special(2, 3, 11, 11, seed=8, p_nan=0.03 if op == "MaxPool" else 0.0)
    x[0, 1, 5, 7] = x[1, 2, 10, 10] = NAN           # global: two planes of six get a NaN
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2]) if op == "MaxPool" else {}
    m = make_model([node(op, ["x"], ["y"], **attrs)], [("x", x.shape)], ["y"])
    got = run_rvvkit(m, {"x": x}, on=op_executor)["y"]
    want = max_pool_ref(x, 3, 2) if op == "MaxPool" else max_pool_ref(x, 11, 1)
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(got, want)


# -- fused epilogues ---------------------------------------------------------------------------

def conv_case(act_nodes, inits):
    """A 3x3 convolution (positive weights, so +-inf stay infinite where they do not meet)
    followed by `act_nodes` reading "c"."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    x[0, 0, 1, 1], x[0, 1, 5, 2], x[0, 2, 6, 6] = NAN, INF, -INF
    w = (0.1 + rng.random((4, 3, 3, 3))).astype(np.float32)
    b = np.array([0.0, -1.0, 1.0, 0.5], np.float32)
    m = make_model([node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])] + act_nodes,
                   [("x", x.shape)], ["y"], {"w": w, "b": b, **inits})
    return m, {"x": x}


def gemm_case(op, act_nodes, inits):
    rng = np.random.default_rng(10)
    a = rng.standard_normal((9, 16)).astype(np.float32)
    a[1, 3], a[4, :], a[6, 0], a[7, 5] = NAN, -INF, INF, -INF
    w = (0.1 + rng.random((16, 24))).astype(np.float32)
    mm = node("Gemm", ["a", "w", "c0"], ["c"]) if op == "Gemm" else node("MatMul", ["a", "w"],
                                                                          ["c"])
    inits = {"w": w, "c0": np.linspace(-1, 1, 24, dtype=np.float32), **inits}
    if op == "MatMul":
        inits.pop("c0")
    return make_model([mm] + act_nodes, [("a", a.shape)], ["y"], inits), {"a": a}


EPILOGUES = [("relu", [node("Relu", ["c"], ["y"])], {}),
             ("clip", [node("Clip", ["c", "lo", "hi"], ["y"])],
              {"lo": np.float32(-1.0), "hi": np.float32(1.0)}),
             ("relu6", [node("Clip", ["c", "lo", "hi"], ["y"])],
              {"lo": np.float32(0.0), "hi": np.float32(6.0)}),
             ("leaky", [node("LeakyRelu", ["c"], ["y"], alpha=0.2)], {})]


@pytest.mark.parametrize("producer", ["Conv", "Gemm", "MatMul"])
@pytest.mark.parametrize("name, act_nodes, inits", EPILOGUES, ids=[e[0] for e in EPILOGUES])
def test_fused_epilogue(producer, name, act_nodes, inits, op_executor):
    m, feeds = conv_case(act_nodes, inits) if producer == "Conv" else \
        gemm_case(producer, act_nodes, inits)
    art = rvvkit.build(m)
    plan = art.meta["plan"]
    if producer != "MatMul":    # a MatMul without bias keeps its activation as a kernel
        assert len(plan) == 1, [s["op"] for s in plan]  # the activation is in the epilogue
    y = assert_matches(m, feeds, artifact=art, on=op_executor)["y"]
    assert np.isnan(y).any() and np.isfinite(y).any()
