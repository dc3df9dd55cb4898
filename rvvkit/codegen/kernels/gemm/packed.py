"""Blocked, packed GEMM: the Gemm and MatMul lowerings, and the design shared with Conv.

Modules: spec.py (Side, Epilogue: how a product is described to the emitters),
tiling.py (cost model, tile and block sizes, panel layout), emit.py (the C helpers:
micro-kernel, packer, epilogue), core.py (the driver loop nest), gemm_rvv*.py (their RVV
intrinsic bodies); this module lowers Gemm and MatMul onto them (conv/conv2d.py lowers Conv).

The core computes a P x Q tile grid of OUT = A'.B' over K, where A' ("row side", P) and B'
("column side", Q) are each one of
  * packed  - a constant pre-packed at build time into panels (see `pack_panels`),
  * strided - a runtime matrix, element (idx, k) at src[idx*si + k*sk], packed into `ws`,
  * custom  - a runtime operand with its own packing routine (conv's fused im2col),
  * row     - (row side, MR == 1 only) a runtime row read in place: a 1 x K panel *is* a row,
  * indirect - a runtime operand read in place, row k at src + off[k] (conv on a padded input).
A panel of width PW holds PW consecutive indices for a run of k: panel[k][PW], zero padded,
so the micro-kernel streams both operands contiguously.

The micro-kernel keeps an MR x NR accumulator array; written as plain C with constant trip
counts, gcc -O3 keeps it in registers (MR*NR/16 zmm on AVX-512) and vectorises along NR with one
broadcast per row: 12x32 reaches ~113 GFLOP/s here, the FMA peak. NR = 16 is never used: gcc
fully unrolls a 16-trip loop before vectorising and then SLP-vectorises it the wrong way.

`trans` in the epilogue says the roles are swapped: the row side indexes output *columns* (conv
with a tiny spatial size vectorises along output channels instead), so OUT is stored transposed.

Under RVV intrinsics (`#if defined(__riscv_v_intrinsic)`, see codegen/rvv.py) the micro-kernel,
the epilogue and the strided packer have vector bodies that read and write exactly the same
panels and tiles, so packing, tiling and the build-time weight transforms stay shared with x86.
The micro-kernel is register-blocked: per column strip of vl = min(NR - j0, VLMAX) columns and
row group of R rows it keeps R accumulators of LMUL registers and does, per k, one vle32 of b,
R scalar loads of a and R vfmacc.vf (rvv.py). LMUL is picked at run time from VLEN
(uk_plan): the widest strip that still holds NR columns with enough rows per group, so the
kernel's width scales with VLEN up to NR; a source built for one VLEN keeps only its variant.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ....ops.activations import Act
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import cdiv
from .core import core
from .spec import Epilogue, Side
from .tiling import choose_tile, pack_panels, tile_cost

_C_INDEX = {"scalar": "0", "row": "{m}", "col": "{n}"}


def _plan(m: int, n: int, k: int, b_const: bool, pack_rows: Optional[int] = None):
    """Pick orientation and tile for Y[m,n] = A[m,k] B[k,n]; returns (trans, mr, nr, a, b)
    where a/b are the Sides of the core's row/column operands and trans means the core's row
    side is B^T (used when n is too small to fill vector columns but m is not). With
    `pack_rows`, a constant B keeps the panels it would have for that many rows of A (a
    decoder's prefill plan reads the decoding plan's copy of each weight: one copy)."""
    if pack_rows is not None and b_const and pack_rows != m:
        trans, mr, nr = _plan(pack_rows, n, k, True)[:3]
        if trans:
            mr1, nr1 = choose_tile(n, m, k, trans=True, mrs=[mr])
            return True, mr1, nr1, Side("packed"), Side("strided", si=k, sk=1)
        mr0, nr0 = choose_tile(m, n, k, nrs=[nr])
        aside = Side("row", si=k) if mr0 == 1 else Side("strided", si=k, sk=1)
        return False, mr0, nr0, aside, Side("packed")
    mr0, nr0 = choose_tile(m, n, k)
    mr1, nr1 = choose_tile(n, m, k, trans=True)
    if tile_cost(n, m, k, mr1, nr1, True) < tile_cost(m, n, k, mr0, nr0, False):
        bside = Side("packed") if b_const else Side("strided", si=1, sk=n)
        return True, mr1, nr1, bside, Side("strided", si=k, sk=1)
    aside = Side("row", si=k) if mr0 == 1 else Side("strided", si=k, sk=1)
    bside = Side("packed") if b_const else Side("strided", si=1, sk=n)
    return False, mr0, nr0, aside, bside


def _b_transform(trans: bool, mr: int, nr: int, k: int, n: int, nbatch: int):
    """Build-time packing of a constant B ([..., k, n]) into the panels its side reads."""
    pw = mr if trans else nr

    def fn(w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, np.float32).reshape(nbatch, k, n)
        return np.concatenate([pack_panels(w[i].T, pw) for i in range(nbatch)])
    return fn


def _call(trans: bool, name: str, aptr: str, bptr: str, rest: str) -> str:
    """Core call with operands in the core's order (row side first)."""
    return f"{name}({bptr}, {aptr}, {rest});" if trans else f"{name}({aptr}, {bptr}, {rest});"


