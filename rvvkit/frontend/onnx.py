"""ONNX → Graph IR. Resolves static shapes node by node and folds every node whose inputs are all
constant as it goes, so shape arithmetic and in-graph weights (ConstantOfShape, Constant,
Unsqueeze of constants) are plain constants before any pass runs."""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import dtypes
from ..errors import ModelError, UnsupportedOperator
from ..ir import Graph, Node, Tensor
from ..ops import REGISTRY
from ..passes.fold import try_fold

MIN_OPSET = 7
ModelLike = Union[str, os.PathLike, bytes, "onnx.ModelProto"]  # noqa: F821


def load_model(model: ModelLike):
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, (bytes, bytearray)):
            return onnx.load_from_string(bytes(model))
        if not os.path.exists(model):
            raise ModelError(f"model file not found: {model}")
        return onnx.load(os.fspath(model))
    except ModelError:
        raise
    except Exception as exc:  # protobuf raises several unrelated types on garbage
        raise ModelError(f"cannot parse ONNX model {model!s:.200}: {exc}") from exc


def _opset(model) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def _attrs(node) -> Dict:
    from onnx import helper, numpy_helper
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif hasattr(v, "dims") and hasattr(v, "data_type"):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
            v = tuple(v)
        out[a.name] = v
    return out


def _unsupported(model) -> List[Tuple[str, str]]:
    bad = []
    for i, n in enumerate(model.graph.node):
        if (n.domain not in ("", "ai.onnx") or n.op_type not in REGISTRY
                or REGISTRY[n.op_type].internal):
            bad.append((n.op_type if not n.domain else f"{n.domain}.{n.op_type}",
                        n.name or f"#{i}"))
    return bad


def _input_shape(vi, overrides: Dict[str, Sequence[int]]) -> Tuple[int, ...]:
    if vi.name in overrides:
        return tuple(int(d) for d in overrides[vi.name])
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise ModelError(f"input {vi.name!r} has no shape; give one with --input-shape "
                         f"{vi.name}=1,3,224,224 (input_shapes= in Python)")
    dims = []
    for axis, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif axis == 0:
            # A symbolic batch dimension is the common case in exported models: batch 1 is
            # what an embedded deployment runs, and it is said out loud.
            print(f"rvvkit: input {vi.name!r}: symbolic batch dimension "
                  f"{d.dim_param or '?'} set to 1 (override with --input-shape)", file=sys.stderr)
            dims.append(1)
        else:
            raise ModelError(f"input {vi.name!r} has a symbolic dimension "
                             f"{d.dim_param or '?'} at axis {axis}; rvvkit compiles static "
                             f"shapes: give one with --input-shape {vi.name}=...")
    return tuple(dims)


def _elem_dtype(vi) -> np.dtype:
    from onnx import helper
    return np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))


def from_onnx(model: ModelLike, input_shapes: Optional[Dict[str, Sequence[int]]] = None,
              name: Optional[str] = None) -> Graph:
    from onnx import numpy_helper
    proto = load_model(model)
    opset = _opset(proto)
    if opset < MIN_OPSET:
        raise ModelError(f"model uses opset {opset}; rvvkit supports opset {MIN_OPSET} and up "
                         "(convert it with onnx.version_converter)")
    unsupported = _unsupported(proto)
    if unsupported:
        raise UnsupportedOperator(unsupported)
    g = Graph(name or proto.graph.name or "model")
    g.opset = opset
    for init in proto.graph.initializer:
        g.add_const(init.name, numpy_helper.to_array(init))
    overrides = dict(input_shapes or {})
    for vi in proto.graph.input:
        if vi.name in g.tensors:
            continue  # pre-IR-4 models list initializers as inputs too
        dtype = _elem_dtype(vi)
        if not dtypes.supported(dtype):
            raise ModelError(f"input {vi.name!r} has dtype {dtype}; rvvkit supports "
                             f"{', '.join(dtypes.NAMES)} inputs")
        g.add_tensor(Tensor(vi.name, _input_shape(vi, overrides), dtype))
        g.inputs.append(vi.name)
    unknown = set(overrides) - set(g.inputs)
    if unknown:
        raise ModelError(f"--input-shape names unknown input(s) {sorted(unknown)}; "
                         f"the model's inputs are {g.inputs}")
    for i, pn in enumerate(proto.graph.node):
        _add_node(g, Node(pn.op_type, pn.name or f"{pn.op_type}_{i}", list(pn.input),
                          list(pn.output), _attrs(pn)))
    for vi in proto.graph.output:
        if vi.name not in g.tensors:
            raise ModelError(f"graph output {vi.name!r} is not produced by any node")
        g.outputs.append(vi.name)
    return g


def _add_node(g: Graph, node: Node) -> None:
    """Infer `node`'s outputs (ops read the opset from g.opset) and fold or append it."""
    for i in node.inputs:
        if i and i not in g.tensors:
            raise ModelError(f"{node.op} node {node.name!r} reads {i!r}, which is not defined "
                             "before it (nodes must be in topological order)")
    try:
        outs = REGISTRY[node.op].infer(node, g)
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"{node.op} node {node.name!r}: malformed ({exc!r})") from exc
    for name, (shape, dtype) in zip(node.outputs, outs):
        if name:
            g.add_tensor(Tensor(name, tuple(int(d) for d in shape), np.dtype(dtype)))
    if not try_fold(g, node):
        g.nodes.append(node)
