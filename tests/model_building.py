"""ONNX models built in code for the tests, and their plain-numpy references. Not a
conftest.py: tests/conftest.py re-exports these, and support modules that conftest.py imports
(tests/ssh/*_support.py) take them from here, so no import goes back into conftest."""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

ValueSpec = Union[str, Tuple[str, Optional[Sequence]], "onnx.ValueInfoProto"]  # noqa: F821


def _value_info(spec: ValueSpec, default_shape=None):
    from onnx import TensorProto, ValueInfoProto, helper
    if isinstance(spec, ValueInfoProto):
        return spec
    if isinstance(spec, str):
        name, shape = spec, default_shape
    else:
        name, shape = spec
    return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                         None if shape is None else list(shape))


def make_model(nodes: Iterable, inputs: Sequence[ValueSpec], outputs: Sequence[ValueSpec],
               initializers: Optional[Mapping[str, np.ndarray]] = None, opset: int = 13,
               name: str = "test"):
    """An ONNX model (ir_version 8) from nodes (NodeProtos from onnx.helper.make_node).

    inputs/outputs: ("name", shape) pairs, plain names (outputs: shape left unknown, which
    onnxruntime accepts), or ValueInfoProtos. initializers: name -> numpy array (any dtype).
    Nodes without a name get one ("<op>_<i>") so error messages in tests are readable."""
    from onnx import helper, numpy_helper
    nodes = list(nodes)
    for i, n in enumerate(nodes):
        if not n.name:
            n.name = f"{n.op_type.lower()}_{i}"
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, name, [_value_info(s) for s in inputs],
                              [_value_info(s) for s in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8, producer_name="rvvkit-tests")


def rand(*shape, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    """Seeded standard-normal float32 data."""
    return np.asarray(scale * np.random.default_rng(seed).standard_normal(shape), np.float32)


def conv_ref(x, w, b, group, strides, pads, dil):
    """A plain numpy 2-D convolution (NCHW, float64): the reference for kernel-level tests."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = strides, pads, dil
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, m, ho, wo))
    mg = m // group
    for g in range(group):
        xg = xp[:, g * cg:(g + 1) * cg]
        for r in range(kh):
            for s in range(kw):
                patch = xg[:, :, r * dh:r * dh + sh * (ho - 1) + 1:sh,
                           s * dw:s * dw + sw * (wo - 1) + 1:sw]
                y[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch,
                                                       w[g * mg:(g + 1) * mg, :, r, s])
    if b is not None:
        y += b[None, :, None, None]
    return y


def onnx_inputs(model) -> Sequence[str]:
    inits = {i.name for i in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in inits]
