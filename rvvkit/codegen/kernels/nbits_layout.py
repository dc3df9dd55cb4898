"""The column layout both MatMulNBits kernels (nbits_f32.py, nbits_int8.py) run on, made from
onnxruntime's MatMulNBits format (rvvkit/nbits.py) at build time, and the kernel they share
around their bodies.

Row k of block blk holds the codes of every output column, so that a vector runs along
columns: at 4 bits two per byte, column j in the low nibble and column j + ceil(N/2) in the
high one (both halves of the output contiguous); at 8 bits one per byte as int8 (code - 128:
signed products, the zero point shifted alike). Scales and zero points are [blocks, N]
floats. Parts (threads) are groups of PAIRS byte columns."""
from __future__ import annotations

from typing import Dict

import numpy as np

from .. import rvv
from ..kernel import Kernel, Lowered, Param, make_spec
from ..parallel import split_of
from ... import nbits

PAIRS = 64   # byte columns (column pairs at 4 bits) per part


def relayout_codes(b: np.ndarray, k: int, n: int, bits: int, block: int) -> np.ndarray:
    """B [N, blocks, bytes] -> [blocks * block, width] bytes."""
    nb = nbits.blocks_of(k, block)
    codes = nbits.unpack_codes(np.asarray(b).reshape(n, nb, -1), bits, block)  # [N, nb, blk]
    rows = codes.reshape(n, nb * block).T                                       # [K', N]
    if bits == 8:
        return np.ascontiguousarray((rows.astype(np.int16) - 128).astype(np.int8))
    half = (n + 1) // 2
    hi = np.zeros((rows.shape[0], half), np.uint8)
    hi[:, :n - half] = rows[:, half:]
    return np.ascontiguousarray(rows[:, :half] | (hi << 4)).astype(np.uint8)


def relayout_scales(s: np.ndarray, k: int, n: int, block: int) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(s, np.float32).reshape(n, -1).T)


def relayout_zero_points(z: np.ndarray, k: int, n: int, bits: int, block: int) -> np.ndarray:
    nb = nbits.blocks_of(k, block)
    z = np.asarray(z)
    zf = nbits.unpack_codes(z.reshape(n, -1), bits, nb).astype(np.float32) \
        if z.dtype == np.uint8 else z.astype(np.float32).reshape(n, nb)
    return np.ascontiguousarray(zf.T - (128.0 if bits == 8 else 0.0))


def default_zero_point(bits: int) -> float:
    """The zero point in the stored code's terms when the model gives none."""
    return 8.0 if bits == 4 else 0.0


def width_of(n: int, bits: int) -> int:
    """Byte columns per row of the layout."""
    return (n + 1) // 2 if bits == 4 else n


def column_kernel(kind: str, m: int, k: int, n: int, bits: int, block: int, zp_kind: str,
                  bias: bool, setup: str, per_row: str, workspace: int) -> Lowered:
    """The kernel around a body: `setup` (workspace pointers), then per part (j0..j1 byte
    columns) and row i, `per_row`. Params: a [m, k], q (re-laid codes), scales, [zp],
    [bias], y; the weights' transforms to the layout."""
    width = width_of(n, bits)
    spec: Dict = make_spec(kind, M=m, K=k, N=n, bits=bits, block=block, zp_kind=zp_kind,
                           bias=bias, pairs=PAIRS)
    body = f"""{setup}    for (long part = rvk_lo; part < rvk_hi; ++part) {{
    const long j0 = part * {PAIRS}, j1 = j0 + {PAIRS} < {width} ? j0 + {PAIRS} : {width};
    for (long i = 0; i < {m}; ++i) {{
{per_row}    }}
    }}
"""
    split = split_of(-(-width // PAIRS), m * n * k)
    if split is None:
        body = "    const long rvk_lo = 0, rvk_hi = 1;\n" + body
    params = [Param("a"), Param("q", dtype="uint8" if bits == 4 else "int8"),
              Param("scales")] + \
        ([Param("zp")] if zp_kind else []) + ([Param("bias")] if bias else []) + \
        [Param("y", False)]
    transforms = {1: lambda b: relayout_codes(b, k, n, bits, block),
                  2: lambda s: relayout_scales(s, k, n, block)}
    if zp_kind:
        transforms[3] = lambda z: relayout_zero_points(z, k, n, bits, block)
    return Lowered(Kernel(kind, tuple(params), body, spec=spec, split=split,
                          workspace=workspace, macs=m * n * k, support=rvv.header()),
                   transforms)