def gemm(M: int, N: int, K: int, *, b_const: bool, c_mode: Optional[str], alpha: float = 1.0,
         beta: float = 1.0, act: Optional[Act] = None, pack_rows: Optional[int] = None
         ) -> Lowered:
    """Y[M,N] = act(alpha * A[M,K] @ B[K,N] + beta * C); params a, b, [c], y. `pack_rows`:
    as matmul's."""
    trans, mr, nr, rs, cs = _plan(M, N, K, b_const, pack_rows)
    adds: Tuple = ()
    if c_mode is not None:
        if c_mode not in ("scalar", "row", "col", "full"):
            raise ValueError(f"gemm: unknown c_mode {c_mode!r}")
        idx = _C_INDEX.get(c_mode, f"{{m}} * {N} + {{n}}")
        adds = (("c", idx, beta),)
    ep = Epilogue(ldy=N, trans=trans, alpha=alpha, addends=adds, act=act)
    c = core("gemm", N if trans else M, M if trans else N, K, rs, cs, ep, mr, nr)
    params = [Param("a"), Param("b")] + ([Param("c")] if c_mode else []) + [Param("y", False)]
    rest = ("c, " if c_mode else "") + ("y, ws" if c.workspace else "y, (float *)0")
    body = indent(_call(trans, c.name, "a", "b", rest)) + "\n"
    spec = make_spec("gemm", M=M, N=N, K=K, b_const=b_const, c_mode=c_mode, alpha=alpha,
                     beta=beta, act=act, b_panel=(mr if trans else nr) if b_const else None)
    kern = Kernel("gemm", tuple(params), body, c.workspace, c.support, M * N * K, spec=spec)
    tr = {1: _b_transform(trans, mr, nr, K, N, 1)} if b_const else None
    return Lowered(kern, tr)


