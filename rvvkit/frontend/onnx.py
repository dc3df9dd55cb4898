"""ONNX → Graph IR. Resolves static shapes node by node and folds every node whose inputs are all
constant as it goes, so shape arithmetic and in-graph weights (ConstantOfShape, Constant,
Unsqueeze of constants) are plain constants before any pass runs.

Models below MIN_OPSET are upgraded first (frontend/types.py). Problems are collected, not
raised one by one: a node that cannot be inferred is recorded and what depends on it skipped,
and the nodes that did infer are checked for lowerability, so one error lists everything the
user must change (ModelProblems), before any code is generated."""
from __future__ import annotations

import re

import os
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from .. import dtypes
from ..errors import InternalError, ModelError, ModelProblems, RvvkitError
from ..ir import Graph, Node, Tensor
from ..ops import REGISTRY
from ..passes.fold import try_fold
from . import ms_attention, packed_qkv
from .schema import schema_problem
from .stored_floats import widen_stored_floats
from .types import MIN_OPSET, elem_dtype, notice, tensor_type_problem, upgrade

ModelLike = Union[str, os.PathLike, bytes, "onnx.ModelProto"]  # noqa: F821
# graph -> (op, node name, why) of every node that cannot run (see from_onnx)
Unsupported = Callable[[Graph], List[Tuple[str, str, str]]]


def load_model(model: ModelLike):
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, (bytes, bytearray)):
            proto = onnx.load_from_string(bytes(model))
            model = "the model bytes"
        elif not os.path.exists(model):
            raise ModelError(f"model file not found: {model}")
        else:
            proto = onnx.load(os.fspath(model))
    except ModelError:
        raise
    except Exception as exc:  # protobuf raises several unrelated types on garbage
        raise ModelError(f"cannot parse ONNX model {model!s:.200}: {exc}") from exc
    if not proto.HasField("graph") and not proto.opset_import:
        # an empty file (or any bytes that happen to parse as nothing) is a valid empty proto
        raise ModelError(f"{model!s:.200} is not an ONNX model: it has no graph and no opset "
                         "(an empty or truncated file?)")
    return proto


def _known_opset() -> int:
    import onnx.defs
    return int(onnx.defs.onnx_opset_version())


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


def _input_shape(vi, overrides: Dict[str, Sequence[int]]) -> Tuple[int, ...]:
    if vi.name in overrides:
        dims = tuple(int(d) for d in overrides[vi.name])
        if any(d < 0 for d in dims):
            raise ModelError(f"--input-shape {vi.name}={','.join(map(str, dims))}: sizes "
                             "cannot be negative")
        return dims
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise ModelError(f"input {vi.name!r} has no shape; give one with --input-shape "
                         f"{vi.name}=1,3,224,224 (input_shapes= in Python)")
    dims = []
    for axis, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value") and d.dim_value < 0:
            raise ModelError(f"input {vi.name!r} has size {d.dim_value} at axis {axis}; sizes "
                             "cannot be negative")
        if d.HasField("dim_value"):   # 0 is a size: an empty tensor
            dims.append(int(d.dim_value))
        elif axis == 0:
            # A symbolic batch dimension is the common case in exported models: batch 1 is
            # what an embedded deployment runs, and it is said out loud.
            notice(f"input {vi.name!r}: symbolic batch dimension "
                   f"{d.dim_param or '?'} set to 1 (override with --input-shape)")
            dims.append(1)
        else:
            hint = " (a decoder's cache: build with --max-seq N)" if \
                re.search(r"past|cache|seq", vi.name + d.dim_param, re.IGNORECASE) else ""
            raise ModelError(f"input {vi.name!r} has a symbolic dimension "
                             f"{d.dim_param or '?'} at axis {axis}; rvvkit compiles static "
                             f"shapes: give one with --input-shape {vi.name}=...{hint}")
    return tuple(dims)


# Kernels index with 32-bit ints: no tensor may have more elements than this.
MAX_ELEMENTS = 2 ** 31 - 1
# Attributes whose every entry must be at least 1 (or 0 for the padding ones), whatever the op.
AT_LEAST = {"strides": 1, "kernel_shape": 1, "dilations": 1, "group": 1, "pads": 0,
            "output_padding": 0}


def _size_problem(name: str, shape) -> str:
    n = 1
    for d in shape:
        n *= int(d)
    if n > MAX_ELEMENTS:
        dims = "x".join(str(int(d)) for d in shape)
        return (f"tensor {name!r} would have {n} elements ({dims}); rvvkit's kernels index "
                f"with 32-bit ints (at most {MAX_ELEMENTS})")
    return ""


