"""Gemm and MatMul cases: the union of what the C, RVV and CUDA kernel tests ran.

Subsets: GEMM_EMU (the CUDA emulator)."""
from __future__ import annotations

import math

import numpy as np

from rvvkit.codegen.kernels.gemm.packed import gemm as lower_gemm
from rvvkit.codegen.kernels.gemm.packed import matmul as lower_matmul
from kernel_cases.case import CLIP, LEAKY, RELU, SIGMOID, Case, act_name, act_ref, dims, table

C_SHAPES = {None: None, "scalar": lambda m, n: (1,), "row": lambda m, n: (m, 1),
            "col": lambda m, n: (n,), "full": lambda m, n: (m, n)}


def gemm(m, n, k, b_const, c_mode=None, alpha=1.0, beta=1.0, act=None) -> Case:
    """alpha * A @ B + beta * C (C broadcast by `c_mode`), then `act`. B is drawn with
    `weights="fan_in"` (default: scaled by 1/sqrt(k)) or "unit" (the C tests scale their atol
    with k instead)."""
    def lower():
        return lower_gemm(m, n, k, b_const=b_const, c_mode=c_mode, alpha=alpha, beta=beta,
                          act=act)

    def make(rng, weights="fan_in"):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n))
        b = (b if weights == "unit" else b / math.sqrt(k)).astype(np.float32)
        ref = alpha * (a.astype(np.float64) @ b)
        ins = [a, b]
        if c_mode:
            c = rng.standard_normal(C_SHAPES[c_mode](m, n)).astype(np.float32)
            ref = ref + beta * c
            ins.append(c)
        return ins, act_ref(act, ref)

    cid = (f"gemm-{m}x{n}x{k}-{'const' if b_const else 'var'}-{c_mode}-a{alpha:g}-b{beta:g}"
           f"{act_name(act)}")
    return Case(cid, lower, make, dict(m=m, n=n, k=k), cost=m * n * k)


def matmul(a_shape, b_shape, b_const) -> Case:
    y_shape = np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape

    def make(rng):
        a = rng.standard_normal(a_shape).astype(np.float32)
        b = rng.standard_normal(b_shape).astype(np.float32)
        return [a, b], np.matmul(a.astype(np.float64), b)

    return Case(f"matmul-{dims(a_shape)}-{dims(b_shape)}-{'const' if b_const else 'var'}",
                lambda: lower_matmul(a_shape, b_shape, y_shape, b_const=b_const), make,
                dict(k=a_shape[-1]), cost=math.prod(y_shape) * a_shape[-1])


# Every C-operand mode x B constant or not, with the epilogues spread over the modes.
GRID_SHAPES = [(1, 7, 5), (5, 13, 17), (1, 300, 700), (64, 3, 100), (33, 1, 9), (7, 65, 1),
               (100, 100, 800), (1, 1, 1), (14, 129, 40), (3, 200, 64)]
EPILOGUES = [(None, 1.0, 1.0, None), ("scalar", 0.5, 2.0, RELU), ("row", 1.0, -1.0, LEAKY),
             ("col", 1.0, 1.0, CLIP), ("full", -0.25, 0.5, None)]

GEMM = table(0, [gemm(m, n, k, bc, cm, al, be, act)
                 for (m, n, k) in GRID_SHAPES for bc in (False, True)
                 for cm, al, be, act in EPILOGUES] + [
    # the CUDA templates: split-K (FC at batch 1, 32 columns, 3 k-chunks), every tile shape
    gemm(1, 10, 64, True, "col", act=RELU),
    gemm(33, 10, 64, False, "full", alpha=0.5, beta=2.0),
    gemm(5, 300, 40, True, "row", act=SIGMOID),
    gemm(70, 130, 37, True, "scalar", alpha=-1.5, act=CLIP),
    gemm(9, 3, 200, False),
    gemm(2, 4100, 5, False, "col"),
    gemm(3, 50, 600, True, "full", beta=-0.5),
    gemm(17, 129, 17, False, "row", act=LEAKY),
    # RVV at VLEN 1024: a group of 4 panels then the fallback pair (6 panels, finished into y);
    # 3 + 2 panels of 8 rows, through the tile buffer
    gemm(14, 192, 24, True, "col", act=RELU),
    gemm(16, 160, 30, False, "full"),
])

# The CUDA tests (their g++ and nvcc build time grows with the number of kernels, ~0.5 s per
# tiled kernel): their own template cases plus the grid's degenerate borders, k = 1 (7x65x1,
# no C) and 1x1x1 (B constant, C per row, LeakyRelu).
GRID = len(GRID_SHAPES) * 2 * len(EPILOGUES)
GEMM_EMU = GEMM[GRID:] + (GEMM[50], GEMM[77])

MATMUL = table(100, [matmul(sa, sb, bc) for sa, sb in [
    ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 6)), ((4,), (4, 5)),
    ((3, 4), (4,)), ((2, 3, 4), (2, 4, 2)), ((1, 5, 7), (3, 7, 33)), ((7,), (2, 7, 3)),
    ((2, 3, 1, 40), (1, 40, 70)), ((1, 1, 2, 50), (2, 3, 50, 3))] for bc in (False, True)] + [
    matmul((2, 3, 5, 7), (7, 4), True),
    matmul((2, 1, 50, 7), (3, 7, 40), False),
    matmul((7,), (7,), False),
    matmul((6,), (2, 6, 9), False),
    matmul((4, 20, 33), (33,), False),
    matmul((3, 12, 20), (3, 20, 17), True),
    matmul((2, 70, 20), (20, 70), False),
    matmul((2, 1, 3, 9), (1, 4, 9, 11), True),
])

# The CUDA tests: their own cases (from MATMUL_CUDA0 on) and the others' 4-D broadcast of both
# operands.
MATMUL_CUDA0 = 20
MATMUL_EMU = MATMUL[MATMUL_CUDA0:] + (MATMUL[19],)

__all__ = ["GEMM", "GEMM_EMU", "MATMUL", "MATMUL_EMU", "gemm", "matmul"]
