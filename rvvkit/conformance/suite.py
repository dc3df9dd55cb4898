"""ONNX's node conformance suite (onnx.backend.test) run through rvvkit: which cases are out of
scope and why, how a case is built and run, and how its outputs are compared. Shared by
tests/host/test_onnx_backend.py, tests/qemu/test_conformance_sample.py and
benchmarks/conformance.py (which measures pass rates and writes the lists the tests check).

Node tests feed every operand as a run-time graph input, also those a deployable model carries
as initializers and rvvkit needs at build time (Reshape's shape, Slice's starts, weights): the
runner binds those "parameter operands" (PARAM_OPERANDS) to the case's values as initializers
before building, as a model exporter would have."""
from __future__ import annotations

import functools
import re
from typing import Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from .forked import isolated, run_many  # noqa: F401 (the harness's API)

# op -> operand positions that are build-time parameters (never the data operand)
_REDUCE = ("ReduceMax", "ReduceMin", "ReduceMean", "ReduceSum", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
PARAM_OPERANDS: Dict[str, Set[int]] = {
    "Reshape": {1}, "Squeeze": {1}, "Unsqueeze": {1}, "Clip": {1, 2}, "Dropout": {1, 2},
    "BatchNormalization": {1, 2, 3, 4}, "InstanceNormalization": {1, 2},
    "LayerNormalization": {1, 2}, "GroupNormalization": {1, 2}, "RMSNormalization": {1},
    "ConstantOfShape": {0}, "Slice": {1, 2, 3, 4}, "Pad": {1, 2, 3}, "Expand": {1},
    "Tile": {1}, "Resize": {1, 2, 3}, "Upsample": {1}, "TopK": {1}, "Split": {1},
    "Range": {0, 1, 2}, "OneHot": {1}, "CumSum": {1}, "Trilu": {1}, "CenterCropPad": {1},
    "Compress": {1}, "Col2Im": {1, 2}, "MaxUnpool": {2}, "AffineGrid": {1},
    "DFT": {1, 2}, "STFT": {1, 3}, "HannWindow": {0}, "HammingWindow": {0},
    "BlackmanWindow": {0}, "MelWeightMatrix": {0, 1, 2, 3, 4},
    "Conv": {1, 2}, "ConvTranspose": {1, 2}, "LSTM": {1, 2, 3, 4}, "GRU": {1, 2, 3, 4},
    "RNN": {1, 2, 3, 4}, "QuantizeLinear": {1, 2}, "DequantizeLinear": {1, 2},
    # quantized products as onnxruntime.quantization writes them: QOperator form (quantize_static)
    # with every scale, zero point and the weight as initializers; dynamic form
    # (quantize_dynamic) with the weight and its zero point as initializers and the activation's
    # zero point computed at run time by DynamicQuantizeLinear (so it stays a graph input here)
    "QLinearConv": {1, 2, 3, 4, 5, 6, 7, 8}, "QLinearMatMul": {1, 2, 3, 4, 5, 6, 7},
    "ConvInteger": {1, 3}, "MatMulInteger": {1, 3},
    **{op: {1} for op in _REDUCE},
}

# -- what is out of scope, by category ------------------------------------------------------

_ONNX_ONLY_DTYPES = {"BFLOAT16", "STRING", "COMPLEX64", "COMPLEX128",
                     "INT4", "UINT4", "INT2", "UINT2", "FLOAT4E2M1", "FLOAT8E8M0"}
_OTHER_INTS = {"INT16", "UINT16", "UINT32", "UINT64"}


def _elem_names(model) -> Set[str]:
    """Element type names of every tensor the case declares or creates."""
    from onnx import TensorProto
    types: Set[int] = set()

    def add_type(tp) -> None:
        kind = tp.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            types.add(getattr(tp, kind).elem_type)
        elif kind in ("sequence_type", "optional_type"):
            add_type(getattr(tp, kind).elem_type)
        elif kind == "map_type":
            types.add(tp.map_type.key_type)
            add_type(tp.map_type.value_type)

    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        add_type(vi.type)
    types.update(t.data_type for t in g.initializer)
    for n in _all_nodes(g):
        for a in n.attribute:
            if a.name in ("to", "dtype", "output_datatype", "stash_type") and a.i:
                types.add(a.i)
            if a.HasField("t"):
                types.add(a.t.data_type)
    return {TensorProto.DataType.Name(t) for t in types if t}


def _all_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_nodes(sub)


def _io_kinds(model) -> Set[str]:
    g = model.graph
    return {vi.type.WhichOneof("value") for vi in list(g.input) + list(g.output)}


def _ops(model) -> Set[str]:
    return {n.op_type for n in _all_nodes(model.graph)}


def _domains(model) -> Set[str]:
    return {n.domain for n in _all_nodes(model.graph)} - {"", "ai.onnx"}


_TRAINING = re.compile(r"Grad$|^(Adam|Adagrad|Momentum|Gradient)$")
_LOSSES = {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}
_RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
           "Bernoulli", "Multinomial"}
_DYNAMIC = {"NonZero", "Unique", "NonMaxSuppression", "StringSplit"}
_CONTROL = {"If", "Loop", "Scan"}

