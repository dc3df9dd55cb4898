"""float16 and float64 are stored and moved as such and computed as float32. float16: most RVV
cores (and QEMU 7.2) have no Zvfh, and C has no portable half. float64: no kernel has double
arithmetic, and embedded engines compute such models in float32 too (a one-line notice says
so). Before the model becomes the IR, its ONNX graph is rewritten the way onnxruntime's CPU
provider inserts casts (said of float16 below; float64 alike):
- a float16 graph input is converted once, by a Cast to float32 that its readers then read;
- a float16 graph output is computed in float32 and converted by a final Cast;
- float16 initializers and Constant values become float32 at build time, so no run converts
  weights (the kernels read float32);
- values between operations are float32: no rounding between operations, as onnxruntime's
  cast insertion leaves none;
- the model's own Casts to float16 keep their rounding: a float32 copy of their result is what
  the operations after them read (a Cast to float64 rounds nothing: it becomes one to float32).
Afterwards these types appear only at Casts and the graph's I/O; codegen/half.py converts
float16's bits, C casts convert float64."""
from __future__ import annotations

from typing import Dict, List, Set

from .types import notice

HALF, DOUBLE, FLOAT = 10, 11, 1     # onnx.TensorProto codes
STORED = (HALF, DOUBLE)


def widen_stored_floats(proto):
    """`proto` (not modified) or a rewritten copy of it, as described above."""
    if not has_stored(proto.graph):
        return proto
    from onnx import ModelProto
    out = ModelProto()
    out.CopyFrom(proto)
    g = out.graph
    if has_stored(g, (DOUBLE,)):
        notice("float64 tensors are computed in float32 (the graph's float64 inputs and "
               "outputs stay float64)")
    _widen_constants(g)
    declared = {vi.name for vi in g.output if vi.type.tensor_type.elem_type in STORED}
    rounded = _own_casts(g)
    stored = [vi.name for vi in g.input if vi.type.tensor_type.elem_type in STORED]
    narrowed = sorted(declared - rounded - set(stored))
    for name in narrowed:
        _narrow_output(g, name)
    for name in stored + sorted(rounded) + narrowed:   # what reads them reads their value
        _widen_readers(g, name)
    for vi in g.value_info:    # hints for tensors that are float32 now
        if vi.type.tensor_type.elem_type in STORED and vi.name not in rounded:
            vi.type.tensor_type.elem_type = FLOAT
    return out


def has_stored(g, codes=STORED) -> bool:
    """Does graph `g` have float16/float64 (`codes`) tensors, initializers or casts?"""
    return any(t.data_type in codes for t in g.initializer) or \
        any(vi.type.tensor_type.elem_type in codes for vi in list(g.input) + list(g.output)) or \
        any(_names_stored(n, codes) for n in g.node)


def _names_stored(node, codes) -> bool:
    return any((a.name in ("to", "dtype") and a.i in codes) or
               (a.HasField("t") and a.t.data_type in codes) for a in node.attribute)


def _widen_constants(g) -> None:
    """float16/float64 initializers, Constant values and ConstantOfShape fill values ->
    float32; operators told to produce them (EyeLike, RandomNormal, ...) produce float32, and
    Casts to float64 cast to float32."""
    from onnx import numpy_helper
    for t in g.initializer:
        if t.data_type in STORED:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype("float32"),
                                               t.name))
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t") and a.t.data_type in STORED:
                a.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(a.t).astype("float32"), a.t.name))
            if (a.name == "dtype" and a.i in STORED) or (a.name == "to" and a.i == DOUBLE):
                a.i = FLOAT
        target = _type_of(g, n.input[1]) if n.op_type == "CastLike" else 0
        if target == HALF:
            _to_cast(n, HALF)
        elif target == DOUBLE:
            _to_cast(n, FLOAT)


def _type_of(g, name: str) -> int:
    """The declared element type of `name` where the graph declares it (0: not declared)."""
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    return 0


def _to_cast(n, to: int) -> None:
    """CastLike to a float16/float64 target -> Cast to `to` (the target only lent its type)."""
    from onnx import helper
    del n.input[1:]
    del n.attribute[:]
    n.op_type = "Cast"
    n.attribute.append(helper.make_attribute("to", to))


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
    """Readers of float16/float64 `name` other than Casts (which convert those themselves)
    read a float32 copy, made by one Cast right after `name` is produced."""
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
    """Graph output `name`, declared float16/float64: computed as a float32 tensor, then Cast
    right after it (what else reads it then reads the declared type's value, as in the
    model)."""
    from onnx import helper
    to = next(vi.type.tensor_type.elem_type for vi in g.output if vi.name == name)
    wide = _fresh(g, name)
    at = 0
    for k, n in enumerate(g.node):
        for j, o in enumerate(n.output):
            if o == name:
                n.output[j], at = wide, k + 1
    init = next((t for t in g.initializer if t.name == name), None)
    if at == 0 and init is None:   # produced by nothing: the frontend reports it
        return
    if init is not None:   # a constant output: its readers take the float32 constant
        init.name = wide
        for n in g.node:
            _rename_inputs(n, {name: wide})
    g.node.insert(at, helper.make_node("Cast", [wide], [name], f"{name}/to_stored", to=to))


def _rename_inputs(n, names: Dict[str, str]) -> None:
    for k, i in enumerate(n.input):
        if i in names:
            n.input[k] = names[i]
