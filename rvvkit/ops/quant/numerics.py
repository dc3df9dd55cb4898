"""The numerics of the quantized element-wise ops, in numpy, as onnxruntime 1.32's CPU provider
computes them (MLAS on x86-64 with AVX2/FMA, the kernels a user of rvvkit compares against):
what the folding evaluations compute, and the build-time constants and tables the C, RVV and
CUDA kernels read. Every float step is float32 and in onnxruntime's order; where it fuses a
multiply-add (FMA), so do we, and nowhere else.

- Quantize: y = sat(rint_even(clamp(x / s, qmin - zp, qmax - zp)) + zp); NaN gives qmin (the
  clamp drops it, as MLAS's max(x, lo) does).
- QLinearAdd (MLAS qladd, AVX2): with the operands in the roles MLAS gets them (see
  `qladd_roles`), v = fma(x, rx, fma(y, ry, F)), rx = sx / sc, ry = sy / sc,
  F = zc - fma(rx, zx, ry * zy), then sat(rint_even(v)).
- QLinearMul (MLAS qlmul, SSE2): v = (float)((a - za) * (b - zb)) * (sa * sb / sc) + zc, the
  multiply and the add rounded separately.
- Lookup-table ops (QLinearSigmoid, QLinearLeakyRelu, QLinearConcat's requantisation): a table
  of 256 outputs, one per input byte: dequantize, the float op, quantize.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence, Tuple

import numpy as np

F32 = np.float32
QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def qrange(dtype) -> Tuple[int, int]:
    return QRANGE[np.dtype(dtype).name]


def fma32(a, b, c) -> np.ndarray:
    """float32 fma(a, b, c), correctly rounded: the exact a*b (48 bits) plus c in float64 is
    exact whenever the two do not lie more than 53 bits apart; otherwise float64 rounds once,
    and float32 would round a second time only at an exact float32 midpoint, which the sign of
    the float64 sum's error then decides."""
    a, b, c = (np.asarray(v, F32).astype(np.float64) for v in (a, b, c))
    p = a * b                       # exact
    s = p + c
    bp = s - c                      # two-sum error of s = p + c
    err = (p - bp) + (c - (s - bp))
    out = s.astype(F32)
    down = np.where(out.astype(np.float64) > s, np.nextafter(out, F32(-np.inf)), out)
    up = np.nextafter(down, F32(np.inf))
    mid = (down.astype(np.float64) + up.astype(np.float64)) / 2   # exact in float64
    tie = (err != 0) & (s == mid)
    out = np.where(tie, np.where(err > 0, up, down), out)
    return out.astype(F32)


def round_even_sat(v: np.ndarray, dtype) -> np.ndarray:
    """float32 values rounded half to even and saturated to `dtype` (NaN gives qmin)."""
    lo, hi = qrange(dtype)
    v = np.asarray(v, F32)
    v = np.where(v > F32(lo), v, F32(lo))
    v = np.where(v < F32(hi), v, F32(hi))
    return np.rint(v).astype(np.int32).astype(dtype)


