"""Conv cases: the union of what the C, RVV and CUDA kernel tests ran.

Subsets: CONV_EMU (the CUDA emulator), CONV_FORCED (re-lowered on every C code path),
CONV_OTHER_COMPILERS (compiled with g++ and clang)."""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np

from conftest import conv_ref
from rvvkit.codegen.kernels.conv.conv2d import conv2d
from kernel_cases.case import (CLIP, LEAKY, LEAKY2, RELU, SIGMOID, TANH, Case, act_name,
                               act_ref, dims, table)


def out_hw(h, w, k, strides, pads, dil):
    return ((h + pads[0] + pads[2] - dil[0] * (k[0] - 1) - 1) // strides[0] + 1,
            (w + pads[1] + pads[3] - dil[1] * (k[1] - 1) - 1) // strides[1] + 1)


def conv(n, c, h, w, m, k, group=1, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), bias=False,
         residual=False, act=None) -> Case:
    """Conv of an (n, c, h, w) input with m filters of size k; the weights are drawn with
    `weights="fan_in"` (default: scaled by 1/sqrt(fan-in), outputs of order 1) or "unit"
    (unit variance: the C tests scale their atol with the fan-in instead)."""
    ho, wo = out_hw(h, w, k, strides, pads, dil)
    xs, ws, ys = (n, c, h, w), (m, c // group) + tuple(k), (n, m, ho, wo)
    fan = c // group * k[0] * k[1]

    def lower():
        return conv2d(xs, ws, ys, group=group, strides=strides, pads=pads, dilations=dil,
                      bias=bias, residual=residual, act=act)

    def make(rng, weights="fan_in"):
        scale = 1.0 if weights == "unit" else 1.0 / math.sqrt(fan)
        x = rng.standard_normal(xs).astype(np.float32)
        wt = (rng.standard_normal(ws) * scale).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32) if bias else None
        r = rng.standard_normal(ys).astype(np.float32) if residual else None
        ref = conv_ref(x.astype(np.float64), wt.astype(np.float64), b, group, strides, pads,
                       dil)
        ref = act_ref(act, ref + r if residual else ref)
        return [x, wt] + ([b] if bias else []) + ([r] if residual else []), ref

    cid = (f"conv-{dims(xs)}-m{m}-k{dims(k)}-g{group}-s{dims(strides)}-p{dims(pads)}"
           f"-d{dims(dil)}{'-b' if bias else ''}{'-r' if residual else ''}{act_name(act)}")
    params = dict(n=n, c=c, h=h, w=w, m=m, k=k, group=group, fan_in=fan)
    return Case(cid, lower, make, params, cost=math.prod(ys) * fan)


def _c(n, c, h, w, m, k, g, st, pd, dl, bias, res, act):
    """The tuple form of the C and RVV tables."""
    return conv(n, c, h, w, m, k, g, st, pd, dl, bias, res, act)


def _cu(xs, ws, group=1, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), bias=False,
        residual=False, act=None):
    """The (input shape, weight shape) form of the CUDA table."""
    return conv(*xs, ws[0], ws[2:], group, strides, pads, dil, bias, residual, act)


