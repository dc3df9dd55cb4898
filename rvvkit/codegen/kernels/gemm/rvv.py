"""RVV 1.0 intrinsic micro-kernel of the packed GEMM (see packed.py): the register-blocked LMUL
variants over one panel or a pair of panels, and the run-time dispatch between them; which
variants exist and which one each VLEN runs is decided in rvv_lmul.py. They read and
write exactly the panels and tiles of the portable code, so packing, tiling and the build-time
weight transforms stay shared with x86; emit.py places these bodies under
`#if defined(__riscv_v_intrinsic)`. The packer and epilogue bodies are in rvv_move.py."""
from __future__ import annotations

import re
from typing import List, Tuple

from ...cfmt import indent
from ...rvv import vle, vop, vse, vsetvlmax, vt
from .rvv_lmul import (pair_at, pair_counts, pair_groups, pair_plan, row_groups,
                            target_vlen, uk_lmul_at, uk_plan, unroll)


def suffixed(name: str, part: str) -> str:
    """`name` with `_part` added before the kernel's hash, if it ends in one."""
    head, _, tail = name.rpartition("_")
    if head and re.fullmatch(r"[0-9a-f]{8,}", tail):
        return f"{head}_{part}_{tail}"
    return f"{name}_{part}"


def vname(name: str, lmul: int) -> str:
    """The name of a kernel's LMUL variant."""
    return suffixed(name, f"lmul{lmul}")


# --- The single-panel kernel: column strips of one panel, row groups of accumulators.
def _uk_group(mr: int, nr: int, lmul: int, ind: str, r0: int, r1: int, store=None) -> str:
    """Rows r0..r1-1 of one column strip: accumulators c_i (LMUL registers each) over all kb
    steps. k = 0 is peeled (c = a*b: no zeroed accumulators; kb >= 1 always), the rest runs
    `unroll` steps per iteration on pointers (no counter) plus one remainder step."""
    vty, R = vt(lmul), r1 - r0
    U = unroll(R, lmul)

    def step(u: int, init: bool) -> List[str]:
        """Statements of the k step u places after the cursor (ak/bk or ok)."""
        out = []
        row = "off[0]" if init else f"ok[{u}]"      # offset-table entry of this step
        if ind == "a":
            au = "ap" if init else f"au{u}"
            out.append(f"const float *__restrict {au} = a + {row} + {r0};")
            aref, bref = au + "[{i}]", f"bk + {u * nr}"
        elif ind == "b":
            aref, bref = f"ak[{u * mr} + {{i}}]", f"b + {row} + j0"
        else:
            aref, bref = f"ak[{u * mr} + {{i}}]", f"bk + {u * nr}"
        out.append(f"bv = {vle(lmul, bref)};")
        for i in range(R):
            a_i = aref.format(i=i)
            out.append(f"c{i} = {vop('vfmul_vf', lmul)}(bv, {a_i}, vl);" if init else
                       f"c{i} = {vop('vfmacc_vf', lmul)}(c{i}, {a_i}, bv, vl);")
        return out

    def bump(n: int, table: bool = True) -> str:
        """Advance the read pointers (and the offset-table cursor) by n steps."""
        parts = ([] if ind == "a" else [f"ak += {n * mr};"]) + \
            ([] if ind == "b" else [f"bk += {n * nr};"]) + \
            ([f"ok += {n};"] if ind and table else [])
        return " ".join(parts)

    ptrs = ([] if ind == "a" else [f"const float *__restrict ak = a + {r0};"]) + \
        ([] if ind == "b" else ["const float *__restrict bk = b + j0;"]) + \
        (["const int *__restrict ok = off + 1;"] if ind else [])
    # the expressions below are kept verbatim (also `/ 1`, `+ 0` and `% 1`): clang's output
    # for the micro-kernel depends on them, and it must not change
    if ind:
        cursor, end = "ok", f"off + 1 + (ptrdiff_t)((kb - 1) / {U}) * {U}"
    else:
        cursor, end = "bk", f"b + j0 + {nr} + (ptrdiff_t)((kb - 1) / {U}) * {U * nr}"
    unrolled = [line for u in range(U) for line in step(u, False)]
    lines = [" ".join(ptrs), f"{vty} bv;"] + [f"{vty} c{i};" for i in range(R)]
    lines += step(0, True) + [bump(1, table=False)]
    lines += [f"for (const {'int' if ind else 'float'} *const end = {end}; {cursor} != end;) {{",
              indent("\n".join(unrolled + [bump(U)])), "}"]
    lines += [f"if ((kb - 1) % {U}) {{", indent("\n".join(step(0, False))), "}"]
    if store is None:
        lines += [vse(lmul, f"t + {(r0 + i) * nr} + j0", f"c{i}") for i in range(R)]
    else:
        lines += [store(r0 + i, f"c{i}", lmul) for i in range(R)]
    return f"{{ /* rows {r0}..{r1 - 1} */\n{indent(chr(10).join(lines))}\n}}"


