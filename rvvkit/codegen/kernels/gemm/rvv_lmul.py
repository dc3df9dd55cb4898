"""Which register blocking the RVV GEMM micro-kernel (rvv.py) runs at each VLEN: a cost
model per k step that picks, per VLEN, the LMUL of the single-panel kernel and whether a panel
pair (and over how many panels) beats it; and the optional VLEN the source is built for, which
leaves one variant instead of a run-time pick. Plain arithmetic on the tile's shape: no C text
here, so tests can check the choices without emitting anything."""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Iterator, Optional, Tuple

from ...loops import cdiv


# --- RVV micro-kernel. Per k step a row group of R rows costs one vector load of b, R scalar
# loads of a, R vfmacc.vf and the loop's scalar overhead; the accumulators (R register groups of
# LMUL registers) plus the b vector must fit the 32 vector registers: R <= 32/LMUL - 1. A strip
# covers min(NR, LMUL*VLEN/32) columns. The best LMUL depends on VLEN, known only at run time
# unless the source is built for one VLEN (fixed_vlen), so the kernel holds one variant per
# LMUL that wins for some VLEN and picks it by vsetvlmax.
LMULS = (1, 2, 4, 8)
VLENS = (128, 256, 512, 1024, 2048)
LOOP = 3        # scalar instructions per k step besides the loads/FMAs (pointer bumps, branch)

_VLEN: contextvars.ContextVar = contextvars.ContextVar("rvvkit_target_vlen", default=None)


@contextlib.contextmanager
def fixed_vlen(vlen: Optional[int]) -> Iterator[None]:
    """Within the block, micro-kernels are emitted for this VLEN only (None: every VLEN)."""
    if vlen is not None and (vlen < 128 or vlen & (vlen - 1)):
        raise ValueError(f"VLEN must be a power of two >= 128, not {vlen}")
    token = _VLEN.set(vlen)
    try:
        yield
    finally:
        _VLEN.reset(token)


def target_vlen() -> Optional[int]:
    """The VLEN the source is being built for, or None when it must run at any VLEN."""
    return _VLEN.get()


def uk_variants(mr: int, nr: int, ind: str = "") -> Tuple[Tuple[int, int], ...]:
    """(LMUL, accumulator groups) of every row group of every variant the kernel holds."""
    vlen = target_vlen()
    lmuls = {uk_lmul_at(mr, nr, ind, vlen)} if vlen is not None else {L for _, L in
                                                                       uk_plan(mr, nr, ind)}
    return tuple((L, r1 - r0) for L in lmuls for r0, r1 in row_groups(mr, L))


def rows_per_group(lmul: int) -> int:
    """Rows (accumulator groups) of one row group at this LMUL."""
    return 32 // lmul - 1


