"""Pooling and normalisation cases (MaxPool/AveragePool, global pools; LRN, Softmax and
LogSoftmax): the union of what the RVV and CUDA kernel tests ran. Every case is cheap to run;
the CUDA tests, whose build time grows with the number of kernels, take the *_EMU subsets: the
CUDA cases (the end of each table) and a few borders of the others."""
from __future__ import annotations

import math

import numpy as np

from rvvkit.codegen.kernels.reduce import pool as kpool
from kernel_cases.case import Case, dims, table


def out_len(n, k, s, p0, p1, d, ceil):
    span = n + p0 + p1 - d * (k - 1) - 1
    return (-(-span // s) if ceil else span // s) + 1


def pool_ref(kind, x, ks, strides, pads, dil, cip, out_hw):
    """ONNX pooling in float64: padded positions count for an average with
    count_include_pad, positions beyond the pads (ceil mode) never do."""
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = ks, strides, pads, dil
    h, w = x.shape[2:]
    y = np.empty(x.shape[:2] + tuple(out_hw))
    for oh in range(out_hw[0]):
        for ow in range(out_hw[1]):
            h0, w0 = oh * sh - pt, ow * sw - pl
            rows = [h0 + a * dh for a in range(kh) if 0 <= h0 + a * dh < h]
            cols = [w0 + b * dw for b in range(kw) if 0 <= w0 + b * dw < w]
            win = x[:, :, rows][:, :, :, cols].astype(np.float64)
            if kind == "max":
                y[:, :, oh, ow] = win.max(axis=(2, 3))
            else:
                div = ((min(h0 + kh, h + pb) - h0) * (min(w0 + kw, w + pr) - w0) if cip
                       else len(rows) * len(cols))
                y[:, :, oh, ow] = win.sum(axis=(2, 3)) / div
    return y


def pool2d(kind, shape, ks, strides, pads, dil=(1, 1), cip=False, ceil=False) -> Case:
    h, w = shape[2:]
    out_hw = (out_len(h, ks[0], strides[0], pads[0], pads[2], dil[0], ceil),
              out_len(w, ks[1], strides[1], pads[1], pads[3], dil[1], ceil))

    def make(rng):
        x = rng.standard_normal(shape).astype(np.float32)
        return [x], pool_ref(kind, x, ks, strides, pads, dil, cip, out_hw)

    return Case(f"{kind}pool-{dims(shape)}-k{dims(ks)}-s{dims(strides)}-p{dims(pads)}"
                f"-d{dims(dil)}{'-cip' if cip else ''}{'-ceil' if ceil else ''}",
                lambda: kpool.pool2d(kind, shape, shape[:2] + out_hw, ks, strides, pads, dil,
                                     cip),
                make, cost=math.prod(shape[:2] + out_hw) * ks[0] * ks[1])


def global_pool(kind, shape) -> Case:
    def make(rng):
        x = rng.standard_normal(shape).astype(np.float32)
        red = x.astype(np.float64).reshape(shape[0] * shape[1], -1)
        ref = red.mean(1) if kind == "avg" else red.max(1)
        return [x], ref.reshape(shape[:2] + (1, 1))

    return Case(f"global{kind}-{dims(shape)}", lambda: kpool.global_pool(kind, shape), make,
                cost=math.prod(shape))


def lrn_ref(x, size, alpha, beta, bias):
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.zeros_like(x, np.float64)
    for ch in range(c):
        sq[:, ch] = (x[:, max(0, ch - lo):min(c - 1, ch + hi) + 1].astype(np.float64) ** 2
                     ).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


def lrn(shape, size, alpha, beta, bias) -> Case:
    def make(rng):
        x = rng.standard_normal(shape).astype(np.float32)
        return [x], lrn_ref(x, size, alpha, beta, bias)

    return Case(f"lrn-{dims(shape)}-n{size}-a{alpha:g}-b{beta:g}-k{bias:g}",
                lambda: kpool.lrn(shape, size, alpha, beta, bias), make,
                cost=math.prod(shape) * size)


def softmax_ref(x, axis, coerce, log):
    shape = x.shape
    if coerce:       # opset < 13: the axes from `axis` on are flattened into one
        x, axis = x.reshape(math.prod(shape[:axis]), -1), 1
    z = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return (z - lse if log else np.exp(z - lse)).reshape(shape)


def softmax(shape, axis, coerce=False, log=False) -> Case:
    def make(rng):
        x = (3 * rng.standard_normal(shape)).astype(np.float32)
        return [x], softmax_ref(x, axis, coerce, log)

    return Case(f"{'log' if log else ''}softmax-{dims(shape)}-axis{axis}"
                f"{'-coerced' if coerce else ''}",
                lambda: kpool.softmax(shape, axis, coerce, log), make, cost=math.prod(shape))


POOL = table(500, [
    pool2d("max", (1, 3, 13, 17), (3, 3), (2, 2), (0, 0, 0, 0)),
    pool2d("max", (2, 2, 111, 111), (3, 3), (2, 2), (0, 0, 0, 0)),
    pool2d("max", (1, 4, 9, 10), (2, 2), (2, 2), (0, 0, 0, 0)),
    pool2d("max", (1, 3, 12, 11), (3, 3), (1, 1), (1, 1, 1, 1)),
    pool2d("max", (1, 2, 14, 70), (3, 2), (1, 3), (1, 0, 2, 1), (2, 1)),
    pool2d("avg", (1, 3, 13, 17), (3, 3), (1, 1), (1, 1, 1, 1)),
    pool2d("avg", (1, 3, 13, 17), (3, 3), (1, 1), (1, 1, 1, 1), cip=True),
    pool2d("avg", (2, 3, 20, 33), (5, 3), (2, 2), (2, 1, 2, 1), cip=True),
    pool2d("avg", (1, 2, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0)),
    pool2d("avg", (1, 2, 7, 40), (3, 3), (3, 2), (0, 2, 1, 0)),
    pool2d("max", (1, 2, 3, 3), (5, 5), (1, 1), (2, 2, 2, 2)),     # window > input
    pool2d("max", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1)),
    pool2d("max", (2, 3, 8, 8), (3, 3), (2, 2), (0, 0, 0, 0), ceil=True),
    pool2d("max", (1, 2, 9, 10), (2, 3), (1, 2), (1, 0, 0, 2), dil=(2, 2)),
    pool2d("avg", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1)),
    pool2d("avg", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1), cip=True),
    pool2d("avg", (2, 3, 8, 8), (3, 3), (2, 2), (0, 0, 0, 0), cip=True, ceil=True),
    pool2d("avg", (1, 1, 6, 7), (2, 3), (2, 1), (0, 2, 1, 0), cip=True),
    pool2d("avg", (1, 2, 9, 10), (3, 2), (2, 1), (2, 1, 0, 0), dil=(2, 3)),
    pool2d("avg", (2, 3, 8, 8), (3, 3), (2, 2), (0, 0, 0, 0), ceil=True),
])
GLOBAL_POOL = table(600, [global_pool(kind, shape) for kind, shape in [
    ("avg", (2, 5, 13, 13)), ("max", (1, 7, 7, 7)), ("avg", (1, 3, 1, 1)),
    ("max", (1, 2, 33, 65)), ("avg", (1, 1000, 1, 3))]] + [
    global_pool(kind, shape) for kind in ("max", "avg")
    for shape in [(2, 3, 5, 7), (1, 2, 20, 30), (1, 1, 1, 1)]])
