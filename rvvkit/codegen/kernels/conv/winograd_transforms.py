"""Winograd F(4x4, 3x3): the transforms as data, shared by the C, RVV and CUDA conv kernels.

A 3x3 stride-1 convolution computes each 4x4 block of outputs from the 6x6 input tile d around
it as Y = A^T [(G g G^T) . (B^T d B)] A (Lavin & Gray, 2015): 36 multiplications per channel pair
and tile instead of 144. The weight transform U = G g G^T is done once at build time, so per
inference a conv becomes an input transform, 36 independent GEMMs (one per element e of the
6x6 tile: OUT_e[m][t] = sum_c U_e[m][c] V_e[c][t]) and an output transform.

The transforms run as straight-line programs over six inputs: each 2-D transform is the 1-D one
on every row, then on every column. The programs are factored by hand (14 operations for B^T
instead of 22 products and sums, 10 for A^T); `tests/unit/codegen/test_winograd.py` checks that they
compute exactly the matrices below. The points 0, +-1, +-2, +-1/2 keep the rounding error of
fp32 near 1e-6 relative for unit-scale data (F(6x6, 3x3) would be 2.25x fewer products, at ~10x
the error).
"""
from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy as np

from ...rvv import vop

M_OUT, R_K, TILE = 4, 3, 6          # outputs per tile side, kernel side, input tile side
NE = TILE * TILE                    # GEMMs per conv (elements of the transformed tile)

BT = np.array([[4, 0, -5, 0, 1, 0],
               [0, -4, -4, 1, 1, 0],
               [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0],
               [0, 4, 0, -5, 0, 1]], np.float64)
G = np.array([[1 / 4, 0, 0],
              [-1 / 6, -1 / 6, -1 / 6],
              [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6],
              [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 1, 1, 0],
               [0, 1, -1, 2, -2, 0],
               [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]], np.float64)

# A program: (destination, op, operands...) over inputs d0..d5, giving o0..o<n-1>; ops are
# ("add", a, b): a + b, ("sub", a, b): a - b, ("fma", a, c, b): a + c * b (c a constant).
Program = Sequence[Tuple]
IN_PROG: Program = (                 # B^T d: 6 -> 6
    ("t0", "sub", "d4", "d2"), ("t1", "sub", "d3", "d1"), ("t2", "add", "d3", "d4"),
    ("t3", "add", "d1", "d2"), ("t4", "sub", "d4", "d3"), ("t5", "sub", "d1", "d2"),
    ("t6", "sub", "d0", "d2"), ("t7", "sub", "d5", "d3"),
    ("o0", "fma", "t0", 4, "t6"), ("o1", "fma", "t2", -4, "t3"), ("o2", "fma", "t4", 4, "t5"),
    ("o3", "fma", "t0", 2, "t1"), ("o4", "fma", "t0", -2, "t1"), ("o5", "fma", "t7", -4, "t1"))
OUT_PROG: Program = (                # A^T m: 6 -> 4
    ("s1", "add", "d1", "d2"), ("s2", "add", "d3", "d4"), ("u1", "sub", "d1", "d2"),
    ("u2", "sub", "d3", "d4"), ("t0", "add", "d0", "s1"), ("o0", "add", "t0", "s2"),
    ("o1", "fma", "u1", 2, "u2"), ("o2", "fma", "s1", 4, "s2"), ("t1", "add", "d5", "u1"),
    ("o3", "fma", "t1", 8, "u2"))


def run_program(prog: Program, inputs: Sequence):
    """Evaluate a program on numbers or numpy arrays (the tests' reference); outputs in order."""
    env = {f"d{i}": v for i, v in enumerate(inputs)}
    for dst, op, *args in prog:
        if op == "add":
            env[dst] = env[args[0]] + env[args[1]]
        elif op == "sub":
            env[dst] = env[args[0]] - env[args[1]]
        else:
            env[dst] = env[args[0]] + args[1] * env[args[2]]
    return [env[f"o{i}"] for i in range(n_outputs(prog))]


def n_outputs(prog: Program) -> int:
    return sum(1 for dst, *_ in prog if dst.startswith("o"))


def weights(w: np.ndarray) -> np.ndarray:
    """(M, C, 3, 3) weights -> (36, M, C) U = G g G^T, computed in float64."""
    w = np.asarray(w, np.float64)
    u = np.einsum("ar,mcrs,bs->abmc", G, w, G)
    return u.reshape(NE, w.shape[0], w.shape[1]).astype(np.float32)


def _c_stmt(dst: str, op: str, args, prefix: str, ty: str) -> str:
    a = [f"{prefix}{x}" if isinstance(x, str) else x for x in args]
    if op == "add":
        expr = f"{a[0]} + {a[1]}"
    elif op == "sub":
        expr = f"{a[0]} - {a[1]}"
    else:
        expr = f"{a[0]} + {float(a[1])!r}f * {a[2]}"
    return f"const {ty} {prefix}{dst} = {expr};"


def c_lines(prog: Program, prefix: str, load: Callable[[int], str],
            store: Callable[[int, str], str], ty: str = "float") -> List[str]:
    """Scalar C (also CUDA): `load(i)` is the expression of input i, `store(i, v)` the
    statement writing output i; temporaries are `<prefix><name>`."""
    lines = [f"const {ty} {prefix}d{i} = {load(i)};" for i in range(TILE)]
    lines += [_c_stmt(dst, op, args, prefix, ty) for dst, op, *args in prog]
    return lines + [store(i, f"{prefix}o{i}") for i in range(n_outputs(prog))]


def rvv_lines(prog: Program, prefix: str, lmul: int, load: Callable[[int], str],
              store: Callable[[int, str], str]) -> List[str]:
    """The same program on f32 vectors at LMUL (vl in `vl`): one vector op per step."""
    ty = f"vfloat32m{lmul}_t"
    lines = [f"const {ty} {prefix}d{i} = {load(i)};" for i in range(TILE)]
    for dst, op, *args in prog:
        if op == "fma":
            expr = f"{vop('vfmacc_vf', lmul)}({prefix}{args[0]}, {float(args[1])!r}f, " \
                   f"{prefix}{args[2]}, vl)"
        else:
            expr = f"{vop('vf' + op + '_vv', lmul)}({prefix}{args[0]}, {prefix}{args[1]}, vl)"
        lines.append(f"const {ty} {prefix}{dst} = {expr};")
    return lines + [store(i, f"{prefix}o{i}") for i in range(n_outputs(prog))]