# (category, reason, predicate on (name, model)), checked in order; the first that holds
# excludes the case.
EXCLUDED: List[Tuple[str, str, Callable]] = [
    ("other domains", "ai.onnx.ml and ai.onnx.preview(.training) operators: rvvkit implements "
     "the default ONNX domain", lambda n, m: bool(_domains(m))),
    ("non-tensor graph I/O", "sequence, optional and map values: rvvkit compiles dense "
     "tensors only (the frontend refuses them with a clear error)",
     lambda n, m: bool(_io_kinds(m) - {"tensor_type"})),
    ("dtypes outside rvvkit", "bfloat16, float8, int4/uint4, string, complex: rvvkit's dtype "
     "table is float32, int64, int32, int8, uint8, bool, and float16/float64 (computed as "
     "float32)",
     lambda n, m: bool(_elem_names(m) & _ONNX_ONLY_DTYPES or
                       any(t.startswith("FLOAT8") for t in _elem_names(m)))),
    ("other integer widths", "int16, uint16, uint32, uint64: not in rvvkit's dtype table",
     lambda n, m: bool(_elem_names(m) & _OTHER_INTS)),
    ("training", "gradient and optimizer operators and training-mode cases: rvvkit compiles "
     "inference", lambda n, m: any(_TRAINING.search(o) for o in _ops(m))
     or n.startswith("test_training_") or "training_mode" in n),
    ("training losses", "SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss: they score "
     "predictions against labels in training graphs; a deployed model ends at its logits",
     lambda n, m: bool(_ops(m) & _LOSSES)),
    ("random", "random-number operators: their values cannot match a reference",
     lambda n, m: bool(_ops(m) & _RANDOM)),
    ("dynamic output shape", "NonZero, Unique, NonMaxSuppression: the output's shape depends "
     "on the data, and rvvkit compiles static shapes", lambda n, m: bool(_ops(m) & _DYNAMIC)),
    ("control flow", "If, Loop, Scan: data-dependent execution of subgraphs; rvvkit compiles "
     "one static plan", lambda n, m: bool(_ops(m) & _CONTROL)),
]


def excluded(name: str, model) -> Optional[str]:
    """The category that puts case `name` out of scope, or None."""
    for category, _, holds in EXCLUDED:
        if holds(name, model):
            return category
    return None


def dtype_class(model) -> str:
    """'float32' when every graph input and output is float32, else 'int/bool'."""
    from onnx import TensorProto
    g = model.graph
    elems = {vi.type.tensor_type.elem_type for vi in list(g.input) + list(g.output)}
    return "float32" if elems <= {TensorProto.FLOAT} else "int/bool"


@functools.lru_cache(maxsize=1)
def load_cases() -> Dict[str, object]:
    """Every node test case by name (test_abs, ...); generating them takes ~10 s."""
    import warnings
    from onnx.backend.test.loader import load_node_model_tests
    with warnings.catch_warnings():  # generating ONNX's cases warns about unrelated ops' data
        warnings.simplefilter("ignore")
        np_err = np.seterr(all="ignore")
        try:
            cases = load_node_model_tests()
        finally:
            np.seterr(**np_err)
    return {c.name: c for c in cases}


# -- building and running one case --------------------------------------------------------

def param_inputs(model) -> Set[str]:
    """Graph inputs read only in parameter positions."""
    as_param: Set[str] = set()
    as_data: Set[str] = set()
    for n in model.graph.node:
        for i, name in enumerate(n.input):
            (as_param if i in PARAM_OPERANDS.get(n.op_type, ()) else as_data).add(name)
    return {vi.name for vi in model.graph.input} & (as_param - as_data)


def bind(model, feeds: Dict[str, np.ndarray]):
    """`model` with its parameter operands bound to `feeds`' values as initializers, and the
    feeds that remain run-time inputs."""
    import onnx
    from onnx import numpy_helper
    params = param_inputs(model)
    if not params:
        return model, feeds
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    keep = [vi for vi in bound.graph.input if vi.name not in params]
    del bound.graph.input[:]
    bound.graph.input.extend(keep)
    bound.graph.initializer.extend(numpy_helper.from_array(np.asarray(feeds[p]), p)
                                   for p in sorted(params))
    return bound, {k: v for k, v in feeds.items() if k not in params}


def feeds_of(model, inputs) -> Dict[str, np.ndarray]:
    inits = {i.name for i in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    # numpy scalars (a Dropout ratio) become 0-d arrays, which every runtime takes; a few
    # cases (the float16 Casts) carry TensorProtos where the others carry arrays
    return {n: as_array(x) for n, x in zip(names, inputs)}


def as_array(x):
    if isinstance(x, np.generic):
        return np.asarray(x)
    if type(x).__name__ == "TensorProto":
        from onnx import numpy_helper
        return numpy_helper.to_array(x)
    return x


def compare(case, got: List, want: List) -> None:
    """ONNX's own comparison: same count, dtype and shape; values within the case's
    rtol/atol (exact for integers and bools)."""
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(as_array(w))
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, expected {w.dtype}"
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, expected {w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol,
                                       err_msg=f"output {i}")


def run_rvvkit(case, on: str = "host", **options) -> None:
    """Build `case` through rvvkit.conformance.backend, run it on executor `on`, compare; raises on
    any difference."""
    from .backend import RvvkitBackend
    for inputs, want in case.data_sets:
        model, feeds = bind(case.model, feeds_of(case.model, inputs))
        # the case's data fixes any dimension its model leaves symbolic
        shapes = {k: np.shape(v) for k, v in feeds.items()}
        rep = RvvkitBackend.prepare(model, on=on, cuda=on.startswith("cuda"),
                                    input_shapes=shapes, **options)
        compare(case, list(rep.run(feeds)), want)


def run_onnxruntime(case) -> None:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    for inputs, want in case.data_sets:
        sess = ort.InferenceSession(case.model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        feeds = feeds_of(case.model, inputs)
        compare(case, sess.run(None, feeds), want)
