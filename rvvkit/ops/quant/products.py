"""Integer convolution and matrix products of quantized models: QLinearConv, ConvInteger,
QLinearMatMul, MatMulInteger and com.microsoft's QGemm (what onnxruntime.quantization writes in
QOperator and dynamic form), and the two internal ops they all become (passes/quant.py):

    rvvkit.QConv    y = requant(conv(x - x_zp, w - w_zp) + bias)
    rvvkit.QMatMul  y = requant(matmul(a - a_zp, b - b_zp) + bias)

requant(v) = saturate(round_half_even(float(v) * scale[c]) + y_zp): int32 -> float32 once,
one float32 multiply by the combined scale (x_scale * w_scale[c] / y_scale, rounded to float32
in that order), then round half to even — onnxruntime's CPU provider (MLAS) requantises the
same way, so outputs are equal. Without a y_scale (ConvInteger, MatMulInteger) the int32 sum
is the output; QGemm without y_scale gives float32 (float(v) * scale[c]).

The numpy evaluations below are the reference the tests and constant folding use."""
from __future__ import annotations

import numpy as np

from ..nn import _conv, _matmul, conv_f64
from ..registry import bad, in_shape, opt_input, register

QTYPES = ("int8", "uint8")
I32 = np.dtype(np.int32)
F32 = np.dtype(np.float32)


def qrange(dtype) -> tuple:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def requant(v, scale, zp: int, dtype, axis: int = -1, lo=None, hi=None) -> np.ndarray:
    """int32 sums -> quantized outputs, as onnxruntime does (see the module doc). `scale` is
    per tensor or per channel along `axis`; lo/hi narrow the saturation range (a fused Relu)."""
    s = np.asarray(scale, np.float32)
    if s.size > 1:
        shape = [1] * np.ndim(v)
        shape[axis] = s.size
        s = s.reshape(shape)
    qmin, qmax = qrange(dtype)
    lo = qmin if lo is None else lo
    hi = qmax if hi is None else hi
    f = np.asarray(v, np.int32).astype(np.float32) * s
    f = np.clip(f, np.float32(lo - zp), np.float32(hi - zp))
    return (np.rint(f).astype(np.int32) + zp).astype(dtype)


def combined_scale(x_scale, w_scale, y_scale) -> np.ndarray:
    """x_scale * w_scale / y_scale in float32, in that order (per channel when w_scale is)."""
    xs = np.float32(np.asarray(x_scale, np.float32).reshape(-1)[0])
    ws = np.asarray(w_scale, np.float32).reshape(-1)
    return (xs * ws) / np.float32(np.asarray(y_scale, np.float32).reshape(-1)[0])


def zero_point(node, g, i: int, like: str = "") -> int:
    """A per-tensor zero point (absent: 0) as a Python int; per-tensor is all that the
    activation side of these ops may have."""
    z = _const(node, g, i, "zero point")
    if z is None:
        return 0
    if z.size != 1:
        raise bad(node, f"input {i} ({like or 'zero point'}) must be per-tensor (one value), "
                        f"got {z.size} values")
    return int(z.reshape(-1)[0])


def _const(node, g, i: int, what: str):
    name = opt_input(node, i)
    if not name:
        return None
    if not g.is_const(name):
        raise bad(node, f"{what} (input {i}, {name!r}) must be a build-time constant")
    return g.const(name)


def _qtype(node, g, i: int, allowed=QTYPES) -> np.dtype:
    dt = g.t(node.inputs[i]).dtype
    if dt.name not in allowed:
        raise bad(node, f"input {i} has element type {dt}; expected {' or '.join(allowed)}")
    return dt


def _centred(x, zp) -> np.ndarray:
    z = np.asarray(0 if zp is None else zp, np.int64)
    return np.asarray(x, np.int64) - z


def _per_channel(node, v, n: int, what: str) -> np.ndarray:
    v = np.asarray(v).reshape(-1)
    if v.size not in (1, n):
        raise bad(node, f"{what} has {v.size} values; expected 1 or {n}")
    return v


def _runtime_zp_ok(node, g, i: int, what: str) -> None:
    """The activation zero point of ConvInteger/MatMulInteger may be computed at run time
    (DynamicQuantizeLinear's output): one value either way."""
    name = opt_input(node, i)
    if name and g.t(name).size != 1:
        raise bad(node, f"{what} must be per-tensor (one value), got {g.t(name).size}")


# -- convolution ------------------------------------------------------------------------------

