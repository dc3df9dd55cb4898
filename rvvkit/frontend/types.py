"""Graph input/output types and the opset upgrade: what the frontend checks before it builds
the graph, so that a model rvvkit cannot take is refused with a sentence, not a KeyError."""
from __future__ import annotations

import sys
from typing import Optional

import numpy as np

from ..errors import ModelError

# Models below this opset are upgraded with onnx.version_converter before anything else.
MIN_OPSET = 7
# The opsets tried in turn for an upgrade: 13 is where most operators reached the form rvvkit
# handles best (axes as inputs, Softmax per axis); MIN_OPSET is the smallest step, for models
# whose operators have no adapter up to 13.
UPGRADE_TARGETS = (13, MIN_OPSET)


def notice(msg: str) -> None:
    """A one-line message on stderr about something rvvkit decided for the user."""
    print(f"rvvkit: {msg}", file=sys.stderr, flush=True)


def describe(tp) -> str:
    """An ONNX TypeProto as ONNX writes it: tensor(float), sequence(tensor(int64)), ..."""
    from onnx import helper
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        elem = getattr(tp, kind).elem_type
        name = helper.tensor_dtype_to_string(elem).replace("TensorProto.", "").lower() \
            if elem else "undefined"
        return f"{kind[:-5]}({name})"
    if kind == "sequence_type":
        return f"sequence({describe(tp.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({describe(tp.optional_type.elem_type)})"
    if kind == "map_type":
        key = helper.tensor_dtype_to_string(tp.map_type.key_type).replace("TensorProto.", "")
        return f"map({key.lower()}, {describe(tp.map_type.value_type)})"
    return kind or "no type"


def tensor_type_problem(vi, role: str) -> Optional[str]:
    """Why graph {role} `vi` is not a dense tensor rvvkit can bind ('' -> None)."""
    kind = vi.type.WhichOneof("value")
    if kind == "tensor_type" and vi.type.tensor_type.elem_type:
        return None
    if kind == "tensor_type":
        return f"graph {role} {vi.name!r} has no element type"
    return (f"graph {role} {vi.name!r} has type {describe(vi.type)}; rvvkit compiles "
            "dense tensors only (no sequence, optional, map or sparse values)")


def elem_dtype(vi) -> np.dtype:
    """The numpy dtype of a tensor value info (one whose tensor_type_problem is None)."""
    from onnx import helper
    elem = vi.type.tensor_type.elem_type
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except (KeyError, TypeError, ValueError):  # string, float8, int4: no numpy type of its own
        raise ModelError(f"graph input {vi.name!r} has element type "
                         f"{describe(vi.type)}, which has no numpy equivalent") from None


def upgrade(proto, opset: int):
    """`proto` at an opset rvvkit handles, converted by onnx.version_converter, said on
    stderr; a model the converter cannot convert is a ModelError that says why."""
    from onnx import version_converter
    failures = []
    for target in UPGRADE_TARGETS:
        try:
            converted = version_converter.convert_version(proto, target)
        except Exception as exc:  # noqa: BLE001 - the converter raises RuntimeError,
            # ValueError, IndexError, onnx's own errors ... for an op it has no adapter for
            failures.append(f"to opset {target}: {' '.join(str(exc).split())[:300]}")
            continue
        notice(f"model uses opset {opset}; upgraded to opset {target} with "
               "onnx.version_converter")
        return converted
    raise ModelError(f"model uses opset {opset} (rvvkit takes opset {MIN_OPSET} and up) and "
                     "onnx.version_converter cannot upgrade it: " + "; ".join(failures))
