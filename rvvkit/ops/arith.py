"""Broadcasting arithmetic beyond Add/Sub/Mul/Div: Pow, Mod, Min, Max, Mean, PRelu, BitShift.
Kernels: the typed element-wise kernel (codegen/kernels/math/logic.py via
codegen/lower/logic.py)."""
from __future__ import annotations

import numpy as np

from .registry import ANY, bad, broadcast_shapes, in_shape, register

NUMERIC = ("float32", "int64", "int32", "int8", "uint8")


def _shapes(node, g):
    return broadcast_shapes(node, [in_shape(node, g, i) for i in range(len(node.inputs))])


def _numeric(node, g, i=0):
    dt = g.t(node.inputs[i]).dtype
    if dt.name not in NUMERIC:
        raise bad(node, f"input {i} has element type {dt}; expected a number type")
    return dt


def _same(node, g):
    types = {g.t(i).dtype for i in node.inputs}
    if len(types) != 1:
        raise bad(node, f"inputs have different element types {sorted(map(str, types))}")
    return _numeric(node, g)


def pow_value(x, y):
    """ONNX Pow: the base's type; integer results through float64 (as onnxruntime does)."""
    if np.issubdtype(x.dtype, np.integer):
        with np.errstate(all="ignore"):
            return np.power(x.astype(np.float64), y.astype(np.float64)).astype(x.dtype)
    return np.power(x, y.astype(x.dtype)).astype(x.dtype)


@register("Pow", lambda node, xs: [pow_value(*xs)], dtypes=ANY)
def _pow(node, g):
    if len(node.inputs) != 2:
        raise bad(node, "expects two inputs")
    _numeric(node, g, 1)
    return [(_shapes(node, g), _numeric(node, g, 0))]


def mod_value(node, a, b):
    """fmod=1: the C remainder (dividend's sign); fmod=0: the divisor's sign (numpy's mod);
    integer division by zero gives 0 (the kernels guard it)."""
    with np.errstate(all="ignore"):
        if node.attrs.get("fmod", 0):
            out = np.fmod(a, b)
        else:
            out = np.mod(a, b)
    if np.issubdtype(a.dtype, np.integer):
        out = np.where(b == 0, 0, out)
    return np.asarray(out).astype(a.dtype)


@register("Mod", lambda node, xs: [mod_value(node, *xs)], dtypes=ANY)
def _mod(node, g):
    if len(node.inputs) != 2:
        raise bad(node, "expects two inputs")
    node.attrs["fmod"] = int(node.attrs.get("fmod", 0))
    return [(_shapes(node, g), _same(node, g))]


def _variadic(fn):
    def evaluate(node, xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        if node.op == "Mean":
            out = out / len(xs)
        return [np.asarray(out).astype(xs[0].dtype)]
    return evaluate


def _variadic_infer(node, g):
    if not node.inputs:
        raise bad(node, "expects at least one input")
    dt = _same(node, g)
    if node.op == "Mean" and dt != np.float32:
        raise bad(node, f"Mean takes float32, not {dt}")
    return [(_shapes(node, g), dt)]


register("Min", _variadic(np.minimum), dtypes=ANY)(_variadic_infer)
register("Max", _variadic(np.maximum), dtypes=ANY)(_variadic_infer)
register("Mean", _variadic(np.add), dtypes=ANY)(_variadic_infer)


def _prelu_eval(node, xs):
    x, slope = xs
    return [np.where(x < 0, x * slope, x).astype(x.dtype)]


@register("PRelu", _prelu_eval, dtypes=ANY)
def _prelu(node, g):
    if len(node.inputs) != 2:
        raise bad(node, "expects two inputs (X, slope)")
    x = in_shape(node, g, 0)
    slope = in_shape(node, g, 1)
    out = _shapes(node, g)      # slope broadcasts to X (unidirectionally)
    if tuple(out) != tuple(x):
        raise bad(node, f"slope shape {slope} does not broadcast to X's {x}")
    return [(x, _same(node, g))]


def _shift_eval(node, xs):
    """Shifts by less than 0 or by the width or more give 0 (-1 for a negative value shifted
    right); a left shift of a signed value shifts its bits (wraps)."""
    a, b = np.broadcast_arrays(*xs)
    width = a.itemsize * 8
    outside = (b < 0) | (b >= width)
    bs = np.where(outside, 0, b).astype(np.uint64)
    bits = a.view(f"u{a.itemsize}")
    if node.attrs["direction"] == "LEFT":
        out = np.left_shift(bits, bs.astype(bits.dtype)).view(a.dtype)
        return [np.where(outside, 0, out).astype(a.dtype)]
    out = np.right_shift(a, bs.astype(a.dtype))
    return [np.where(outside, np.where(a < 0, -1, 0), out).astype(a.dtype)]


@register("BitShift", _shift_eval, dtypes=("uint8", "int8", "int32", "int64"))
def _bitshift(node, g):
    d = node.attrs.get("direction", b"")
    d = d.decode() if isinstance(d, bytes) else d
    if d not in ("LEFT", "RIGHT"):
        raise bad(node, f"direction {d!r} must be LEFT or RIGHT")
    node.attrs["direction"] = d
    dt = _same(node, g)
    if dt == np.float32:
        raise bad(node, "BitShift takes integers")
    return [(_shapes(node, g), dt)]