def _qconv_sum(node, x, xz, w, wz, bias=None) -> np.ndarray:
    x64 = _centred(x, xz).astype(np.float64)
    wz = np.asarray(0 if wz is None else wz, np.int64).reshape(-1)
    w64 = (np.asarray(w, np.int64) - wz.reshape((-1,) + (1,) * (np.ndim(w) - 1)))
    y = conv_f64(node, x64, w64.astype(np.float64))
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape((1, -1) + (1,) * (y.ndim - 2))
    return np.rint(y).astype(np.int64).astype(np.int32)


def _qlinearconv_eval(node, xs):
    x, xsc, xz, w, wsc, wz, ysc, yz = xs[:8]
    bias = xs[8] if len(xs) > 8 else None
    acc = _qconv_sum(node, x, xz, w, wz, bias)
    return [requant(acc, combined_scale(xsc, wsc, ysc), int(np.asarray(yz).reshape(-1)[0]),
                    np.asarray(yz).dtype, axis=1)]


def _conv_like(node, g, w_index: int):
    """Conv's shape rules (and canonical attributes) on (x, w) taken from `w_index`."""
    from ...ir import Node
    probe = Node("Conv", node.name, [node.inputs[0], node.inputs[w_index]], node.outputs,
                 node.attrs)
    return _conv(probe, g)[0][0]


@register("QLinearConv", _qlinearconv_eval, dtypes=QTYPES + ("int32", "float32"),
          without_kernel="becomes rvvkit.QConv (passes/quant.py)")
def _qlinearconv(node, g):
    if len(node.inputs) < 8:
        raise bad(node, "expects 8 or 9 inputs (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, "
                        "y_zp[, B])")
    _qtype(node, g, 0)
    _qtype(node, g, 3)
    shape = _conv_like(node, g, 3)
    _const(node, g, 3, "w")     # the weights are packed at build time
    m = shape[1]
    for i, what in ((1, "x_scale"), (2, "x_zero_point"), (6, "y_scale"), (7, "y_zero_point")):
        v = _const(node, g, i, what)
        if v is not None and v.size != 1:
            raise bad(node, f"{what} must be per-tensor (one value), got {v.size}")
    for i, what in ((4, "w_scale"), (5, "w_zero_point")):
        v = _const(node, g, i, what)
        if v is not None:
            _per_channel(node, v, m, what)
    if opt_input(node, 8) and g.t(node.inputs[8]).dtype != I32:
        raise bad(node, "bias (input 8) must be int32")
    return [(shape, g.t(node.inputs[7]).dtype)]


def _convinteger_eval(node, xs):
    x, w = xs[0], xs[1]
    xz = xs[2] if len(xs) > 2 else None
    wz = xs[3] if len(xs) > 3 else None
    return [_qconv_sum(node, x, xz, w, wz)]


@register("ConvInteger", _convinteger_eval, dtypes=QTYPES + ("int32",),
          without_kernel="becomes rvvkit.QConv (passes/quant.py)")
def _convinteger(node, g):
    _qtype(node, g, 0)
    _qtype(node, g, 1)
    shape = _conv_like(node, g, 1)
    _const(node, g, 1, "w")     # the weights are packed at build time
    _runtime_zp_ok(node, g, 2, "x_zero_point")
    wz = _const(node, g, 3, "w_zero_point")
    if wz is not None:
        _per_channel(node, wz, shape[1], "w_zero_point")
    return [(shape, I32)]


# -- matrix products --------------------------------------------------------------------------

def matmul_sum(a, az, b, bz) -> np.ndarray:
    """Exact int32 matmul of (a - az) and (b - bz); bz per tensor or per column of b."""
    bz = np.asarray(0 if bz is None else bz, np.int64)
    bc = np.asarray(b, np.int64) - (bz.reshape(-1) if bz.size > 1 else bz)
    return np.matmul(_centred(a, az), bc).astype(np.int32)


def _qlinearmatmul_eval(node, xs):
    a, asc, az, b, bsc, bz, ysc, yz = xs
    return [requant(matmul_sum(a, az, b, bz), combined_scale(asc, bsc, ysc),
                    int(np.asarray(yz).reshape(-1)[0]), np.asarray(yz).dtype)]


def _matmul_like(node, g, b_index: int):
    from ...ir import Node
    probe = Node("MatMul", node.name, [node.inputs[0], node.inputs[b_index]], node.outputs)
    return _matmul(probe, g)[0][0]


def _check_ab_params(node, g, n_cols: int, a_idx, b_idx):
    for i, what in a_idx:
        v = _const(node, g, i, what)
        if v is not None and v.size != 1:
            raise bad(node, f"{what} must be per-tensor (one value), got {v.size}")
    for i, what in b_idx:
        v = _const(node, g, i, what)
        if v is not None:
            _per_channel(node, v, n_cols, what)


@register("QLinearMatMul", _qlinearmatmul_eval, dtypes=QTYPES + ("int32", "float32"),
          without_kernel="becomes rvvkit.QMatMul (passes/quant.py)")