CONV = table(0, [
    # (N, C, H, W, M, (kh, kw), group, strides, pads (t, l, b, r), dilations, bias, res, act)
    _c(1, 3, 13, 17, 8, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    _c(2, 4, 7, 7, 5, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, True, RELU),   # batch 2
    _c(1, 16, 1, 1, 33, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), False, False, CLIP),  # 1x1
    _c(1, 5, 1, 1, 7, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),  # 1x1, 3x3
    _c(1, 6, 17, 13, 4, (5, 3), 2, (2, 3), (2, 0, 1, 1), (1, 1), True, True, None),  # group 2
    _c(1, 5, 11, 9, 7, (3, 3), 1, (1, 1), (2, 2, 2, 2), (2, 2), False, True, LEAKY),  # dil 2
    _c(1, 3, 5, 5, 4, (7, 7), 1, (1, 1), (3, 3, 3, 3), (1, 1), True, False, CLIP),  # k > image
    _c(1, 2, 3, 3, 3, (5, 5), 1, (1, 1), (2, 2, 2, 2), (1, 1), False, False, None),
    _c(1, 64, 7, 7, 96, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, True, RELU),  # small img
    _c(1, 32, 14, 14, 64, (1, 1), 1, (2, 2), (0, 0, 0, 0), (1, 1), True, False, None),  # 1x1 /2
    _c(1, 3, 30, 30, 16, (7, 7), 1, (2, 2), (3, 3, 3, 3), (1, 1), True, False, RELU),  # stem
    _c(1, 600, 3, 3, 20, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),  # k-blocks
    _c(1, 7, 13, 17, 11, (3, 3), 1, (3, 3), (0, 1, 2, 0), (1, 1), True, True, CLIP),  # stride 3
    _c(2, 8, 9, 9, 16, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), True, False, LEAKY2),  # grouped
    _c(1, 4, 17, 7, 6, (2, 4), 1, (1, 2), (0, 3, 1, 0), (2, 1), False, False, None),  # odd all
    _c(1, 300, 13, 13, 40, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, True, RELU),  # pw
    _c(1, 64, 7, 7, 130, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, False, SIGMOID),
    _c(2, 5, 10, 12, 9, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, True, RELU),  # batch 2
    _c(1, 4, 6, 5, 3, (3, 3), 1, (1, 1), (4, 3, 0, 4), (1, 1), True, False, None),  # pads > k
    _c(1, 6, 11, 11, 5, (1, 1), 1, (3, 2), (1, 0, 0, 1), (1, 1), False, True, None),  # 1x1 s>k
    _c(1, 32, 28, 28, 48, (3, 3), 1, (2, 2), (1, 1, 1, 1), (1, 1), True, False, RELU),
    _c(1, 16, 27, 27, 64, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, RELU),
    # depthwise
    _c(1, 8, 13, 13, 8, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), True, False, RELU),
    _c(2, 8, 14, 14, 8, (3, 3), 8, (2, 2), (0, 1, 1, 0), (1, 1), True, True, None),
    _c(1, 8, 70, 70, 8, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), False, False, CLIP),
    _c(2, 6, 9, 9, 6, (3, 3), 6, (3, 3), (1, 1, 1, 1), (2, 2), True, True, RELU),
    _c(1, 3, 1, 1, 3, (3, 3), 3, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    _c(1, 4, 17, 11, 4, (5, 5), 4, (2, 1), (2, 2, 2, 2), (1, 1), False, False, LEAKY),
    _c(1, 5, 9, 9, 5, (3, 3), 5, (1, 1), (1, 1, 1, 1), (1, 1), True, False, SIGMOID),
    # Winograd F(4x4, 3x3) (the cost model's choice for these): whole and partial tiles,
    # batch 2 (tiles of both images in one GEMM), asymmetric pads
    _c(1, 32, 14, 14, 32, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, True, RELU),
    _c(2, 24, 16, 13, 48, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, CLIP),
    _c(1, 24, 20, 19, 40, (3, 3), 1, (1, 1), (0, 2, 1, 0), (1, 1), False, False, SIGMOID),
    # implicit-GEMM conv on CUDA: several row/column tiles, k-slices, every tile shape
    _cu((2, 4, 7, 9), (6, 2, 3, 3), group=2, strides=(2, 2), pads=(1, 1, 1, 1), bias=True,
        residual=True, act=RELU),
    _cu((1, 3, 11, 13), (5, 3, 3, 3), pads=(0, 2, 1, 0), dil=(2, 1), bias=True, act=CLIP),
    _cu((1, 16, 8, 8), (32, 16, 1, 1), act=LEAKY),                          # pointwise
    _cu((2, 8, 9, 7), (12, 8, 1, 1), strides=(2, 2), bias=True),
    _cu((1, 20, 9, 9), (70, 20, 3, 3), pads=(1, 1, 1, 1), bias=True, act=SIGMOID),  # 5 x 12
    _cu((2, 5, 12, 11), (70, 5, 3, 3), pads=(1, 1, 1, 1), residual=True, act=RELU),  # 64x64
    _cu((1, 4, 6, 6), (8, 1, 3, 3), group=4, pads=(1, 1, 1, 1), bias=True),  # multiplier 2
    _cu((3, 2, 10, 11), (3, 2, 5, 3), strides=(1, 2), pads=(2, 1, 2, 1), residual=True,
        act=TANH),                                                          # batch 3
    _cu((2, 3, 12, 12), (8, 3, 3, 3), pads=(1, 1, 1, 1), bias=True),
    _cu((1, 32, 3, 3), (130, 32, 3, 3), bias=True),                         # 128x16
    _cu((1, 6, 5, 4), (9, 2, 2, 3), group=3, strides=(3, 1), pads=(1, 0, 2, 2), dil=(1, 2),
        bias=True, residual=True),
    # depthwise on CUDA (direct kernel)
    _cu((2, 4, 7, 9), (4, 1, 3, 3), group=4, strides=(2, 2), pads=(1, 1, 1, 1), bias=True,
        residual=True, act=SIGMOID),
    _cu((1, 3, 20, 19), (3, 1, 5, 5), group=3, pads=(3, 0, 1, 4), dil=(2, 1), act=TANH),
    _cu((1, 2, 20, 20), (2, 1, 3, 3), group=2, pads=(1, 1, 1, 1), bias=True,
        act=RELU),                                                  # 400 positions: 2 blocks
    # Winograd on CUDA: transforms, the batched GEMM over the 36 elements, clipped borders
    _cu((2, 24, 16, 13), (48, 24, 3, 3), pads=(1, 1, 1, 1), bias=True, residual=True,
        act=RELU),
])