LRN = table(650, [lrn(*args) for args in [
    ((1, 16, 13, 13), 5, 1e-4, 0.75, 1.0), ((2, 7, 3, 45), 3, 0.5, 0.75, 2.0),
    ((1, 6, 5, 5), 4, 0.1, 0.5, 1.5), ((1, 5, 70), 5, 0.2, 1.0, 1.0),
    ((1, 4, 3, 3), 3, 0.3, 0.6, 1.0), ((1, 7, 3, 5), 3, 1e-2, 0.75, 1.0),
    ((2, 6, 2, 3), 4, 0.5, 0.5, 2.0), ((2, 5, 1, 1), 5, 1.0, 1.3, 0.5)]])
SOFTMAX = table(700, [
    softmax((2, 1000), 1), softmax((3, 7), 1, log=True), softmax((2, 3, 4, 5), 1),
    softmax((2, 3, 33), 1, coerce=True), softmax((1, 1), 1, log=True),
    softmax((4, 257), 1, log=True)] + [
    softmax(shape, axis, coerce, log)
    for shape, axis, coerce in [((2, 5, 3), 1, False), ((4, 3), 0, False), ((2, 3, 7), 2, False),
                                ((2, 3, 4), 1, True), ((3, 2, 2), 0, True), ((3, 700), 1, False),
                                ((2, 3, 300), 1, False)]
    for log in (False, True)])

# 111x111 planes, dilation on one axis, a 5x3 average counting pads, a window > the input
POOL_EMU = POOL[11:] + (POOL[1], POOL[4], POOL[7], POOL[10])
# 1000 channels of 3, 33x65 planes
GLOBAL_POOL_EMU = GLOBAL_POOL[5:] + (GLOBAL_POOL[4], GLOBAL_POOL[3])
# size 5 over 16 channels, a 3-D input
LRN_EMU = LRN[5:] + (LRN[0], LRN[3])
# 1000 classes, LogSoftmax over 257 and over one element
SOFTMAX_EMU = SOFTMAX[6:] + (SOFTMAX[0], SOFTMAX[5], SOFTMAX[4])

__all__ = ["POOL_EMU", "GLOBAL_POOL_EMU", "LRN_EMU", "SOFTMAX_EMU", "POOL", "GLOBAL_POOL", "LRN", "SOFTMAX", "pool2d", "global_pool", "lrn", "softmax",
           "softmax_ref", "out_len"]
