"""Quantized element-wise, pooling and lookup operators: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear and onnxruntime's com.microsoft QLinear* family (Add, Mul, Sigmoid,
LeakyRelu, GlobalAveragePool, AveragePool, Concat, Softmax). Shapes, dtypes and numpy
evaluation; the numerics themselves (onnxruntime's order of float operations) are in
numerics.py, which the kernels' build-time constants come from too.

Scales and zero points must be build-time constants (they are initializers in every model
onnxruntime's quantizer writes); inference records them canonically in node.attrs["q"]:
{input index: numpy value} with absent zero points filled in, so lowerings never re-derive
them."""
from __future__ import annotations

import math

import numpy as np

from . import numerics as qm
from ..nn import _spatial
from .pool_eval import qavgpool   # numpy loops, for folding constant inputs
from ..registry import F32, bad, broadcast_shapes, in_shape, norm_axis, opt_input, register

MS = "com.microsoft."
Q_TYPES = ("int8", "uint8")
DTYPES = ("float32", "int8", "uint8", "int32")
_ONNX_NAMES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 21: "uint4",
               22: "int4", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
               20: "float8e5m2fnuz", 23: "float4e2m1"}


def _param(node, g, i: int, what: str, dtype=None) -> np.ndarray:
    """Build-time value of scale / zero-point input i (a zero of `dtype` when absent)."""
    name = opt_input(node, i)
    if not name:
        if dtype is None:
            raise bad(node, f"{what} (input {i}) is required")
        return np.zeros((), dtype)
    if not g.is_const(name):
        raise bad(node, f"{what} (input {i}, {name!r}) must be a build-time constant "
                        "(an initializer); rvvkit bakes quantization parameters into kernels")
    return np.asarray(g.const(name))


def _scalar(node, g, i: int, what: str, dtype=None) -> np.ndarray:
    v = _param(node, g, i, what, dtype)
    if v.size != 1:
        raise bad(node, f"{what} (input {i}) must be a scalar, got shape {list(v.shape)}")
    return v.reshape(())


def _qtype(node, dtype) -> np.dtype:
    name = np.dtype(dtype).name
    if name not in Q_TYPES:
        raise bad(node, f"quantized type {name} is not supported (rvvkit quantizes to int8 "
                        "and uint8)")
    return np.dtype(name)


def _data_type(node, g, i: int) -> np.dtype:
    return _qtype(node, g.t(node.inputs[i]).dtype)


# -- QuantizeLinear / DequantizeLinear -------------------------------------------------------

def _axis_params(node, g, x_shape, scale, zp):
    """Canonical per-tensor or per-axis parameters: attrs q_axis (-1: per tensor)."""
    if int(node.attrs.get("block_size", 0) or 0) > 0:
        raise bad(node, "blocked quantization (block_size > 0) is not supported")
    if scale.size > 1:   # per axis (a 1-element scale is per tensor whatever its rank)
        axis = norm_axis(node, int(node.attrs.get("axis", 1)), len(x_shape))
        if scale.ndim != 1 or scale.size != x_shape[axis]:
            raise bad(node, f"per-axis scale of shape {list(scale.shape)} does not match axis "
                            f"{axis} of input shape {list(x_shape)}")
        if zp.size not in (1, scale.size):
            raise bad(node, f"zero point of shape {list(zp.shape)} does not match the scale")
        node.attrs["q_axis"] = axis
    else:
        if zp.size != 1:
            raise bad(node, f"zero point of shape {list(zp.shape)} with a scalar scale")
        node.attrs["q_axis"] = -1
    node.attrs["q"] = {"scale": scale.astype(np.float32).reshape(-1),
                       "zp": np.broadcast_to(zp.reshape(-1), (scale.size,)).copy()}


def _q_eval(node, xs):
    q, axis = node.attrs["q"], node.attrs["q_axis"]
    x = np.asarray(xs[0])
    s, z = (qm.per_axis(q[k], axis, x.ndim) for k in ("scale", "zp"))
    if node.op == "DequantizeLinear":
        return [qm.dequantize(x, s, z)]
    return [qm.quantize(x, s, z, q["zp"].dtype)]


@register("QuantizeLinear", _q_eval, dtypes=DTYPES)
def _quantize(node, g):
    x = in_shape(node, g, 0)
    if g.t(node.inputs[0]).dtype != np.float32:
        raise bad(node, f"input dtype {g.t(node.inputs[0]).dtype}: rvvkit quantizes float32")
    zname = opt_input(node, 2)
    if zname:
        out = g.t(zname).dtype
    elif node.attrs.get("output_dtype"):
        code = int(node.attrs["output_dtype"])
        out = {2: np.uint8, 3: np.int8}.get(code)
        if out is None:
            raise bad(node, f"output type {_ONNX_NAMES.get(code, code)} is not supported "
                            "(rvvkit quantizes to int8 and uint8)")
    else:
        out = np.uint8
    out = _qtype(node, out)
    _axis_params(node, g, x, _param(node, g, 1, "y_scale"), _param(node, g, 2, "y_zero_point",
                                                                    out).astype(out))
    return [(x, out)]