def _attr_problem(node: Node) -> str:
    if node.op == "Pad":   # Pad-2's pads attribute may be negative (it crops)
        return ""
    for attr, low in AT_LEAST.items():
        v = node.attrs.get(attr)
        if v is None or isinstance(v, (str, np.ndarray)):
            continue
        vals = v if isinstance(v, (tuple, list)) else (v,)
        if any(not isinstance(x, (int, np.integer)) or x < low for x in vals):
            return (f"{node.op} node {node.name!r}: attribute {attr}={list(vals)} must have "
                    f"every entry at least {low}")
    return ""


class Findings:
    """The problems found so far, and the tensors they leave undefined (whose readers are
    skipped: their problem is upstream)."""

    def __init__(self):
        self.items: List[Tuple[str, str, str, Optional[ModelError]]] = []
        self.lost: Set[str] = set()
        self.written: Set[str] = set()   # every node output so far (one producer per tensor)

    def add(self, op: str, where: str, exc, lose=()) -> None:
        err = exc if isinstance(exc, ModelError) else None
        self.items.append((op, where, str(exc), err))
        self.lost.update(n for n in lose if n)

    def raise_any(self, g: Graph, unsupported: Optional[Unsupported] = None) -> None:
        if not self.items:
            return
        for op, name, why in (unsupported(g) if unsupported else ()):
            self.items.append((op, name, f"{op} node {name!r}: {why}", None))
        if len(self.items) == 1 and self.items[0][3] is not None:
            raise self.items[0][3]  # one problem: its own error, with its own class
        raise ModelProblems([(op, where, msg) for op, where, msg, _ in self.items])


def from_onnx(model: ModelLike, input_shapes: Optional[Dict[str, Sequence[int]]] = None,
              name: Optional[str] = None, unsupported: Optional[Unsupported] = None) -> Graph:
    """The Graph IR of an ONNX model, or one error naming every problem found. `unsupported`
    (the builder passes rvvkit.codegen.lower's `unlowerable`) adds, when there are problems,
    what the nodes that did infer would hit next, so one message lists them all; it is passed
    in because the frontend sits below the code generator and never imports it."""
    from onnx import numpy_helper
    proto = load_model(model)
    opset = _opset(proto)
    if opset < MIN_OPSET:
        proto = upgrade(proto, opset)
        opset = _opset(proto)
    known = _known_opset()
    if opset > known:
        raise ModelError(f"the model imports ai.onnx opset {opset}; rvvkit knows opsets up to "
                         f"{known} (that of the installed onnx package)")
    proto = ms_attention.expand(packed_qkv.unpack(widen_stored_floats(proto)))
    g = Graph(name or proto.graph.name or "model")
    g.opset = opset
    found = Findings()
    for init in proto.graph.initializer:
        try:
            g.add_const(init.name, numpy_helper.to_array(init))
        except (ValueError, TypeError) as exc:
            found.add("", init.name, ModelError(f"initializer {init.name!r}: its data does not "
                                                f"match its type and shape ({exc})"), [init.name])
    _add_inputs(g, proto, dict(input_shapes or {}), found)
    for i, pn in enumerate(proto.graph.node):
        _add_node(g, pn, i, found)
    for k, vi in enumerate(proto.graph.output):
        why = tensor_type_problem(vi, "output")
        if any(o.name == vi.name for o in proto.graph.output[:k]):
            found.add("", vi.name, ModelError(f"graph output {vi.name!r} is listed twice"))
            continue
        if why:
            found.add("", vi.name, ModelError(why))
        elif vi.name not in g.tensors and vi.name not in found.lost:
            found.add("", vi.name, ModelError(f"graph output {vi.name!r} is not produced by "
                                              "any node"))
        g.outputs.append(vi.name)
    found.raise_any(g, unsupported)
    return g


def _add_inputs(g: Graph, proto, overrides: Dict, found: Findings) -> None:
    seen: Set[str] = set()
    for vi in proto.graph.input:
        if vi.name in seen:
            found.add("", vi.name, ModelError(f"graph input {vi.name!r} is listed twice"))
            continue
        seen.add(vi.name)
        if vi.name in g.tensors:
            continue  # pre-IR-4 models list initializers as inputs too
        try:
            why = tensor_type_problem(vi, "input")
            if why:
                raise ModelError(why)
            dtype = elem_dtype(vi)
            if not dtypes.supported(dtype):
                raise ModelError(f"input {vi.name!r} has dtype {dtype}; rvvkit supports "
                                 f"{', '.join(dtypes.NAMES)} inputs")
            shape = _input_shape(vi, overrides)
            why = _size_problem(vi.name, shape)
            if why:
                raise ModelError(f"input {vi.name!r}: {why}")
            g.add_tensor(Tensor(vi.name, shape, dtype))
            g.inputs.append(vi.name)
        except ModelError as exc:
            found.add("", vi.name, exc, [vi.name])
    unknown = set(overrides) - {vi.name for vi in proto.graph.input}
    if unknown:
        found.add("", "--input-shape", ModelError(
            f"--input-shape names unknown input(s) {sorted(unknown)}; the model's inputs "
            f"are {g.inputs}"))


