"""What ONNX's own schema of an operator says is wrong with a node: more or fewer inputs or
outputs than it allows, a required input or attribute left out, an attribute of another type.

The frontend asks only after an op's inference or folding failed with an exception rvvkit did
not raise on purpose: a node that breaks its schema explains that failure (a fault of the
model, a ModelError), one that keeps it leaves a bug in rvvkit (an InternalError). Asking only
then never refuses a model that builds today because it bends a schema harmlessly."""
from __future__ import annotations


def _schema(pn, opset: int):
    """The schema of node proto `pn` at `opset`, or None (an op of another domain, such as
    com.microsoft's, which onnx does not describe)."""
    import onnx.defs
    domain = "" if pn.domain == "ai.onnx" else pn.domain
    try:
        return onnx.defs.get_schema(pn.op_type, opset if not domain else 1 << 30, domain)
    except onnx.defs.SchemaError:
        return None


def _present(names) -> list:
    """The names up to the last one given: trailing empty names are absent optional ones."""
    names = list(names)
    while names and not names[-1]:
        names.pop()
    return names


def _count_problem(what: str, given: int, low: int, high: int) -> str:
    if low <= given <= high:
        return ""
    allowed = str(low) if low == high else f"{low} or more" if high > 1 << 20 else \
        f"{low} to {high}"
    noun = what if given != 1 else what[:-1]
    return f"{given} {noun} given; the operator takes {allowed}"


def _attr_problem(pn, schema) -> str:
    given = {a.name: a for a in pn.attribute}
    for name, spec in sorted(schema.attributes.items()):
        if spec.required and name not in given:
            return f"required attribute {name!r} is missing"
        a = given.get(name)
        if a is not None and a.type and a.type != int(spec.type.value):
            from onnx import AttributeProto
            kind = AttributeProto.AttributeType.Name
            return (f"attribute {name!r} is of type {kind(a.type)}; the operator takes "
                    f"{kind(int(spec.type.value))}")
    return ""


def schema_problem(pn, opset: int) -> str:
    """Why node proto `pn` breaks its operator's schema at `opset` ('' when it keeps it, or
    when onnx has no schema of the op)."""
    schema = _schema(pn, opset)
    if schema is None:
        return ""
    ins, outs = _present(pn.input), _present(pn.output)
    why = _count_problem("inputs", len(ins), schema.min_input, schema.max_input) or \
        _count_problem("outputs", len(outs), schema.min_output, schema.max_output)
    if why:
        return why
    for i, formal in enumerate(schema.inputs[:schema.min_input]):
        if i < len(ins) and not ins[i]:
            return f"required input {i} ({formal.name}) is empty"
    return _attr_problem(pn, schema)