def _dq_source(node, xs):
    """What a DequantizeLinear of constants keeps once folded (Tensor.qsource): its integer
    values, scale, zero point (absent: 0) and axis."""
    q, scale = xs[0], xs[1]
    zp = xs[2] if len(xs) > 2 and xs[2] is not None else np.zeros((), q.dtype)
    return q, scale, zp, int(node.attrs.get("axis", 1))


@register("DequantizeLinear", _q_eval, dtypes=DTYPES, source=_dq_source)
def _dequantize(node, g):
    x = in_shape(node, g, 0)
    dt = g.t(node.inputs[0]).dtype
    if dt.name not in Q_TYPES + ("int32",):
        raise bad(node, f"input dtype {dt.name} is not supported (int8, uint8, int32)")
    scale = _param(node, g, 1, "x_scale")
    if scale.dtype != np.float32:
        raise bad(node, f"x_scale of dtype {scale.dtype}: rvvkit dequantizes to float32")
    _axis_params(node, g, x, scale, _param(node, g, 2, "x_zero_point", dt).astype(dt))
    return [(x, F32)]


def _dyn_eval(node, xs):
    scale, zp = qm.dynamic_qparams(xs[0])
    return [qm.quantize(xs[0], scale, int(zp), np.uint8), np.asarray(scale, np.float32),
            np.asarray(zp, np.uint8)]


@register("DynamicQuantizeLinear", _dyn_eval, dtypes=("float32", "uint8"))
def _dynamic(node, g):
    return [(in_shape(node, g, 0), np.dtype(np.uint8)), ((), F32), ((), np.dtype(np.uint8))]


# -- com.microsoft QLinear* ------------------------------------------------------------------

def _binary_eval(node, xs):
    q = node.attrs["q"]
    fn = qm.qladd if node.op.endswith("Add") else qm.qlmul
    return [fn(xs[0], q[1], q[2], xs[3], q[4], q[5], q[6], q[7])]


def _binary(node, g):
    dt = _data_type(node, g, 0)
    if g.t(node.inputs[3]).dtype != dt:
        raise bad(node, "A and B must have the same element type")
    node.attrs["q"] = {i: _scalar(node, g, i, what, None if i in (1, 4, 6) else dt)
                       for i, what in ((1, "A_scale"), (2, "A_zero_point"), (4, "B_scale"),
                                       (5, "B_zero_point"), (6, "C_scale"),
                                       (7, "C_zero_point"))}
    return [(broadcast_shapes(node, [in_shape(node, g, 0), in_shape(node, g, 3)]), dt)]


register(MS + "QLinearAdd", _binary_eval, dtypes=DTYPES)(_binary)
register(MS + "QLinearMul", _binary_eval, dtypes=DTYPES)(_binary)


def _xy_params(node, g, dt):
    """x_scale, x_zp, y_scale, y_zp (inputs 1..4) of the unary QLinear ops."""
    return {i: _scalar(node, g, i, what, None if i % 2 else dt)
            for i, what in ((1, "X_scale"), (2, "X_zero_point"), (3, "Y_scale"),
                            (4, "Y_zero_point"))}


def lut_of(node) -> np.ndarray:
    """The 256-byte table of a QLinearSigmoid / QLinearLeakyRelu node."""
    q, dt = node.attrs["q"], node.attrs["q_dtype"]
    fn = qm.sigmoid if node.op.endswith("Sigmoid") else \
        qm.leaky_relu(float(node.attrs.get("alpha", 0.01)))
    return qm.lut(fn, q[1], q[2], q[3], q[4], dt)


def _lut_eval(node, xs):
    return [qm.apply_lut(xs[0], lut_of(node))]


def _unary(node, g):
    dt = _data_type(node, g, 0)
    node.attrs["q"], node.attrs["q_dtype"] = _xy_params(node, g, dt), dt
    return [(in_shape(node, g, 0), dt)]


register(MS + "QLinearSigmoid", _lut_eval, dtypes=DTYPES)(_unary)
register(MS + "QLinearLeakyRelu", _lut_eval, dtypes=DTYPES)(_unary)


def _channels_first(node):
    if int(node.attrs.get("channels_last", 0)):
        raise bad(node, "channels_last=1 (NHWC) is not supported")


def gap_scale(node, inner: int) -> np.float32:
    q = node.attrs["q"]
    return np.float32(q[1] / np.float32(q[3] * np.float32(inner)))


def _gap_eval(node, xs):
    x, q = np.asarray(xs[0]), node.attrs["q"]
    inner = math.prod(x.shape[2:])
    s = x.reshape(x.shape[0], x.shape[1], -1).astype(np.int32).sum(-1) - int(q[2]) * inner
    v = (s.astype(np.float32) * gap_scale(node, inner)).astype(np.float32)
    y = qm.quantize(v, np.float32(1), int(q[4]), x.dtype)
    return [y.reshape(x.shape[:2] + (1,) * (x.ndim - 2))]


