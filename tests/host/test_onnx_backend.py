"""ONNX's own node conformance tests for every operator rvvkit supports, run through
rvvkit.onnx_backend (build + host JIT). Cases rvvkit rejects on purpose are excluded, each with
the reason.

ONNX node tests feed every operand as a run-time graph input, also those a deployable model
carries as initializers and rvvkit needs at build time: Reshape's shape, Squeeze/Unsqueeze
axes, Clip bounds, BatchNormalization statistics, ConstantOfShape's shape. For those models the
harness binds such operands to the test's values (as initializers) at the first run and builds
then; every other model is built by prepare() as is."""
import warnings
from typing import Dict, Set

import numpy as np
import onnx
import onnx.backend.test
from onnx import numpy_helper
from onnx.backend.base import BackendRep

from rvvkit.onnx_backend import RvvkitBackend

# op -> operand positions that are build-time parameters (never the data operand)
PARAM_OPERANDS = {"Reshape": {1}, "Squeeze": {1}, "Unsqueeze": {1}, "Clip": {1, 2},
                  "BatchNormalization": {1, 2, 3, 4}, "ConstantOfShape": {0}}


def param_inputs(model) -> Set[str]:
    """Graph inputs read only in parameter positions."""
    as_param: Set[str] = set()
    as_data: Set[str] = set()
    for n in model.graph.node:
        for i, name in enumerate(n.input):
            (as_param if i in PARAM_OPERANDS.get(n.op_type, ()) else as_data).add(name)
    return {vi.name for vi in model.graph.input} & (as_param - as_data)


class BindOnRunRep(BackendRep):
    def __init__(self, model, params: Set[str], device: str, kwargs: Dict):
        self.model, self.params, self.device, self.kwargs = model, params, device, kwargs
        self.names = [vi.name for vi in model.graph.input]
        self.rep = None

    def run(self, inputs, **kwargs):
        feeds = dict(inputs) if isinstance(inputs, dict) else dict(zip(self.names, inputs))
        if self.rep is None:
            bound = onnx.ModelProto()
            bound.CopyFrom(self.model)
            keep = [vi for vi in bound.graph.input if vi.name not in self.params]
            del bound.graph.input[:]
            bound.graph.input.extend(keep)
            bound.graph.initializer.extend(numpy_helper.from_array(np.asarray(feeds[p]), p)
                                           for p in sorted(self.params))
            self.rep = RvvkitBackend.prepare(bound, self.device, **self.kwargs)
        return self.rep.run({k: v for k, v in feeds.items() if k not in self.params})


class ConformanceBackend(RvvkitBackend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        params = param_inputs(model)
        if not params:
            return RvvkitBackend.prepare(model, device, **kwargs)
        onnx.checker.check_model(model)
        return BindOnRunRep(model, params, device, kwargs)


with warnings.catch_warnings():  # generating ONNX's cases warns about unrelated ops' data
    warnings.simplefilter("ignore", RuntimeWarning)
    backend_test = onnx.backend.test.BackendTest(ConformanceBackend, __name__)

for op in ("relu", "conv_with", "basic_conv", "maxpool_2d", "averagepool_2d", "gemm", "matmul",
           "softmax", "logsoftmax", "concat", "transpose", "add", "sum", "lrn", "batchnorm",
           "flatten", "reshape", "unsqueeze", "squeeze", "clip", "sigmoid", "tanh", "leakyrelu",
           "globalaveragepool", "globalmaxpool", "dropout", "identity", "sub", "mul", "div",
           "shape", "constantofshape", "constant"):
    backend_test.include(rf"^test_{op}(_.*)?_cpu$")

EXCLUDED = [
    # Integer tensors (add_int8, div_uint32, maxpool_2d_uint8, clip_default_int8_*,
    # constantofshape_int_*): rvvkit computes in float32 only.
    r"_u?int(\d+)?_",
    # Shape's result is an int64 tensor, and a graph output must be float32.
    r"^test_shape_",
    # Training: BatchNormalization's batch statistics outputs, Dropout's bool mask output.
    r"^test_batchnorm_.*_training_mode",
    r"^test_dropout_default_mask",
    # Zero-size dimensions (allowzero with a 0 in the shape): empty tensors.
    r"^test_reshape_allowzero_reordered",
    # Pad, not Constant: rvvkit has no Pad lowering.
    r"^test_constant_pad",
    # Function-expanded variants use ops rvvkit does not lower on run-time tensors
    # (ReduceMax, Exp, Log, Less, Where, CastLike, ...).
    r"_expanded",
    # Optional and sequence types are not tensors.
    r"^test_identity_(opt|sequence)",
    # PyTorch-converted Softmax models use opset 6; rvvkit supports opset 7 and up.
    r"^test_softmax_(functional_dim3|lastdim)",
]
for pattern in EXCLUDED:
    backend_test.exclude(pattern)



def _selected_only(cases):
    """BackendTest turns every case it was not asked for into a skipped test; drop those so the
    report counts what actually ran (thousands of skips would hide real ones)."""
    for cls in cases.values():
        for attr in [a for a in vars(cls) if a.startswith("test_")]:
            if getattr(getattr(cls, attr), "__unittest_skip__", False):
                delattr(cls, attr)
    return cases


globals().update(_selected_only(backend_test.test_cases))


def test_backend_rep_takes_list_or_dict():
    from onnx import helper
    from conftest import make_model, rand
    m = make_model([helper.make_node("Sub", ["a", "b"], ["y"])], [("a", (2, 3)), ("b", (3,))],
                   [("y", (2, 3))], {"unused": rand(4)})
    rep = RvvkitBackend.prepare(m)
    a, b = rand(2, 3, seed=1), rand(3, seed=2)
    (by_order,) = rep.run([a, b])
    np.testing.assert_allclose(by_order, a - b, rtol=1e-6)
    np.testing.assert_allclose(rep.run({"b": b, "a": a}).y, a - b, rtol=1e-6)
    np.testing.assert_allclose(RvvkitBackend.run_model(m, [a, b])[0], a - b, rtol=1e-6)
    try:
        rep.run([a])
    except ValueError as exc:
        assert "['a', 'b']" in str(exc)
    else:
        raise AssertionError("a missing input must be refused")
    assert RvvkitBackend.supports_device("CPU") and not RvvkitBackend.supports_device("CUDA")
