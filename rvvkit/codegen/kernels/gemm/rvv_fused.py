"""RVV: the GEMM epilogue applied in the micro-kernel's registers (see packed.py).

For a full tile of a GEMM with one k-block, the micro-kernel can finish its accumulators itself
(scale, bias or other addends, activation) and store them straight into y, instead of storing
the tile to t for the epilogue to load, finish and store again: with k = 16..64 (the 1x1 convs
of small networks, Winograd's GEMMs, attention) that round trip is a tenth to a quarter of the
tile's cost. The epilogue must have no grid (conv on a padded grid drops columns) and its
activation a vector form; each addend's index must be one of the forms below, read through a
pointer the caller offsets to the tile's origin.
"""
from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from ...cfmt import flt
from ...rvv import not_nan, vbool, vle, vlse, vop, vse, vsse

# an addend's index, in the core's orientation: per core row, per core column, the same layout
# as y, or one value
_FULL = re.compile(r"^\{m\} \* (\d+) \+ \{n\}$")


def _kind(idx: str, ldy: int, trans: bool) -> Optional[str]:
    if idx == "0":
        return "scalar"
    if idx in ("{m}", "{n}"):
        row = (idx == "{m}") != trans           # OUT rows are core rows unless transposed
        return "row" if row else "col"
    m = _FULL.match(idx)
    return "full" if m and int(m.group(1)) == ldy else None


# Activations whose vector form needs nothing but the mask register (v0) besides the value:
# with every accumulator live, only the b vector's register group is free after the k loop,
# and a form needing a temporary group as well as v0 spills at m8 (3 rows of 8 registers).
MASK_ONLY_ACTS = ("relu", "clip")


def fusable(ep, variants=()) -> bool:
    """Whether the epilogue can run in the micro-kernel's registers: its form, and room for
    its temporaries in every variant, given as (LMUL, accumulator groups) of each row group:
    a vector addend needs a register group and the activation's mask v0, which lies in the
    first group, so each needs a group of its own beyond the accumulators."""
    if ep.grid is not None or not (ep.act is None or ep.act.kind in MASK_ONLY_ACTS):
        return False
    kinds = [_kind(idx, ep.ldy, ep.trans) for _, idx, _ in ep.addends]
    if not all(kinds):
        return False
    # the b vector's group is free after the k loop: an addend's vector, then the mask
    return all(32 // lmul - groups >= 1 for lmul, groups in variants)


def params(ep) -> str:
    """Parameters after the tile pointer: y's row stride (a run-time value, so that layers
    with one epilogue form share the kernel), then each addend's pointer."""
    return ", ptrdiff_t ldy" + "".join(f", const float *__restrict e{i}"
                                       for i in range(len(ep.addends)))


def arg_names(ep) -> str:
    return ", ldy" + "".join(f", e{i}" for i in range(len(ep.addends)))


def form(ep) -> str:
    """What the kernel's code depends on: everything of the epilogue but y's stride and the
    addends' names (their index only by kind)."""
    kinds = tuple((_kind(idx, ep.ldy, ep.trans), scale) for _, idx, scale in ep.addends)
    return repr((ep.trans, ep.alpha, kinds, ep.act))


def y_origin(ep, i0: str = "i0", j: str = "j") -> str:
    """Offset of the tile at core row i0, column j in y (and in an addend laid out as y)."""
    return f"(ptrdiff_t){j} * {ep.ldy} + {i0}" if ep.trans else f"(ptrdiff_t){i0} * {ep.ldy} + {j}"


def origins(ep, i0: str = "i0", j: str = "j") -> str:
    """Call arguments after the tile pointer: y's stride, each addend's pointer at the tile's
    origin (row i0, column j)."""
    out = [f", {ep.ldy}"]
    for ptr, idx, _ in ep.addends:
        kind = _kind(idx, ep.ldy, ep.trans)
        off = {"scalar": "", "row": f" + {i0}", "col": f" + {j}",
               "full": f" + {y_origin(ep, i0, j)}"}[kind]
        out.append(f", {ptr}{off}")
    return "".join(out)


def _clamp(act, var: str, lmul: int) -> List[str]:
    """Relu/Clip in place, NaN lanes kept (masked off, as the activation table's form): one
    masked max and one masked min on the accumulator itself, so no temporary group is needed
    (the table's nested form keeps the input alive beside the max: clang 16 spills at m4/m8)."""
    lo, hi = (0.0, float("inf")) if act.kind == "relu" else (float(act.params[0]),
                                                             float(act.params[1]))
    lines = [f"{vbool(lmul)} {var}_m = {not_nan(lmul, var)};"]
    if lo != float("-inf"):
        lines.append(f"{var} = {vop('vfmax_vf', lmul)}_mu({var}_m, {var}, {var}, {flt(lo)}, vl);")
    if hi != float("inf"):
        lines.append(f"{var} = {vop('vfmin_vf', lmul)}_mu({var}_m, {var}, {var}, {flt(hi)}, vl);")
    return lines


def store(ep, nr: int) -> Callable[..., str]:
    """store(row, var, lmul, half=0): statements finishing accumulator `var` (tile row `row`,
    columns j0.. of panel `half`) and storing it at t, the tile's origin in y (row stride
    ldy, a parameter)."""
    ldy, trans = "ldy", ep.trans

    def at(row: int, col: str) -> Tuple[str, bool]:     # (address, strided)
        if trans:
            return f"(ptrdiff_t)({col}) * ldy + {row}", True
        return f"{row} * ldy + {col}", False

    def fin(row: int, var: str, lmul: int, half: int = 0) -> str:
        col = f"j0 + {half * nr}" if half else "j0"
        lines: List[str] = []
        if ep.alpha != 1.0:
            lines.append(f"{var} = {vop('vfmul_vf', lmul)}({var}, {flt(ep.alpha)}, vl);")
        scal = []
        for i, (_, idx, scale) in enumerate(ep.addends):
            kind = _kind(idx, ep.ldy, trans)
            if kind in ("scalar", "row"):
                term = f"e{i}[{row if kind == 'row' else 0}]"
                scal.append(term if scale in (None, 1.0) else f"{flt(scale)} * {term}")
                continue
            if kind == "col":
                term = vle(lmul, f"e{i} + {col}")
            else:
                addr, strided = at(row, col)
                term = vlse(lmul, f"e{i} + {addr}", ldy) if strided else vle(lmul, f"e{i} + {addr}")
            lines.append(f"{var} = {vop('vfadd_vv', lmul)}({var}, {term}, vl);"
                         if scale in (None, 1.0) else
                         f"{var} = {vop('vfmacc_vf', lmul)}({var}, {flt(scale)}, {term}, vl);")
        if scal:
            lines.append(f"{var} = {vop('vfadd_vf', lmul)}({var}, {' + '.join(scal)}, vl);")
        if ep.act is not None:
            lines += _clamp(ep.act, var, lmul)
        addr, strided = at(row, col)
        lines.append(vsse(lmul, f"t + {addr}", ldy, var) if strided else
                     vse(lmul, f"t + {addr}", var))
        return "\n".join(lines)
    return fin
