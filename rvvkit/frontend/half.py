"""float16 is stored and moved as float16 and computed as float32: most RVV cores (and QEMU
7.2) have no Zvfh, and C has no portable half. Before the model becomes the IR, its ONNX graph
is rewritten the way onnxruntime's CPU provider inserts casts:
- a float16 graph input is converted once, by a Cast to float32 that its readers then read;
- a float16 graph output is computed in float32 and converted by a final Cast;
- float16 initializers and Constant values become float32 at build time, so no run converts
  weights (the kernels read float32);
- values between operations are float32: no rounding between operations, as onnxruntime's
  cast insertion leaves none;
- the model's own Casts to float16 keep their rounding: a float32 copy of their result is what
  the operations after them read.
Afterwards float16 appears only at Casts and the graph's I/O; codegen/half.py converts bits."""
from __future__ import annotations

from typing import Dict, List, Set

HALF, FLOAT = 10, 1     # onnx.TensorProto codes


def widen_half(proto):
    """`proto` (not modified) or a rewritten copy of it, as described above."""
    if not _has_half(proto.graph):
        return proto
    from onnx import ModelProto
    out = ModelProto()
    out.CopyFrom(proto)
    g = out.graph
    _widen_constants(g)
    declared = {vi.name for vi in g.output if vi.type.tensor_type.elem_type == HALF}
    rounded = _own_casts(g)
    halves = [vi.name for vi in g.input if vi.type.tensor_type.elem_type == HALF]
    narrowed = sorted(declared - rounded - set(halves))
    for name in narrowed:
        _narrow_output(g, name)
    for name in halves + sorted(rounded) + narrowed:   # what reads them reads float16's value
        _widen_readers(g, name)
    for vi in g.value_info:    # hints for tensors that are float32 now
        if vi.type.tensor_type.elem_type == HALF and vi.name not in rounded:
            vi.type.tensor_type.elem_type = FLOAT
    return out


def _has_half(g) -> bool:
    return any(t.data_type == HALF for t in g.initializer) or \
        any(vi.type.tensor_type.elem_type == HALF for vi in list(g.input) + list(g.output)) or \
        any(_names_half(n) for n in g.node)


def _names_half(node) -> bool:
    return any((a.name in ("to", "dtype") and a.i == HALF) or
               (a.HasField("t") and a.t.data_type == HALF) for a in node.attribute)


def _widen_constants(g) -> None:
    """float16 initializers, Constant values and ConstantOfShape fill values -> float32;
    operators told to produce float16 (EyeLike, RandomNormal, ...) produce float32."""
    from onnx import numpy_helper
    for t in g.initializer:
        if t.data_type == HALF:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype("float32"),
                                               t.name))
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t") and a.t.data_type == HALF:
                a.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(a.t).astype("float32"), a.t.name))
            if a.name == "dtype" and a.i == HALF:
                a.i = FLOAT
        if n.op_type == "CastLike" and _type_of(g, n.input[1]) == HALF:
            _to_cast(n)


def _type_of(g, name: str) -> int:
    """The declared element type of `name` where the graph declares it (0: not declared)."""
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    return 0


def _to_cast(n) -> None:
    """CastLike to a float16 target -> Cast to float16 (the target only lent its type)."""
    from onnx import helper
    del n.input[1:]
    del n.attribute[:]
    n.op_type = "Cast"
    n.attribute.append(helper.make_attribute("to", HALF))


def _own_casts(g) -> Set[str]:
    return {n.output[0] for n in g.node if n.op_type == "Cast" and
            any(a.name == "to" and a.i == HALF for a in n.attribute)}


def _fresh(g, base: str) -> str:
    used = {t.name for t in g.initializer} | {vi.name for vi in g.input} | \
        {o for n in g.node for o in n.output}
    name, k = f"{base}/float32", 0
    while name in used:
        k += 1
        name = f"{base}/float32_{k}"
    return name


def _widen_readers(g, name: str) -> None:
    """Readers of float16 `name` other than Casts (which convert float16 themselves) read a
    float32 copy, made by one Cast right after `name` is produced."""
    from onnx import helper
    readers: List = [n for n in g.node if name in n.input and n.op_type != "Cast"]
    if not readers:
        return
    wide = _fresh(g, name)
    for n in readers:
        _rename_inputs(n, {name: wide})
    at = next((k + 1 for k, n in enumerate(g.node) if name in n.output), 0)
    g.node.insert(at, helper.make_node("Cast", [name], [wide], f"{name}/to_float32", to=FLOAT))


def _narrow_output(g, name: str) -> None:
    """Graph output `name`, declared float16: computed as a float32 tensor, then Cast right
    after it (what else reads it then reads the float16 value, as in the model)."""
    from onnx import helper
    wide = _fresh(g, name)
    at = 0
    for k, n in enumerate(g.node):
        for j, o in enumerate(n.output):
            if o == name:
                n.output[j], at = wide, k + 1
    if at == 0:     # produced by no node (an initializer output): leave it to the frontend
        return
    g.node.insert(at, helper.make_node("Cast", [wide], [name], f"{name}/to_float16", to=HALF))


def _rename_inputs(n, names: Dict[str, str]) -> None:
    for k, i in enumerate(n.input):
        if i in names:
            n.input[k] = names[i]