def uk_variant(name: str, mr: int, nr: int, lmul: int, ind: str, store=None,
               extra: str = "") -> str:
    """One LMUL variant: column strips of vl = min(NR - j0, VLMAX) columns, then row groups of
    at most rows_per_group(LMUL) rows, each sweeping k with its accumulators in registers."""
    offp = "const int *__restrict off, " if ind else ""
    groups = "\n".join(_uk_group(mr, nr, lmul, ind, r0, r1, store)
                       for r0, r1 in row_groups(mr, lmul))
    return f"""static inline void {name}(int kb, const float *__restrict a,
    const float *__restrict b, {offp}float *__restrict t{extra}) {{
    /* vl = min(NR - j0, VLMAX) in scalar code: clang 16 puts a vsetvli inside the k loops
     * when the strip's vl comes from the vsetvl intrinsic (its "mu" vtype differs) */
    const size_t vlmax = {vsetvlmax(lmul)};
    for (size_t j0 = 0; j0 < {nr};) {{
        const size_t vl = {nr} - j0 < vlmax ? {nr} - j0 : vlmax;
{indent(groups, 2)}
        j0 += vl;
    }}
}}
"""


def uk_dispatch(name: str, mr: int, nr: int, ind: str, store=None, extra: str = "",
                extra_args: str = "") -> Tuple[str, str]:
    """(definitions of the LMUL variants, statements calling the right one) of the MR x NR
    micro-kernel `name`: every variant of uk_plan picked at run time by VLEN, or, when the
    source is built for one VLEN, that VLEN's variant alone, called directly."""
    offa = "off, " if ind else ""
    vlen = target_vlen()
    if vlen is not None:
        L = uk_lmul_at(mr, nr, ind, vlen)
        return (uk_variant(vname(name, L), mr, nr, L, ind, store, extra),
                f"/* built for VLEN {vlen} */\n{vname(name, L)}(kb, a, b, {offa}t{extra_args});")
    plan = uk_plan(mr, nr, ind)
    variants = "".join(uk_variant(vname(name, L), mr, nr, L, ind, store, extra)
                       for L in sorted({L for _, L in plan}, reverse=True))
    # VLEN/32 = vsetvlmax(e32, m1); the last variant also takes any larger VLEN
    picks = [f"if (rvk_v <= {top // 32}) {vname(name, L)}(kb, a, b, {offa}t{extra_args});"
             for top, L in plan[:-1]] + \
        [f"{vname(name, plan[-1][1])}(kb, a, b, {offa}t{extra_args});"]
    return variants, f"const size_t rvk_v = {vsetvlmax(1)};\n" + "\nelse ".join(picks)


# --- Panel pairs (see rvv_lmul.py): one strip per panel over P adjacent panels, so each
# scalar load of a feeds P vfmacc.
def _pair_group(mr: int, nr: int, lmul: int, ind: str, r0: int, r1: int, store, P: int) -> str:
    """Rows r0..r1-1 of P panels (b, b + bs, ...): accumulators c<i>_<h> over all kb steps,
    k = 0 peeled as in _uk_group; the tiles of panel h follow panel h - 1's."""
    vty, R = vt(lmul), r1 - r0

    def step(init: bool) -> List[str]:
        out = []
        if ind == "a":
            out.append(f"const float *__restrict au = a + {'off[0]' if init else '*ok'} + {r0};")
            aref, b0 = "au[{i}]", "bk"
        elif ind == "b":
            aref, b0 = "ak[{i}]", f"b + {'off[0]' if init else '*ok'}"
        else:
            aref, b0 = "ak[{i}]", "bk"
        out.append(f"b0 = {vle(lmul, b0)};")
        out += [f"b{h} = {vle(lmul, f'{b0} + ' + ('bs' if h == 1 else f'{h} * bs'))};"
                for h in range(1, P)]
        for i in range(R):
            a_i = aref.format(i=i)
            for h in range(P):
                out.append(f"c{i}_{h} = {vop('vfmul_vf', lmul)}(b{h}, {a_i}, vl);" if init else
                           f"c{i}_{h} = {vop('vfmacc_vf', lmul)}(c{i}_{h}, {a_i}, b{h}, vl);")
        return out

    bump = " ".join(([] if ind == "a" else [f"ak += {mr};"]) +
                    ([] if ind == "b" else [f"bk += {nr};"]) + (["++ok;"] if ind else []))
    ptrs = ([] if ind == "a" else [f"const float *__restrict ak = a + {r0};"]) + \
        ([] if ind == "b" else ["const float *__restrict bk = b;"]) + \
        (["const int *__restrict ok = off + 1;"] if ind else [])
    lines = [" ".join(ptrs), f"{vty} {', '.join(f'b{h}' for h in range(P))};"] + \
        [f"{vty} c{i}_{h};" for i in range(R) for h in range(P)]
    lines += step(True) + [bump.replace("++ok;", "").strip()]
    # the loop runs on a read pointer, as _uk_group's: a k counter costs an instruction per step
    # (unrolled k steps gain nothing: vle takes no offset, so each step still bumps every
    # b pointer, and the quads have no registers for a second step's b vectors)
    cursor, end = ("ok", "off + kb") if ind else ("ak", f"a + {r0} + (ptrdiff_t)kb * {mr}")
    ctype = "int" if ind else "float"
    lines += [f"for (const {ctype} *const end = {end}; {cursor} != end;) {{",
              indent("\n".join(step(False) + [bump])), "}"]
    for i in range(R):
        lines += [store(r0 + i, f"c{i}_{h}", lmul, h) for h in range(P)]
    return f"{{ /* rows {r0}..{r1 - 1} of {P} panels */\n{indent(chr(10).join(lines))}\n}}"