# Operator domains besides ONNX's whose ops rvvkit has, registered under "<domain>.<op>":
# onnxruntime's contrib ops that onnxruntime.quantization writes.
EXTRA_DOMAINS = ("com.microsoft",)


def _op_name(pn) -> str:
    """The operator table's name of node proto `pn`'s op."""
    return pn.op_type if pn.domain in ("", "ai.onnx") else f"{pn.domain}.{pn.op_type}"


def _op_problem(pn) -> str:
    """Why node proto `pn` names no operator rvvkit has ('' when it does)."""
    name = _op_name(pn)
    if name in REGISTRY and not REGISTRY[name].internal and \
            pn.domain in ("", "ai.onnx") + EXTRA_DOMAINS:
        return ""
    return name


def _add_node(g: Graph, pn, i: int, found: Findings) -> None:
    """Infer the outputs of node proto `pn` (ops read the opset from g.opset) and fold or
    append it; a problem is recorded and leaves the node's outputs lost."""
    outputs = list(pn.output)
    # an unknown op is reported even downstream of another problem: the error lists every
    # operator the model needs and rvvkit lacks
    unknown_op = _op_problem(pn)
    if unknown_op:
        where = pn.name or f"#{i}"
        found.add(unknown_op, where, f"{unknown_op} node {where!r}: unsupported operator",
                  outputs)
        return
    where = pn.name or f"{pn.op_type}_{i}"
    taken = [o for j, o in enumerate(outputs) if o and (o in found.written or o in g.tensors
                                                        or o in outputs[:j])]
    found.written.update(o for o in outputs if o)
    if taken:
        found.add(pn.op_type, where, f"{pn.op_type} node {where!r} writes {taken[0]!r}, which "
                  "is already defined (by an earlier node, a graph input or an initializer); "
                  "every tensor has one producer", outputs)
        return
    if any(x in found.lost for x in pn.input if x):
        found.lost.update(o for o in outputs if o)
        return
    try:
        node = Node(_op_name(pn), where, list(pn.input), outputs, _attrs(pn))
    except (UnicodeDecodeError, ValueError, TypeError) as exc:
        why = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else \
            f"is malformed ({exc})"
        found.add(pn.op_type, where, f"{pn.op_type} node {where!r}: an attribute {why}",
                  outputs)
        return
    try:
        why = _attr_problem(node)
        if why:
            raise ModelError(why)
        _infer(g, node)
    except ModelError as exc:
        found.add(node.op, node.name, exc, outputs)
    except RvvkitError:
        raise
    except Exception as exc:  # not raised on purpose: the node breaks its schema, or a bug
        why = schema_problem(pn, g.opset)
        if not why:
            raise InternalError(node.op, node.name, exc) from exc
        found.add(node.op, node.name, ModelError(f"{node.op} node {node.name!r}: {why}"),
                  outputs)


def _infer(g: Graph, node: Node) -> None:
    for i in node.inputs:
        if i and i not in g.tensors:
            raise ModelError(f"{node.op} node {node.name!r} reads {i!r}, which is not defined "
                             "before it (nodes must be in topological order)")
    outs = REGISTRY[node.op].infer(node, g)
    added = []
    for name, (shape, dtype) in zip(node.outputs, outs):
        why = _size_problem(name, shape) if name else ""
        if why:
            raise ModelError(f"{node.op} node {node.name!r}: {why}")
    for name, (shape, dtype) in zip(node.outputs, outs):
        if name:
            added.append(g.add_tensor(Tensor(name, tuple(int(d) for d in shape),
                                             np.dtype(dtype))).name)
    try:
        _constant_outputs(g, node)
        folded = try_fold(g, node)
    except Exception:
        for name in added:  # leave no producer-less tensor behind
            g.tensors.pop(name, None)
        raise
    if not folded:
        g.nodes.append(node)


def _constant_outputs(g: Graph, node: Node) -> None:
    """Outputs known at build time whatever the inputs become constants here, so that every
    declared output is written: Dropout's mask is all true in inference."""
    if node.op == "Dropout" and len(node.outputs) > 1 and node.outputs[1]:
        mask = g.t(node.outputs[1])
        mask.data = np.ones(mask.shape, np.bool_)
        node.outputs = node.outputs[:1]