# The CUDA tests: their build time (g++ for the emulator, nvcc) grows with the number of
# kernels (~0.5 s per tiled kernel), so the CUDA table (from CONV_CUDA0 on) plus two borders the
# other tables add: 600 input channels (k blocks) and a kernel larger than the image.
CONV_CUDA0 = 32
CONV_EMU = CONV[CONV_CUDA0:] + (CONV[11], CONV[6])

# Re-lowered by the C tests on every path x orientation of the conv planner: plain, group 2,
# dilated, stride 3, grouped, odd everything.
CONV_FORCED = CONV[0], CONV[4], CONV[5], CONV[12], CONV[13], CONV[14]

# Compiled (not run) as C++ and with clang: one of each kernel shape class.
CONV_OTHER_COMPILERS = CONV[0], CONV[1], CONV[8], CONV[12], CONV[17], CONV[23], CONV[29]

# Winograd cases (the cost model's choice); CONV_WINOGRAD_FORCED are re-lowered with Winograd
# forced wherever it applies (3x3, stride 1, no dilation, one group), however small.
CONV_WINOGRAD = CONV[21], CONV[29], CONV[30], CONV[31]
def winograd_forced(case: Case, mode: str = "on") -> Case:
    """`case` lowered with $RVVKIT_WINOGRAD=`mode` during the lowering: "on", Winograd
    everywhere; "riscv", the kernel carrying both forms (Winograd compiled for RISC-V, the
    direct GEMM elsewhere: conv.by_target)."""
    def lower():
        old = os.environ.get("RVVKIT_WINOGRAD")
        os.environ["RVVKIT_WINOGRAD"] = mode
        try:
            return case.lower()
        finally:
            if old is None:
                del os.environ["RVVKIT_WINOGRAD"]
            else:
                os.environ["RVVKIT_WINOGRAD"] = old
    suffix = "-winograd" if mode == "on" else f"-winograd-{mode}"
    return dataclasses.replace(case, id=case.id + suffix, lower=lower)


CONV_WINOGRAD_FORCED = tuple(winograd_forced(CONV[i]) for i in (0, 3, 8, 11, 17, 18))
# both forms in one kernel: residual + ReLU, two images, asymmetric padding
CONV_WINOGRAD_RISCV = tuple(winograd_forced(CONV[i], "riscv") for i in (8, 17, 18))

__all__ = ["CONV", "CONV_CUDA0", "CONV_EMU", "CONV_FORCED", "CONV_OTHER_COMPILERS",
           "CONV_WINOGRAD", "CONV_WINOGRAD_FORCED", "CONV_WINOGRAD_RISCV", "conv", "out_hw",
           "winograd_forced"]
