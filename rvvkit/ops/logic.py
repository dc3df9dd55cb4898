"""Comparison and logic operators (bool results), Where, and the type conversions Cast and
CastLike. Their kernels are the typed element-wise kernel (codegen/kernels/math/logic.py, lowered in
codegen/lower/logic.py); every one also folds on constants through its numpy form."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from .registry import ANY, bad, broadcast_shapes, in_shape, register

BOOL = np.dtype(np.bool_)
NUMERIC = ("float32", "int64", "int32", "int8", "uint8")

COMPARE = {"Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal,
           "Greater": np.greater, "GreaterOrEqual": np.greater_equal}
LOGIC = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}

# ONNX TensorProto codes Cast may name: those rvvkit computes on, plus float64 and the other
# integer widths, which can occur in constant subgraphs that fold at build time.
ONNX_DTYPES = {d.onnx: d.np for d in dtypes.TABLE.values()}
ONNX_DTYPES.update({11: np.dtype(np.float64), 5: np.dtype(np.int16), 4: np.dtype(np.uint16),
                    12: np.dtype(np.uint32), 13: np.dtype(np.uint64)})


def _dtype(node, g, i):
    return g.t(node.inputs[i]).dtype


def _same_types(node, g, n, allowed=None):
    """Shapes of the n inputs broadcast; their element types agree (and are `allowed`)."""
    if len(node.inputs) != n:
        raise bad(node, f"expects {n} inputs, got {len(node.inputs)}")
    types = {_dtype(node, g, i) for i in range(n)}
    if len(types) != 1:
        raise bad(node, f"inputs have different element types {sorted(map(str, types))}")
    if allowed is not None and next(iter(types)) not in allowed:
        raise bad(node, f"element type {next(iter(types))} is not one of {allowed}")
    return broadcast_shapes(node, [in_shape(node, g, i) for i in range(n)])


def _compare_infer(node, g):
    return [(_same_types(node, g, 2), BOOL)]


def _logic_infer(node, g):
    return [(_same_types(node, g, 2, {BOOL}), BOOL)]


for _op, _fn in COMPARE.items():
    register(_op, lambda node, xs, fn=_fn: [np.asarray(fn(*xs))], dtypes=ANY)(_compare_infer)
for _op, _fn in LOGIC.items():
    register(_op, lambda node, xs, fn=_fn: [np.asarray(fn(*xs))], dtypes=ANY)(_logic_infer)


@register("Not", lambda node, xs: [np.logical_not(xs[0])], dtypes=ANY)
def _not(node, g):
    if _dtype(node, g, 0) != BOOL:
        raise bad(node, f"input must be bool, not {_dtype(node, g, 0)}")
    return [(in_shape(node, g, 0), BOOL)]


def _float_test(node, g):
    if _dtype(node, g, 0) != np.float32:
        raise bad(node, f"input must be float32, not {_dtype(node, g, 0)}")
    return [(in_shape(node, g, 0), BOOL)]


def _isinf_eval(node, xs):
    x = xs[0]
    pos, neg = node.attrs.get("detect_positive", 1), node.attrs.get("detect_negative", 1)
    return [np.asarray((np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg)))]


register("IsNaN", lambda node, xs: [np.isnan(xs[0])], dtypes=ANY)(_float_test)
register("IsInf", _isinf_eval, dtypes=ANY)(_float_test)


def _where_eval(node, xs):
    return [np.asarray(np.where(*xs)).astype(xs[1].dtype)]


@register("Where", _where_eval, dtypes=ANY)
def _where(node, g):
    if len(node.inputs) != 3:
        raise bad(node, "expects three inputs (condition, X, Y)")
    if _dtype(node, g, 0) != BOOL:
        raise bad(node, f"condition must be bool, not {_dtype(node, g, 0)}")
    if _dtype(node, g, 1) != _dtype(node, g, 2):
        raise bad(node, f"X and Y differ in type ({_dtype(node, g, 1)}, {_dtype(node, g, 2)})")
    shape = broadcast_shapes(node, [in_shape(node, g, i) for i in range(3)])
    return [(shape, _dtype(node, g, 1))]


def cast_value(x: np.ndarray, to) -> np.ndarray:
    """ONNX Cast: float -> integer truncates toward zero (what numpy's astype and a C cast
    do), anything -> bool is != 0."""
    to = np.dtype(to)
    if to == BOOL:
        return np.asarray(x != 0)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x).astype(to)


def _cast_eval(node, xs):
    return [cast_value(xs[0], ONNX_DTYPES[node.attrs["to"]])]


def _onnx_type_name(code) -> str:
    """float16, bfloat16, string, ... for TensorProto code `code` (the code when unknown)."""
    try:
        from onnx import TensorProto
        return f"{TensorProto.DataType.Name(code).lower()} (ONNX dtype {code})"
    except (ImportError, TypeError, ValueError):
        return f"ONNX dtype {code}"


@register("Cast", _cast_eval, dtypes=dtypes.NAMES)   # float16/float64 too: it converts them
def _cast(node, g):
    to = node.attrs.get("to")
    if to not in ONNX_DTYPES:
        raise bad(node, f"cast to {_onnx_type_name(to)} is not supported: rvvkit's tensors "
                        f"are {', '.join(dtypes.NAMES)}")
    return [(in_shape(node, g, 0), ONNX_DTYPES[to])]


@register("CastLike", lambda node, xs: [cast_value(xs[0], xs[1].dtype)], dtypes=dtypes.NAMES,
          value_inputs=(0,))   # input 1 only lends its dtype
def _cast_like(node, g):
    if len(node.inputs) != 2:
        raise bad(node, "expects two inputs (input, target_type)")
    return [(in_shape(node, g, 0), _dtype(node, g, 1))]