def _qlinearmatmul(node, g):
    if len(node.inputs) != 8:
        raise bad(node, "expects 8 inputs (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)")
    _qtype(node, g, 0)
    _qtype(node, g, 3)
    shape = _matmul_like(node, g, 3)
    _check_ab_params(node, g, in_shape(node, g, 3)[-1],
                     ((1, "a_scale"), (2, "a_zero_point"), (6, "y_scale"), (7, "y_zero_point")),
                     ((4, "b_scale"), (5, "b_zero_point")))
    return [(shape, g.t(node.inputs[7]).dtype)]


def _matmulinteger_eval(node, xs):
    a, b = xs[0], xs[1]
    az = xs[2] if len(xs) > 2 else None
    bz = xs[3] if len(xs) > 3 else None
    return [matmul_sum(a, az, b, bz)]


@register("MatMulInteger", _matmulinteger_eval, dtypes=QTYPES + ("int32",),
          without_kernel="becomes rvvkit.QMatMul (passes/quant.py)")
def _matmulinteger(node, g):
    _qtype(node, g, 0)
    _qtype(node, g, 1)
    shape = _matmul_like(node, g, 1)
    _runtime_zp_ok(node, g, 2, "a_zero_point")
    if opt_input(node, 2) and not g.is_const(node.inputs[2]) and not g.is_const(node.inputs[1]):
        raise bad(node, "a run-time a_zero_point needs a constant B (as quantize_dynamic writes "
                        "it: the weight as an initializer); both computed at run time is not "
                        "supported")
    _check_ab_params(node, g, in_shape(node, g, 1)[-1], (), ((3, "b_zero_point"),))
    return [(shape, I32)]


def _qgemm_operands(node, xs):
    a, asc, az, b, bsc, bz = xs[:6]
    at = node.attrs
    a = a.T if at.get("transA", 0) else a
    b = b.T if at.get("transB", 0) else b
    return a, asc, az, b, bsc, bz


def _qgemm_eval(node, xs):
    a, asc, az, b, bsc, bz = _qgemm_operands(node, xs)
    c = xs[6] if len(xs) > 6 else None
    acc = matmul_sum(a, az, b, bz).astype(np.int64)
    if c is not None:
        acc = acc + np.asarray(c, np.int64)
    acc = acc.astype(np.int32)
    alpha = np.float32(node.attrs.get("alpha", 1.0))
    ysc = xs[7] if len(xs) > 7 else None
    s = alpha * np.float32(np.asarray(asc, np.float32).reshape(-1)[0]) * \
        np.asarray(bsc, np.float32).reshape(-1)
    if ysc is None:
        return [(acc.astype(np.float32) * s).astype(np.float32)]
    yz = xs[8]
    return [requant(acc, s / np.float32(np.asarray(ysc).reshape(-1)[0]),
                    int(np.asarray(yz).reshape(-1)[0]), np.asarray(yz).dtype)]


@register("com.microsoft.QGemm", _qgemm_eval, dtypes=QTYPES + ("int32", "float32"),
          without_kernel="becomes rvvkit.QMatMul (passes/quant.py)")
def _qgemm(node, g):
    if len(node.inputs) < 6:
        raise bad(node, "expects at least 6 inputs (A, a_scale, a_zp, B, b_scale, b_zp)")
    _qtype(node, g, 0)
    _qtype(node, g, 3)
    a, b = in_shape(node, g, 0), in_shape(node, g, 3)
    if len(a) != 2 or len(b) != 2:
        raise bad(node, f"A and B must be 2-D, got {list(a)} and {list(b)}")
    if node.attrs.get("transA", 0):
        raise bad(node, "transA=1 is not supported")
    if node.attrs.get("transB", 0) and not g.is_const(node.inputs[3]):
        raise bad(node, "transB=1 needs a constant B")
    m, k = a
    k2, n = (b[1], b[0]) if node.attrs.get("transB", 0) else b
    if k != k2:
        raise bad(node, f"inner dimensions differ: {list(a)} x {list(b)}")
    c = opt_input(node, 6)
    if c and g.t(c).dtype != I32:
        raise bad(node, "C (input 6) must be int32")
    _check_ab_params(node, g, n, ((1, "a_scale"), (2, "a_zero_point"), (7, "y_scale"),
                                  (8, "y_zero_point")), ((4, "b_scale"), (5, "b_zero_point")))
    out = g.t(node.inputs[8]).dtype if opt_input(node, 8) else F32
    if opt_input(node, 7) and not opt_input(node, 8):
        out = np.dtype(np.uint8)   # the contrib op's default output zero point is uint8 0
    return [((m, n), out)]