def pair_variant(name: str, mr: int, nr: int, lmul: int, ind: str, store, p: int,
                 extra: str = "", extra_args: str = "") -> str:
    """One LMUL variant of the pair kernel, over p panels: each row group a function of its
    own (noinline), since clang 16 keeps a vsetvli inside the k loop of every group after a
    function's first (it cannot prove the vtype the previous group's stores leave equal to the
    loop's): one call per group and tile instead of one vsetvli per k step."""
    offp = "const int *__restrict off, " if ind else ""
    params = f"""int kb, const float *__restrict a,
    const float *__restrict b, ptrdiff_t bs, {offp}float *__restrict t{extra}"""
    args = f"kb, a, b, bs, {'off, ' if ind else ''}t{extra_args}"
    parts, calls = [], []
    for r0, r1 in pair_groups(mr, lmul, ind, p):
        gname = suffixed(name, f"rows{r0}")
        parts.append(f"""static RVK_NOINLINE void {gname}({params}) {{
    const size_t vl = {nr};   /* one strip per panel: the caller checked VLMAX >= {nr} */
    const size_t j0 = 0;      /* (the strip's first column, as in the single-panel kernel) */
    (void)j0;
{indent(_pair_group(mr, nr, lmul, ind, r0, r1, store, p))}
}}
""")
        calls.append(f"{gname}({args});")
    return "".join(parts) + f"""static inline void {name}({params}) {{
{indent(chr(10).join(calls))}
}}
"""


def pair_store(nr: int, mr: int):
    """Stores of a pair into t: P MR x NR tiles, one after another."""
    def store(row: int, var: str, lmul: int, half: int = 0) -> str:
        return vse(lmul, f"t + {half * mr * nr + row * nr}", var)
    return store


def pair_dispatch(name: str, mr: int, nr: int, ind: str, store, extra: str = "",
                  extra_args: str = "") -> Tuple[str, str]:
    """(variants, statements) as uk_dispatch, over the VLENs where a pair wins (the caller
    tests rvk_pair_lmul(...) != 0 first) and the panel counts np each LMUL holds (P first;
    the fallback of 2, if any, is named _p2)."""
    offa = "off, " if ind else ""
    lmuls = sorted({L for _, L in pair_plan(mr, nr, ind) if L})
    variants, picks = [], []
    for L in lmuls:
        counts = pair_counts(mr, nr, L, ind)
        for i, p in enumerate(counts):
            vn = vname(name, L) if i == 0 else suffixed(vname(name, L), f"p{p}")
            variants.append(pair_variant(vn, mr, nr, L, ind, store, p, extra, extra_args))
            test = f"lmul == {L}" + (f" && np == {p}" if i + 1 < len(counts) else "")
            picks.append(f"if ({test}) {vn}(kb, a, b, bs, {offa}t{extra_args});")
    return "".join(variants), "\nelse ".join(picks) or "(void)lmul;"


def pair_panels_expr(mr: int, nr: int, ind: str, lmul: str = "rvk_pl", last: bool = False) -> str:
    """C expression: the panels a pair reads, given its LMUL `lmul` (the C variable); `last`:
    its fallback count for a row's last panels (P itself where it has none)."""
    picks = sorted({(L, pair_counts(mr, nr, L, ind)[-1 if last else 0])
                    for _, L in pair_plan(mr, nr, ind) if L})
    if len({p for _, p in picks}) <= 1:
        return str(picks[0][1] if picks else 2)
    expr = str(picks[-1][1])
    for L, p in reversed(picks[:-1]):
        expr = f"({lmul} == {L} ? {p} : {expr})"
    return expr


def pair_lmul_expr(mr: int, nr: int, ind: str) -> str:
    """C expression: the pair's LMUL at the VLEN the code runs at, 0 where pairs do not win."""
    vlen = target_vlen()
    if vlen is not None:
        return str(pair_at(mr, nr, ind, vlen))
    plan = pair_plan(mr, nr, ind)
    expr = str(plan[-1][1])
    for top, L in reversed(plan[:-1]):
        expr = f"(rvk_v1 <= {top // 32} ? {L} : {expr})"
    return expr
