"""Reference outputs for `rvvkit compare`: the original ONNX model run by onnxruntime (CPU, one
thread, so its latency is a fair single-core peer) when it is installed, else by the ONNX
reference evaluator that ships with the `onnx` package (pure Python: numbers only, its speed
means nothing)."""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..errors import InputError, ModelError

KINDS = ("auto", "onnxruntime", "onnx")


@dataclass
class Reference:
    kind: str                      # "onnxruntime", "onnx" (ReferenceEvaluator) or "host"
    name: str                      # as printed, e.g. "onnxruntime 1.31.1 (CPU, 1 thread)"
    outputs: Dict[str, np.ndarray]
    latency_ms: Optional[float] = None
    latency_stat: str = "median"
    runs: int = 0
    note: str = ""

    def to_json(self) -> Dict:
        return {"kind": self.kind, "name": self.name, "latency_ms": self.latency_ms,
                "latency_stat": self.latency_stat, "runs": self.runs, "note": self.note}


def _median_ms(call: Callable[[], object], repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(samples)


def _check_names(names: Sequence[str], available: Sequence[str], what: str) -> None:
    missing = [n for n in names if n not in available]
    if missing:
        raise InputError(f"the reference model has no {what} {missing} (it has {list(available)});"
                         " is it the model the artifact was built from?")


def ort_session(model, threads: int = 1):
    """The one onnxruntime session rvvkit compares against (reference, tests, benchmarks,
    examples): CPU provider, `threads` intra-op threads and one inter-op thread, sequential
    execution, every graph optimisation, errors-only logging. `model`: a path, serialized
    bytes or a ModelProto. ImportError when onnxruntime is not installed; its own exceptions
    when it rejects the model."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3   # errors only: its warnings (unused initializers) are not ours
    src = os.fspath(model) if isinstance(model, (str, os.PathLike)) else \
        (model if isinstance(model, bytes) else model.SerializeToString())
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def _as_computed(model):
    """(model, note): a model with float16/float64 tensors as rvvkit computes it, in float32
    between Casts at its I/O (frontend/stored_floats.py). onnxruntime's own float16 arithmetic
    rounds after some operators and not others, and overflows where float32 does not (the
    float16 ShuffleNet of the ONNX light models gives it all NaN): it is no reference for
    rvvkit's numbers. Other models unchanged, note ''."""
    from ..frontend import stored_floats
    if not isinstance(model, (str, os.PathLike, bytes)):
        proto = model
    else:
        import onnx
        proto = onnx.load_from_string(model) if isinstance(model, bytes) else \
            onnx.load(os.fspath(model), load_external_data=False)
    if not stored_floats.has_stored(proto.graph):
        return model, ""
    if isinstance(model, (str, os.PathLike)):
        from ..frontend.onnx import load_model
        proto = load_model(model)
    return stored_floats.widen_stored_floats(proto), \
        "float16/float64 computed in float32, as rvvkit computes them"


def _onnxruntime(model, feeds: Mapping[str, np.ndarray], names: List[str], repeat: int,
                 warmup: int) -> Reference:
    import onnxruntime as ort  # ImportError: the caller falls back to the ONNX evaluator
    model, note = _as_computed(model)
    try:
        sess = ort_session(model)
    except Exception as exc:  # onnxruntime raises its own exception types
        raise ModelError(f"onnxruntime cannot load the reference model: {exc}") from None
    _check_names(names, [o.name for o in sess.get_outputs()], "output(s)")
    _check_names(list(feeds), [i.name for i in sess.get_inputs()], "input(s)")
    outs = dict(zip(names, sess.run(names, dict(feeds))))
    ms = _median_ms(lambda: sess.run(names, dict(feeds)), repeat, warmup)
    return Reference("onnxruntime", f"onnxruntime {ort.__version__} (CPU, 1 thread)", outs,
                     latency_ms=ms, runs=max(repeat, 1), note=note)


# The evaluator implements some operators only at recent versions (DequantizeLinear from 19, so
# onnxruntime's opset-13 QDQ models fail as they are): a model it cannot run is retried once
# converted to this opset, which keeps the model's meaning.
EVALUATOR_OPSET = 21


def _evaluate(evaluator_class, proto, names, feeds):
    evaluator = evaluator_class(proto)
    t0 = time.perf_counter()
    values = evaluator.run(names, dict(feeds))
    return values, time.perf_counter() - t0


def _upgraded(proto):
    """`proto` converted to EVALUATOR_OPSET, or None where it is at it already or cannot be."""
    from onnx import version_converter
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset >= EVALUATOR_OPSET:
        return None
    try:
        return version_converter.convert_version(proto, EVALUATOR_OPSET)
    except Exception:  # the converter lacks an adapter: the first failure is the answer
        return None


def _onnx_evaluator(model, feeds: Mapping[str, np.ndarray], names: List[str]) -> Reference:
    import onnx
    from onnx.reference import ReferenceEvaluator
    proto = onnx.load(os.fspath(model)) if isinstance(model, (str, os.PathLike)) else \
        (onnx.load_from_string(model) if isinstance(model, bytes) else model)
    _check_names(names, [o.name for o in proto.graph.output], "output(s)")
    inits = {i.name for i in proto.graph.initializer}
    _check_names(list(feeds), [i.name for i in proto.graph.input if i.name not in inits],
                 "input(s)")
    try:
        values, seconds = _evaluate(ReferenceEvaluator, proto, names, feeds)
    except Exception as exc:  # the evaluator raises whatever its operator code raises
        upgraded = _upgraded(proto)
        if upgraded is None:
            raise ModelError(f"the ONNX reference evaluator failed on the model: "
                             f"{type(exc).__name__}: {exc}") from None
        try:
            values, seconds = _evaluate(ReferenceEvaluator, upgraded, names, feeds)
        except Exception as exc2:
            raise ModelError(f"the ONNX reference evaluator failed on the model (also at "
                             f"opset {EVALUATOR_OPSET}): {type(exc2).__name__}: {exc2}") from None
    # One run only: it is pure Python, so repeating it would cost minutes and prove nothing.
    return Reference("onnx", f"onnx {onnx.__version__} ReferenceEvaluator",
                     dict(zip(names, (np.asarray(v) for v in values))),
                     latency_ms=1e3 * seconds, latency_stat="single run", runs=1,
                     note="onnxruntime is not installed: reference is the pure-Python ONNX "
                     "evaluator (exact, slow; its latency is no peer)")


def run_reference(model, feeds: Mapping[str, np.ndarray], output_names: Sequence[str], *,
                  kind: str = "auto", repeat: int = 10, warmup: int = 2) -> Reference:
    """Outputs (float32 arrays keyed by name) of `model` (path, bytes or ModelProto) on `feeds`,
    with the reference's own latency. kind: "auto" (onnxruntime when importable, else the ONNX
    evaluator), "onnxruntime" or "onnx"."""
    if kind not in KINDS:
        raise InputError(f"unknown reference {kind!r}; choose from {', '.join(KINDS)}")
    names = list(output_names)
    if kind in ("auto", "onnxruntime"):
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            if kind == "onnxruntime":
                raise InputError("reference onnxruntime requested but it is not installed "
                                 "(pip install onnxruntime)") from None
        else:
            return _onnxruntime(model, feeds, names, repeat, warmup)
    return _onnx_evaluator(model, feeds, names)