def matmul_dims(a_shape, b_shape):
    """(M, K, N, batch dims of a, b, y) of numpy.matmul: 1-D operands promoted, batch dims
    right-aligned and padded with 1 (broadcast)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) == 1:
        a_shape = (1,) + a_shape
    if len(b_shape) == 1:
        b_shape = b_shape + (1,)
    M, K = a_shape[-2:]
    N = b_shape[-1]
    nb = max(len(a_shape), len(b_shape)) - 2
    abat = (1,) * (nb - len(a_shape) + 2) + a_shape[:-2]
    bbat = (1,) * (nb - len(b_shape) + 2) + b_shape[:-2]
    ybat = tuple(max(x, y) for x, y in zip(abat, bbat))
    return M, K, N, abat, bbat, ybat


def _batch_loops(call, abat, bbat, ybat, asize: int, bsize: int, ysize: int) -> str:
    """Nested loops over the batch dims around `call(aptr, bptr, yptr)`; broadcast dims get
    stride 0 and single-entry dims no loop at all."""
    aoff, boff, yoff, heads = [], [], [], []
    for d in range(len(ybat)):
        if ybat[d] == 1:
            continue
        v = f"i{d}"
        heads.append(f"for (int {v} = 0; {v} < {ybat[d]}; ++{v}) {{")
        sa = int(np.prod(abat[d + 1:], dtype=np.int64)) * asize if abat[d] > 1 else 0
        sb = int(np.prod(bbat[d + 1:], dtype=np.int64)) * bsize if bbat[d] > 1 else 0
        sy = int(np.prod(ybat[d + 1:], dtype=np.int64)) * ysize
        aoff += [f"(ptrdiff_t){v} * {sa}"] if sa else []
        boff += [f"(ptrdiff_t){v} * {sb}"] if sb else []
        yoff.append(f"(ptrdiff_t){v} * {sy}")
    text = call(" + ".join(["a"] + aoff), " + ".join(["b"] + boff), " + ".join(["y"] + yoff))
    for head in reversed(heads):
        text = f"{head}\n{indent(text)}\n}}"
    return text


def matmul(a_shape, b_shape, y_shape, *, b_const: bool, pack_rows: Optional[int] = None
           ) -> Lowered:
    """numpy.matmul with batch broadcasting (1-D operands per numpy rules); params a, b, y.
    `pack_rows`: a constant B packed as for that many rows of A (see _plan)."""
    M, K, N, abat, bbat, ybat = matmul_dims(a_shape, b_shape)
    assert int(np.prod(ybat, dtype=np.int64)) * M * N == int(np.prod(y_shape, dtype=np.int64))
    trans, mr, nr, rs, cs = _plan(M, N, K, b_const, pack_rows)
    ep = Epilogue(ldy=N, trans=trans)
    c = core("matmul", N if trans else M, M if trans else N, K, rs, cs, ep, mr, nr)
    bsz = cdiv(N, mr if trans else nr) * (mr if trans else nr) * K if b_const else K * N
    ws = "ws" if c.workspace else "(float *)0"
    body = _batch_loops(lambda ap, bp, yp: _call(trans, c.name, ap, bp, f"{yp}, {ws}"),
                        abat, bbat, ybat, M * K, bsz, M * N)
    nbat = int(np.prod(ybat, dtype=np.int64))
    spec = make_spec("matmul", a_shape=a_shape, b_shape=b_shape, y_shape=y_shape,
                     b_const=b_const, b_panel=(mr if trans else nr) if b_const else None,
                     b_batch_floats=bsz)
    kern = Kernel("matmul", (Param("a"), Param("b"), Param("y", False)), indent(body) + "\n",
                  c.workspace, c.support, nbat * M * N * K, spec=spec)
    nbb = int(np.prod(bbat, dtype=np.int64))
    tr = {1: _b_transform(trans, mr, nr, K, N, nbb)} if b_const else None
    return Lowered(kern, tr)


declare_spec("matmul_t", ("nb", "M", "N", "K", "a_trans", "b_trans"))


def _plan_t(m: int, n: int, k: int, a_t: bool, b_t: bool):
    """_plan for runtime operands stored either way round: A [m][k] or (a_t) [k][m], B [k][n]
    or (b_t) [n][k]; the strided packer reads any of them (strides only)."""
    mr0, nr0 = choose_tile(m, n, k)
    mr1, nr1 = choose_tile(n, m, k, trans=True)
    a_str = Side("strided", si=1, sk=m) if a_t else Side("strided", si=k, sk=1)
    bside = Side("strided", si=k, sk=1) if b_t else Side("strided", si=1, sk=n)
    if tile_cost(n, m, k, mr1, nr1, True) < tile_cost(m, n, k, mr0, nr0, False):
        return True, mr1, nr1, bside, a_str
    aside = Side("row", si=k) if mr0 == 1 and not a_t else a_str
    return False, mr0, nr0, aside, bside


def matmul_t(nb: int, M: int, N: int, K: int, a_trans: bool, b_trans: bool) -> Lowered:
    """Y[z] = A[z] @ B[z] over nb batches, A[z] stored [M][K] or transposed ([K][M]), B[z]
    [K][N] or transposed ([N][K]); params a, b, y (Einsum forms like bhqd,bhkd->bhqk)."""
    trans, mr, nr, rs, cs = _plan_t(M, N, K, a_trans, b_trans)
    c = core("matmul", N if trans else M, M if trans else N, K, rs, cs,
             Epilogue(ldy=N, trans=trans), mr, nr)
    ws = "ws" if c.workspace else "(float *)0"
    def at(ptr: str, size: int) -> str:
        return ptr if nb == 1 else f"{ptr} + (ptrdiff_t)z * {size}"
    body = _call(trans, c.name, at("a", M * K), at("b", K * N), f"{at('y', M * N)}, {ws}")
    if nb > 1:
        body = f"for (int z = 0; z < {nb}; ++z) {{\n{indent(body)}\n}}"
    spec = make_spec("matmul_t", nb=nb, M=M, N=N, K=K, a_trans=a_trans, b_trans=b_trans)
    kern = Kernel("matmul", (Param("a"), Param("b"), Param("y", False)), indent(body) + "\n",
                  c.workspace, c.support, nb * M * N * K, spec=spec)
    return Lowered(kern)