def per_axis(v: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """A 1-D per-axis parameter shaped to broadcast along `axis` of a rank-`rank` tensor (a
    scalar or a 1-element one as it is)."""
    v = np.asarray(v)
    if v.ndim == 0 or v.size == 1 or rank == 0:
        return v.reshape(())
    shape = [1] * rank
    shape[axis] = v.size
    return v.reshape(shape)


def quantize(x, scale, zp, dtype) -> np.ndarray:
    """QuantizeLinear (scale and zp already shaped to broadcast against x)."""
    lo, hi = qrange(dtype)
    zp = np.asarray(zp, np.int32)
    v = (np.asarray(x, F32) / np.asarray(scale, F32)).astype(F32)
    v = np.where(v > (lo - zp).astype(F32), v, (lo - zp).astype(F32))
    v = np.where(v < (hi - zp).astype(F32), v, (hi - zp).astype(F32))
    return (np.rint(v).astype(np.int32) + zp).astype(dtype)


def dequantize(x, scale, zp) -> np.ndarray:
    """DequantizeLinear: (float)(int32(x) - int32(zp)) * scale, the difference wrapping in
    32 bits as onnxruntime's does for int32 inputs."""
    d = (np.asarray(x, np.int64) - np.asarray(zp, np.int64)).astype(np.int32)
    return (d.astype(F32) * np.asarray(scale, F32)).astype(F32)


def dynamic_qparams(x: np.ndarray) -> Tuple[np.float32, np.uint8]:
    """DynamicQuantizeLinear's (scale, zero point): the range widened to hold 0, scale
    (max - min) / 255 (1 for an all-zero range), zp = rint_even(clamp(0 - min / scale))."""
    x = np.asarray(x, F32)
    lo = min(F32(x.min()) if x.size else F32(0), F32(0))
    hi = max(F32(x.max()) if x.size else F32(0), F32(0))
    scale = F32(1.0) if hi == lo else F32(F32(hi - lo) / F32(255))
    izp = F32(F32(0) - F32(lo / scale))
    izp = min(max(izp, F32(0)), F32(255))
    return scale, np.uint8(np.rint(izp))


# -- QLinearAdd / QLinearMul ---------------------------------------------------------------

def qladd_swap(a_shape: Sequence[int], b_shape: Sequence[int]) -> bool:
    """Whether onnxruntime hands MLAS the operands swapped (B as the vector operand), which
    changes the order of the fused operations: when A is a single element, or A is constant
    along the innermost output axis that is not 1 while B is not a single element."""
    out = np.broadcast_shapes(tuple(a_shape), tuple(b_shape))
    if math.prod(a_shape) == 1:
        return True
    if math.prod(b_shape) == 1:
        return False
    full = (1,) * (len(out) - len(a_shape)) + tuple(a_shape)
    for d in range(len(out) - 1, -1, -1):
        if out[d] != 1:
            return full[d] == 1
    return False


def qladd_consts(sx, zx, sy, zy, sc, zc) -> Tuple[np.float32, np.float32, np.float32]:
    """(rx, ry, F) of v = fma(x, rx, fma(y, ry, F)) for the operands in MLAS's roles."""
    rx, ry = F32(F32(sx) / F32(sc)), F32(F32(sy) / F32(sc))
    f = F32(F32(zc) - fma32(rx, F32(zx), F32(ry * F32(zy))))
    return rx, ry, f


def qladd(a, sa, za, b, sb, zb, sc, zc) -> np.ndarray:
    swap = qladd_swap(np.shape(a), np.shape(b))
    x, sx, zx, y, sy, zy = (b, sb, zb, a, sa, za) if swap else (a, sa, za, b, sb, zb)
    rx, ry, f = qladd_consts(sx, zx, sy, zy, sc, zc)
    xv, yv = np.broadcast_arrays(np.asarray(x, F32), np.asarray(y, F32))
    return round_even_sat(fma32(xv, rx, fma32(yv, ry, f)), np.asarray(a).dtype)


def qlmul_ratio(sa, sb, sc) -> np.float32:
    return F32(F32(F32(sa) * F32(sb)) / F32(sc))


def qlmul(a, sa, za, b, sb, zb, sc, zc) -> np.ndarray:
    p = (np.asarray(a, np.int32) - int(za)) * (np.asarray(b, np.int32) - int(zb))
    v = (p.astype(F32) * qlmul_ratio(sa, sb, sc)).astype(F32) + F32(zc)
    return round_even_sat(v.astype(F32), np.asarray(a).dtype)


# -- lookup tables ---------------------------------------------------------------------------

def byte_values(dtype) -> np.ndarray:
    """The value of each byte 0..255 read as `dtype` (table index order)."""
    return np.arange(256, dtype=np.uint8).view(np.dtype(dtype))


def lut(fn: Callable[[np.ndarray], np.ndarray], sx, zx, sy, zy, dtype) -> np.ndarray:
    """256 outputs (raw bytes, indexed by the input's byte) of quantize(fn(dequantize(x)))."""
    deq = (F32(sx) * (byte_values(dtype).astype(np.int32) - int(zx)).astype(F32)).astype(F32)
    return quantize(np.asarray(fn(deq), F32), F32(sy), int(zy), dtype).view(np.uint8)


def apply_lut(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[np.asarray(x).view(np.uint8)].view(np.asarray(x).dtype)


def sigmoid(v: np.ndarray) -> np.ndarray:
    """Float32 logistic function (onnxruntime uses MLAS's polynomial; the two differ by an ulp
    or so, which moves a quantized output by one only right at a rounding boundary)."""
    return (1.0 / (1.0 + np.exp(-np.asarray(v, np.float64)))).astype(F32)


def leaky_relu(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda v: np.where(v >= 0, v, (F32(alpha) * v).astype(F32)).astype(F32)


def softmax_table(x_scale, reduce_len: int) -> np.ndarray:
    """QLinearSoftmax's e^x table (float32, 256 entries; entry k is for x - max = k - 255):
    scaled by e^(bits * x_scale), with `bits` leaving headroom so the row sum stays finite."""
    xs = float(F32(x_scale))
    bits = math.log(float(F32(F32(np.finfo(F32).max) / F32(reduce_len))))
    bits = max(0.0, bits - 5) / xs
    return np.array([math.exp((k - 255 + bits) * xs) for k in range(256)], F32)


def softmax_rows(x: np.ndarray, table: np.ndarray, y_scale, y_zp, dtype) -> np.ndarray:
    """QLinearSoftmax over the last axis of x (rows): e = table[255 - max + x], the sum in
    order, y = rint_even(e * floor(1 / y_scale) / sum) + zp, capped at 255 (then, for int8,
    the low byte as onnxruntime stores it)."""
    rows = np.asarray(x, np.int32).reshape(-1, x.shape[-1])
    ys = F32(math.floor(F32(F32(1.0) / F32(y_scale))))
    out = np.empty(rows.shape, np.int32)
    for r, row in enumerate(rows):
        e = table[255 - row.max() + row]
        s = F32(0)
        for v in e:
            s = F32(s + v)
        q = np.rint(((e * ys).astype(F32) / s).astype(F32)).astype(np.int32) + int(y_zp)
        out[r] = np.minimum(q, 255)
    return (out & 0xFF).astype(np.uint8).view(np.dtype(dtype)).reshape(x.shape)