def row_groups(mr: int, lmul: int) -> Tuple[Tuple[int, int], ...]:
    """Balanced row groups (r0, r1) of an MR-row panel at this LMUL."""
    n = cdiv(mr, rows_per_group(lmul))
    return tuple((mr * g // n, mr * (g + 1) // n) for g in range(n))


def unroll(rows: int, lmul: int) -> int:
    """k steps per loop iteration for a group: 2 when a second b vector fits beside the
    accumulators (clang spills when it has to schedule two b loads into one register)."""
    return 2 if (rows + 2) * lmul <= 32 else 1


def uk_cost(mr: int, nr: int, lmul: int, vlen: int, ind: str = "") -> float:
    """Cost per k step of the MR x NR RVV micro-kernel at LMUL and VLEN, each vector
    instruction counted as its register group (a core spends LMUL times the time of an m1
    instruction on it, whatever vl is): per strip and row group one b load, R scalar a loads,
    R vfmacc, the loop's bumps and branch (shared by the unrolled steps) and, reading in
    place, the offset-table address. A strip wider than the columns left still costs its
    whole group, so LMUL beyond what NR needs only loses."""
    strips = cdiv(nr, lmul * vlen // 32)
    per_strip = sum(lmul + (r1 - r0) * (1 + lmul) + LOOP / unroll(r1 - r0, lmul) +
                    (3 if ind else 0) for r0, r1 in row_groups(mr, lmul))
    return strips * per_strip


def uk_plan(mr: int, nr: int, ind: str = "") -> Tuple[Tuple[int, int], ...]:
    """((max VLEN, LMUL), ...) ascending: the LMUL to run at VLEN <= max VLEN (the last entry
    also covers any larger VLEN). Ties go to the smaller LMUL (more rows share a b load)."""
    out = []
    for vlen in VLENS:
        lmul = min(LMULS, key=lambda L: (uk_cost(mr, nr, L, vlen, ind), L))
        if out and out[-1][1] == lmul:
            out[-1] = (vlen, lmul)
        else:
            out.append((vlen, lmul))
    return tuple(out)


def uk_lmul_at(mr: int, nr: int, ind: str, vlen: int) -> int:
    """The LMUL the run-time dispatch of uk_plan picks at this VLEN."""
    plan = uk_plan(mr, nr, ind)
    return next((L for top, L in plan if vlen <= top), plan[-1][1])


# --- Panel pairs. A column strip can be no wider than the panel (NR floats), so at VLEN 512 and
# up a 32-float panel fills only m2 or m1 registers: the row group then pays R scalar loads of a
# for R*NR products per k. Reading P adjacent panels per call, each row's a value serves all of
# them (per k: P b loads, R loads of a, P*R vfmacc), so the same registers carry up to P times
# the products per scalar load. A "pair" is one strip per panel (LMUL*VLEN/32 >= NR) over P = 2
# to 4 panels, whichever costs least for the tile's rows: at LMUL 1 (VLEN 1024 and up) two
# panels of 7 rows leave half the register file idle and a third of the loop's cost is the a
# loads. A row group holds at most (32/LMUL - P)/P rows (P*R accumulators, P b vectors).
PAIR_PANELS = (2, 3, 4)


def _pair_rows(lmul: int, p: int) -> int:
    return (32 // lmul - p) // p


def _pair_groups(mr: int, lmul: int, p: int) -> Tuple[Tuple[int, int], ...]:
    rows = _pair_rows(lmul, p)
    if rows < 1:
        return ()
    n = cdiv(mr, rows)
    return tuple((mr * g // n, mr * (g + 1) // n) for g in range(n))


def _pair_cost_p(mr: int, lmul: int, p: int, ind: str) -> float:
    """Per panel and k step: each group's b loads, a loads and FMAs, its loop, and an address
    add per panel after the first."""
    groups = _pair_groups(mr, lmul, p)
    if not groups:
        return float("inf")
    return sum(p * lmul + (r1 - r0) * (1 + p * lmul) + LOOP + (p - 1) + (3 if ind else 0)
               for r0, r1 in groups) / p


@functools.lru_cache(maxsize=None)
def pair_panels(mr: int, lmul: int, ind: str = "") -> int:
    """P, the panels one pair kernel of MR rows reads at LMUL (the cheapest per panel; ties
    go to fewer panels, which need fewer full panels in a row)."""
    return min(PAIR_PANELS, key=lambda p: (_pair_cost_p(mr, lmul, p, ind), p))


def pair_groups(mr: int, lmul: int, ind: str = "", p: int = 0) -> Tuple[Tuple[int, int], ...]:
    return _pair_groups(mr, lmul, p or pair_panels(mr, lmul, ind))


@functools.lru_cache(maxsize=None)
def pair_counts(mr: int, nr: int, lmul: int, ind: str = "") -> Tuple[int, ...]:
    """The panel counts the pair kernel of MR rows holds at LMUL: P and, where P > 2 and two
    panels cost less than single ones at every VLEN that runs this LMUL, 2 for a row's last
    panels (fewer than P full ones left: the 64 columns of ResNet's first stage, which
    otherwise ran the single-panel kernel throughout)."""
    p = pair_panels(mr, lmul, ind)
    if p == 2:
        return (2,)
    two = _pair_cost_p(mr, lmul, 2, ind)
    vlens = [v for v in VLENS if pair_at(mr, nr, ind, v) == lmul]
    wins = all(two < min(uk_cost(mr, nr, L, v, ind) for L in LMULS) - 1e-9 for v in vlens)
    return (p, 2) if wins else (p,)


def pair_cost(mr: int, nr: int, lmul: int, vlen: int, ind: str = "") -> float:
    """uk_cost of a pair, per panel: infinite where one strip cannot hold a panel."""
    if lmul * vlen // 32 < nr:
        return float("inf")
    return _pair_cost_p(mr, lmul, pair_panels(mr, lmul, ind), ind)


def pair_plan(mr: int, nr: int, ind: str = "") -> Tuple[Tuple[int, int], ...]:
    """((max VLEN, LMUL or 0), ...) ascending, as uk_plan: the pair's LMUL where a pair costs
    less per panel than the best single-panel variant, 0 where it does not."""
    out = []
    for vlen in VLENS:
        single = min(uk_cost(mr, nr, L, vlen, ind) for L in LMULS)
        lmul = min(LMULS, key=lambda L: (pair_cost(mr, nr, L, vlen, ind), L))
        pick = lmul if pair_cost(mr, nr, lmul, vlen, ind) < single - 1e-9 else 0
        if out and out[-1][1] == pick:
            out[-1] = (vlen, pick)
        else:
            out.append((vlen, pick))
    return tuple(out)


def pair_variants(mr: int, nr: int, ind: str = "") -> Tuple[Tuple[int, int], ...]:
    """uk_variants of the pair kernel (two accumulator groups per row)."""
    vlen = target_vlen()
    lmuls = {pair_at(mr, nr, ind, vlen)} if vlen is not None else {L for _, L in
                                                                    pair_plan(mr, nr, ind)}
    return tuple((L, p * (r1 - r0)) for L in lmuls if L for p in pair_counts(mr, nr, L, ind)
                 for r0, r1 in pair_groups(mr, L, ind, p))


def pair_at(mr: int, nr: int, ind: str, vlen: int) -> int:
    plan = pair_plan(mr, nr, ind)
    return next((L for top, L in plan if vlen <= top), plan[-1][1])


def pair_max_panels(mr: int, nr: int, ind: str) -> int:
    return max([pair_panels(mr, L, ind) for _, L in pair_plan(mr, nr, ind) if L] or [2])
