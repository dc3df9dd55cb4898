"""The packed GEMM's cost model and block sizes, and the panel layout of packed operands.

What gcc -O3 makes of a micro-kernel was measured on this host (Zen 4: AVX-512, 32 vector
registers, 32 KiB L1d, 1 MiB L2); the figures below are fitted to those measurements and pick
the MR x NR tile, the k-block and the L2 blocks of core.py. See packed.py for the design.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from ...loops import cdiv

# --- Tuning for this host (Zen 4: AVX-512, 32 vector registers, 32 KiB L1d, 1 MiB L2). ---
VEC = 16            # floats per vector register
VREGS = 32          # vector registers: accumulators + NR/VEC B vectors + 1 broadcast must fit
NRS = (32, 48, 64)  # column widths gcc vectorises cleanly (see packed.py about 16)
KC_MAX = 640        # k-block (balanced); swept 160..2400 on ResNet layers: 576-640 best. Fewer
                    # k-blocks = fewer passes over y; B is streamed from L2 either way here.
L2_BLOCK = 96 * 1024  # floats (384 KiB) of the runtime-packed side per k-block, kept in L2


def pack_panels(mat: np.ndarray, pw: int) -> np.ndarray:
    """(n, K) matrix -> flat [ceil(n/pw)][K][pw] panels, zero padded. Build-time weight packing:
    element (i, k) lands at `packed_index(i, k, K, pw)`."""
    n, k = mat.shape
    npan = cdiv(n, pw)
    buf = np.zeros((npan * pw, k), np.float32)
    buf[:n] = mat
    return np.ascontiguousarray(buf.reshape(npan, pw, k).transpose(0, 2, 1)).reshape(-1)


def packed_index(i, k, kdim: int, pw: int):
    """Flat position of element (i, k) of an (n, kdim) matrix packed by `pack_panels`."""
    return (i // pw) * kdim * pw + k * pw + i % pw


def tile_eff(mr: int, nr: int) -> float:
    """Fraction of FMA peak of an MR x NR micro-kernel inside a conv/GEMM, fitted to
    measurements here: fewer than ~6 rows starve the FMA pipes (too few broadcasts per vector
    load), fewer than ~12 accumulators cannot hide the FMA latency, and wider column panels
    (more vector loads per k from L2) measured a few % slower than NR = 32."""
    v = mr * nr / VEC
    wide = {32: 1.0, 48: 0.97, 64: 0.95}.get(nr, 0.95)
    return min(1.0, 0.55 + 0.075 * mr) * min(1.0, 0.4 + 0.05 * v) * wide


def tile_cost(p: int, q: int, k: int, mr: int, nr: int, trans: bool) -> float:
    """Estimated time, in MACs at full rate, of a tiling: padded MACs over the tile efficiency
    plus the epilogue (vectorised along NR when not transposed, mostly scalar otherwise)."""
    tiles = cdiv(p, mr) * cdiv(q, nr)
    nkb = cdiv(k, KC_MAX)
    return tiles * mr * nr * (k / tile_eff(mr, nr) + nkb * (8 if trans else 3))


def choose_tile(p: int, q: int, k: int, trans: bool = False, mrs=None,
                nrs=None) -> Tuple[int, int]:
    """Cheapest (MR, NR) by tile_cost; `mrs` and `nrs` restrict the sizes tried."""
    best = None
    for nr in nrs or NRS:
        for mr in sorted(mrs or range(1, 15), reverse=True):   # ties: taller (fewer B passes)
            if mr * nr // VEC + nr // VEC + 1 > VREGS:
                continue
            c = tile_cost(p, q, k, mr, nr, trans)
            if best is None or c < best[0] - 1e-9:
                best = (c, mr, nr)
    if best is None:   # no tile of the sizes asked for fits the registers: any size
        return choose_tile(p, q, k, trans)
    return best[1], best[2]


def kc_of(k: int) -> int:
    """k-block size: balanced blocks of at most KC_MAX (rounded to 8)."""
    nkb = cdiv(k, KC_MAX)
    return cdiv(cdiv(k, nkb), 8) * 8 if nkb > 1 else k