@register(MS + "QLinearGlobalAveragePool", _gap_eval, dtypes=DTYPES)
def _gap(node, g):
    _channels_first(node)
    x, dt = in_shape(node, g, 0), _data_type(node, g, 0)
    if len(x) < 3:
        raise bad(node, f"input rank {len(x)} < 3")
    node.attrs["q"] = _xy_params(node, g, dt)
    return [(x[:2] + (1,) * (len(x) - 2), dt)]


def avgpool_table(node) -> np.ndarray:
    """Dequantized value of each input byte (float32[256]): onnxruntime dequantizes first."""
    q = node.attrs["q"]
    v = qm.byte_values(node.attrs["q_dtype"]).astype(np.int32) - int(q[2])
    return (np.float32(q[1]) * v.astype(np.float32)).astype(np.float32)


def _avgpool_eval(node, xs):
    return [qavgpool(node, np.asarray(xs[0]), avgpool_table(node))]


@register(MS + "QLinearAveragePool", _avgpool_eval, dtypes=DTYPES)
def _avgpool(node, g):
    _channels_first(node)
    x, dt = in_shape(node, g, 0), _data_type(node, g, 0)
    if len(x) != 4:
        raise bad(node, f"only 2-D pooling (rank 4) is supported, got shape {list(x)}")
    node.attrs["q"], node.attrs["q_dtype"] = _xy_params(node, g, dt), dt
    if "dilations" in node.attrs and any(d != 1 for d in node.attrs["dilations"]):
        raise bad(node, "dilations are not supported")
    out = _spatial(node, x, tuple(node.attrs["kernel_shape"]))
    node.attrs["out_hw"] = out
    return [((x[0], x[1]) + out, dt)]


def concat_tables(node):
    """Per input, None (same scale and zero point as the output: a copy) or its 256-byte
    requantisation table."""
    q, dt = node.attrs["q"], node.attrs["q_dtype"]
    out = []
    for j in range((len(node.inputs) - 2) // 3):
        s, z = q[3 * j + 3], q[3 * j + 4]
        same = np.float32(s) == np.float32(q[0]) and int(z) == int(q[1])
        out.append(None if same else qm.lut(lambda v: v, s, z, q[0], q[1], dt))
    return out


def _concat_eval(node, xs):
    parts = [np.asarray(x) if t is None else qm.apply_lut(x, t)
             for x, t in zip(xs[2::3], concat_tables(node))]
    return [np.concatenate(parts, axis=node.attrs["axis"])]


@register(MS + "QLinearConcat", _concat_eval, dtypes=DTYPES)
def _concat(node, g):
    if len(node.inputs) < 5 or (len(node.inputs) - 2) % 3:
        raise bad(node, "inputs must be Y_scale, Y_zero_point, then (X, X_scale, X_zero_point)"
                        " triples")
    dt = _qtype(node, g.t(node.inputs[1]).dtype)
    q = {0: _scalar(node, g, 0, "Y_scale"), 1: _scalar(node, g, 1, "Y_zero_point")}
    shapes = []
    for i in range(2, len(node.inputs), 3):
        if g.t(node.inputs[i]).dtype != dt:
            raise bad(node, f"input {i} is not {dt.name} like the output")
        q[i + 1] = _scalar(node, g, i + 1, "X_scale")
        q[i + 2] = _scalar(node, g, i + 2, "X_zero_point", dt)
        shapes.append(in_shape(node, g, i))
    rank = len(shapes[0])
    axis = norm_axis(node, int(node.attrs["axis"]), rank)
    if any(len(s) != rank or s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:]
           for s in shapes):
        raise bad(node, f"input shapes {[list(s) for s in shapes]} differ off axis {axis}")
    node.attrs.update(axis=axis, q=q, q_dtype=dt)
    return [(shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1:], dt)]


def softmax_geometry(node, shape):
    """(outer, n, inner): rows of n elements at stride `inner` (opset < 13: the flattened tail
    from axis on, one row per outer index)."""
    axis = node.attrs["axis"]
    if int(node.attrs["opset"]) < 13:
        return math.prod(shape[:axis]), math.prod(shape[axis:]), 1
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _softmax_eval(node, xs):
    x, q = np.asarray(xs[0]), node.attrs["q"]
    outer, n, inner = softmax_geometry(node, x.shape)
    rows = x.reshape(outer, n, inner).transpose(0, 2, 1)
    table = qm.softmax_table(q[1], n)
    y = qm.softmax_rows(rows, table, q[3], q[4], x.dtype)
    return [y.transpose(0, 2, 1).reshape(x.shape)]


@register(MS + "QLinearSoftmax", _softmax_eval, dtypes=DTYPES)
def _softmax(node, g):
    x, dt = in_shape(node, g, 0), _data_type(node, g, 0)
    if "opset" not in node.attrs:
        raise bad(node, "the 'opset' attribute is required")
    opset = int(node.attrs["opset"])
    axis = int(node.attrs.get("axis", 1 if opset < 13 else -1))
    node.attrs["axis"] = norm_axis(node, axis, len(x))
    node.attrs["q"] = _xy_params(node, g, dt)
    return [(x, dt)]
