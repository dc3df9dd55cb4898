"""The packed GEMM driver (see packed.py): the loop nest over column, k and row blocks that packs
runtime operands into panels and calls the micro-kernel and the epilogue of emit.py per
MR x NR tile. `core` emits it as one C function and returns its name and support code."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, Tuple

from ...cfmt import indent
from ...loops import cdiv
from ....ops.activations import act_rvv_support
from ...rvv import GUARD, header, vsetvlmax
from . import rvv as rvv
from . import rvv_lmul as lmuls
from .emit import (epilogue, strided_packer, trivial, ukernel, ukernel_pair, ukernel_rows_host,
                   ukernel_to_y, ukernel_to_y_host)
from .spec import Epilogue, Side
from . import rvv_fused as fused
from .rvv_move import EP_LMULS
from .tiling import L2_BLOCK, kc_of

ROWS_IN_PLACE_Q = 128   # the widest product whose full A panels x86 reads in place


@dataclass
class Core:
    """An emitted GEMM driver: call `name(row side, column side, <addend ptrs>, y, ws)`; or
    (driver=False) its single-thread range function `range(..., y, ws, 0, extent)`."""
    name: str
    support: Dict[str, str] = field(default_factory=dict)
    workspace: int = 0
    range: str = ""
    extent: int = 0


def _blocks(var: str, cnt: str, start: str, total: str, step: int, body: str,
            end: str = "") -> str:
    """Blocks of `step` over [start, start + total), the last one short (`cnt` is the current
    block's length). Kept a loop even when it runs once (except over a single row or
    column): with kb a literal constant, clang's interprocedural constant propagation
    specialises the micro-kernel (noinline, but clang has no noipa) on it, unrolling k with
    register spills, and the micro-kernels' code must not depend on the driver's form."""
    if start == "0" and (end or total) == "1":    # a single row or column: no loop
        return f"const int {var} = 0, {cnt} = 1;\n{body}"
    end = end or (total if start == "0" else f"{start} + {total}")
    return f"""for (int {var} = {start}; {var} < {end}; {var} += {step}) {{
    const int {cnt} = {end} - {var} < {step} ? {end} - {var} : {step};
{indent(body)}
}}"""


def _side_prep(side: Side, which: str, pw: int, kdim: int, ws: str,
               support: Dict[str, str]) -> Tuple[str, str, str]:
    """(statements per k-block, statements per row panel, expression of the panel pointer)."""
    src = "opa" if which == "a" else "opb"
    idx0, cnt = ("i0", "mr") if which == "a" else ("j0", "qb")
    pos = "i0" if which == "a" else "j"
    if side.kind == "packed":
        return "", "", f"{src} + (ptrdiff_t)({pos} / {pw}) * {kdim * pw} + (ptrdiff_t)k0 * {pw}"
    if side.kind == "row":
        return "", "", f"{src} + (ptrdiff_t)i0 * {side.si} + k0"
    if side.kind == "indirect":
        oname, ocode = side.packer
        support[oname] = ocode
        return f"{oname}(k0, kb, off);", "", f"{src} + {pos}"
    pname, pcode = strided_packer(pw, side.si, side.sk) if side.kind == "strided" else side.packer
    support[pname] = pcode
    prep = f"{pname}({src}, {idx0}, {cnt}, k0, kb, {ws});"
    if which == "a":
        return "", prep, ws
    return prep, "", f"{ws} + (ptrdiff_t)((j - j0) / {pw}) * kb * {pw}"


def core(tag: str, p: int, q: int, k: int, a: Side, b: Side, ep: Epilogue,
         mr: int, nr: int, driver: bool = True) -> Core:
    """Emit the blocked driver for OUT[p x q] = A'[p x k] . B'[k x q] with epilogue `ep`.

    Default loop order (_cols_blocked): column blocks (qb) > k blocks (kb) > row panels (MR) >
    column panels (NR). A runtime column side is packed once per (qb, kb) block sized to stay
    in L2; the MR x kb row panel is then reused from L1 by every column panel of the block
    (measured better here than the BLIS order, which needs kb small enough for a column panel
    to fit L1). An indirect side is not packed at all; its column blocks keep the rows read by
    one block L2-resident across the row panels. A runtime row side against a constant column
    side uses the mirrored order (_rows_blocked).
    """
    kc = kc_of(k)
    support: Dict[str, str] = header()     # RVV header first: helpers below may use it
    for lmul in EP_LMULS:                              # e.g. vector exp of a sigmoid
        support.update(act_rvv_support(ep.act, lmul))
    ind = "a" if a.kind == "indirect" else ("b" if b.kind == "indirect" else "")
    ukn, ukc = ukernel(mr, nr, ind)
    epn, epc = epilogue(mr, nr, ep)
    support[ukn], support[epn] = ukc, epc
    adds = "".join(f"const float *__restrict {x}, " for x, _, _ in ep.addends)
    args = "".join(f"{x}, " for x, _, _ in ep.addends)
    offa = 'off, ' if ind else ''
    call = f"""{ukn}(kb, @APTR@, @BPTR@, {offa}t);
{epn}(t, i0, j, mr, nr, k0 == 0, k0 + kb == {k}, {args}y);"""
    # an epilogue the micro-kernel can apply in registers, some full tile and one k-block
    # (kb is then k, and is not tested: clang would propagate the constant into the
    # micro-kernel and unroll it with spills)
    full = p >= mr and q >= nr and kc == k
    rvv_y = full and fused.fusable(ep, lmuls.uk_variants(mr, nr, ind))
    host_y = full and trivial(ep) and not ep.trans
    if rvv_y or host_y:
        branches = ""
        if rvv_y:
            dn, dc = ukernel_to_y(mr, nr, ind, ep)
            support[dn] = dc
            branches += f"""{GUARD}
if (mr == {mr} && nr == {nr}) {{   /* a full tile (of the one k-block): finished into y */
    {dn}(kb, @APTR@, @BPTR@, {offa}y + {fused.y_origin(ep)}{fused.origins(ep)});
}} else
"""
        if host_y:
            hn, hc = ukernel_to_y_host(mr, nr, ind)
            support[hn] = hc
            branches += f"""{"#else" if rvv_y else "#if !defined(__riscv_v_intrinsic)"}
if (mr == {mr} && nr == {nr}) {{   /* a full tile (of the one k-block): stored into y */
    {hn}(kb, @APTR@, @BPTR@, {offa}y + {fused.y_origin(ep)}, {ep.ldy});
}} else
"""
        call = f"""{branches}#endif
{{
{indent(call)}
}}"""
    rows_first = a.kind in ("strided", "custom") and b.kind == "packed"
    # x86 & co: a runtime A against few columns is read in place by full panels (packing it
    # is a transposing copy per q MACs); a constant B's many columns amortise the copy
    a_rows = (a.kind == "strided" and a.sk == 1 and not ind and not rows_first
              and not host_y and q <= ROWS_IN_PLACE_Q)
    if a_rows:
        rn, rc = ukernel_rows_host(mr, nr)
        support[rn] = rc
        call = f"""#if !defined(__riscv_v_intrinsic)
if (mr == {mr}) {{   /* a full panel of A, read in place */
    {rn}(kb, opa + (ptrdiff_t)i0 * {a.si} + k0, {a.si}, @BPTR@, t);
    {epn}(t, i0, j, mr, nr, k0 == 0, k0 + kb == {k}, {args}y);
}} else
#endif
{{
{indent(call)}
}}"""
    split = _split_side(p, q, k, a, b, mr, nr, rows_first)
    pairs = q >= 2 * nr and (any(L for _, L in lmuls.pair_plan(mr, nr, ind))
                             if lmuls.target_vlen() is None
                             else lmuls.pair_at(mr, nr, ind, lmuls.target_vlen()))
    two = None
    if pairs:
        call, two = _pair_call(call, mr, nr, k, kc, ind, ep, b, epn, args, offa, support)
    if rows_first:
        loops, aptr, bptr, ws = _rows_blocked(p, q, k, kc, a, mr, nr, call, support, split,
                                              two)
    else:
        loops, aptr, bptr, ws = _cols_blocked(p, q, k, kc, a, b, mr, nr, call, support, split,
                                              two, a_rows)
    loops = loops.replace("@APTR@", aptr).replace("@BPTR@", bptr)
    decls = f"float t[{(lmuls.pair_max_panels(mr, nr, ind) if pairs else 1) * mr * nr}];\n" + \
        (f"int off[{kc}];\n" if ind else "") + "(void)ws;\n"
    if pairs:   # the pair's LMUL at this VLEN (0: single panels)
        decls += f"""{GUARD}
const size_t rvk_v1 = {vsetvlmax(1)};
const int rvk_pl = {rvv.pair_lmul_expr(mr, nr, ind)};
const int rvk_pp = {rvv.pair_panels_expr(mr, nr, ind)};
const int rvk_pq = {rvv.pair_panels_expr(mr, nr, ind, last=True)};   /* for a row's last panels */
(void)rvk_v1;
(void)rvk_pp;
(void)rvk_pq;
#endif
"""
    text = f"""static void @NAME@(const float *__restrict opa, const float *__restrict opb,
    {adds}float *__restrict y, float *__restrict ws, int lo, int hi) {{
{indent(decls + loops)}
}}
"""
    # same shapes with another epilogue or operand kind is another function: hash the text
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    base = f"rvk_{tag}_gemm_{p}x{q}x{k}_tile_{mr}x{nr}{ep.describe()}"
    names = {part: f"{base}_{part}_{digest}" for part in ("range", "task")}
    names["driver"] = f"{base}_{digest}"
    support[names["range"]] = text.replace("@NAME@", names["range"])
    extent = p if split == "rows" else q
    if not driver:      # the caller runs whole GEMMs as parts of its own region
        return Core("", support, ws, names["range"], extent)
    support.update(_parallel(names, ep, split, (p, q, k), ws, mr if split == "rows" else nr))
    return Core(names["driver"], support, ws, names["range"], extent)


def _pair_call(call, mr, nr, k, kc, ind, ep, b: Side, epn, args, offa, support):
    """(call, (pre, post)): `call` behind a branch that, where rvk_np says the panel and its
    right neighbours (rvk_np panels in all: rvk_pp, or rvk_pq where fewer are left) are full
    (RVV, a VLEN where pairs win), runs the pair micro-kernel on them and the epilogue on each
    (or stores straight into y); pre/post wrap the statement the column loop runs per panel:
    pre decides rvk_np (given the loop's end), post skips the partner panels."""
    bs = {"packed": f"{k * nr}", "indirect": f"{nr}"}.get(b.kind, f"(ptrdiff_t)kb * {nr}")
    pn, pc = ukernel_pair(mr, nr, ind)
    support[pn] = pc
    last = f"k0 + kb == {k}"
    both = f"""{pn}(rvk_pl, rvk_np, kb, @APTR@, @BPTR@, {bs}, {offa}t);
for (int h = 0; h < rvk_np; ++h)
    {epn}(t + h * {mr * nr}, i0, j + h * {nr}, mr, {nr}, k0 == 0, {last}, {args}y);"""
    if fused.fusable(ep, lmuls.pair_variants(mr, nr, ind)) and kc == k:
        dn, dc = ukernel_pair(mr, nr, ind, ep)
        support[dn] = dc
        both = f"""if (mr == {mr}) {{   /* full tiles: finished into y */
    {dn}(rvk_pl, rvk_np, kb, @APTR@, @BPTR@, {bs},
        {offa}y + {fused.y_origin(ep)}{fused.origins(ep)});
}} else {{
{indent(both)}
}}"""
    call = f"""{GUARD}
if (rvk_np) {{   /* this panel and the next rvk_np - 1 */
{indent(both)}
}} else
#endif
{{
{indent(call)}
}}"""
    pre = lambda end: f"""{GUARD}
const int rvk_np = !rvk_pl ? 0 : j + rvk_pp * {nr} <= {end} ? rvk_pp
    : j + rvk_pq * {nr} <= {end} ? rvk_pq : 0;
#endif"""  # noqa: E731
    post = (f"{GUARD}\nif (rvk_np) j += (rvk_np - 1) * {nr};   /* the partners are done */"
            "\n#endif")
    return call, (pre, post)


# Splitting a GEMM whose row side is packed at run time (a transposed conv: rows are pixels)
# against a constant column side (weights): by rows, every thread streams all of B; by
# columns, every thread packs all of A. Per element, relative to a MAC at full rate.
DUP_STREAM = 8.0    # a constant B element streamed from L3 or memory
DUP_PACK = 4.0      # a runtime A element gathered into a panel
SPLIT_THREADS = (2, 4, 8)   # thread counts the choice is made for (boards have 4-8 cores)


def _busiest(units: int, panel: int, other: int, k: int, dup: float) -> float:
    """The busiest thread's cost summed over SPLIT_THREADS: its whole panels, plus `dup`."""
    return sum(cdiv(units, n) * panel * other * k + dup for n in SPLIT_THREADS)


def _split_side(p, q, k, a: Side, b: Side, mr, nr, rows_first) -> str:
    """Which output dimension threads split. Both sides packed at run time: whichever leaves
    the busiest thread less, counting the other side's packing, which each thread repeats.
    Else a runtime column side: the columns (each thread packs only its own part), else the
    side with more panels. A runtime row side against a
    constant column side: whichever leaves the busiest thread less to do, counting what each
    split repeats per thread (squeezenet's last conv, 169 pixels x 1000 channels: 13 row
    panels, so by rows two threads split 7/6 and each streams all 2 MB of weights; by
    columns 16/16 and 1 MB each)."""
    if rows_first:
        by_rows = _busiest(cdiv(p, mr), mr, q, k, DUP_STREAM * q * k)
        by_cols = _busiest(cdiv(q, nr), nr, p, k, DUP_PACK * p * k)
        return "cols" if by_cols < by_rows else "rows"
    if b.kind == "strided" and a.kind == "strided":
        # both packed at run time: by columns every thread packs all of A, by rows all of B
        # (attention's P.V: a 1500 x 1500 P against a 1500 x 64 V splits by rows)
        by_rows = _busiest(cdiv(p, mr), mr, q, k, DUP_PACK * q * k)
        by_cols = _busiest(cdiv(q, nr), nr, p, k, DUP_PACK * p * k)
        return "cols" if by_cols <= by_rows else "rows"
    if b.kind in ("strided", "custom"):
        return "cols"
    return "rows" if cdiv(p, mr) > cdiv(q, nr) else "cols"


GEMM_ARGS = """\
/* The operands of a parallel GEMM driver, passed to its tasks. */
typedef struct {
    const float *a, *b;
    const float *add[4];
    float *y;
} rvk_gemm_args;
"""


def _parallel(names, ep: Epilogue, split: str, pqk, ws: int, panel: int) -> Dict[str, str]:
    """The driver: splits the `split` dimension into whole panels, one range per task (panel
    bounds are the single-thread ones, so every output is computed alike), and runs the range
    function on them through the pool."""
    name, rng, tsk = names["driver"], names["range"], names["task"]
    p, q, k = pqk
    total, pw = (p, "rows") if split == "rows" else (q, "columns")
    units = cdiv(total, panel)
    nadd = len(ep.addends)
    if nadd > 4:
        raise ValueError(f"{name}: {nadd} addends, rvk_gemm_args holds 4")
    adds = "".join(f"const float *__restrict {x}, " for x, _, _ in ep.addends)
    fields = "".join(f"g->add[{i}], " for i in range(nadd))
    inits = ", ".join(x for x, _, _ in ep.addends) or "NULL"
    task = f"""static void {tsk}(void *ctx, int task, int ntasks, float *ws) {{
    const rvk_gemm_args *g = (const rvk_gemm_args *)ctx;
    int lo, hi;
    rvk_split({units}, task, ntasks, &lo, &hi);   /* panels of {panel} {pw} */
    {rng}(g->a, g->b, {fields}g->y, ws, lo * {panel},
        hi * {panel} < {total} ? hi * {panel} : {total});
}}

static void {name}(const float *__restrict opa, const float *__restrict opb,
    {adds}float *__restrict y, float *__restrict ws) {{
    rvk_gemm_args g = {{opa, opb, {{{inits}}}, y}};
    rvk_parallel({units}, {p * q * k}L, {ws}L, ws, {tsk}, &g);
}}
"""
    return {"rvk_gemm_args": GEMM_ARGS, name: task}


def _bounds(split: str, p: int, q: int):
    """(first row, row end, first column, column end) of a range function's loops: the split
    side runs over the task's [lo, hi), the other over all of it."""
    return ("lo", "hi", "0", str(q)) if split == "rows" else ("0", str(p), "lo", "hi")


def _cols_blocked(p, q, k, kc, a: Side, b: Side, mr, nr, call, support, split, two=None,
                  a_rows=False):
    """Column blocks (qb) > k blocks > [pack B block] > row panels > column panels; over
    columns or rows [lo, hi) as `split` says. `a_rows`: off RVV, only a partial row panel is
    packed (full ones are read in place)."""
    if b.kind == "packed":
        qb = q
    else:
        qb = max(nr, min(cdiv(q, nr) * nr, (L2_BLOCK // kc) // nr * nr))
    ws_b = cdiv(qb, nr) * nr * kc if b.kind in ("strided", "custom") else 0
    ws_a = mr * kc if a.kind in ("strided", "custom") else 0
    bk, _, bptr = _side_prep(b, "b", nr, k, "ws", support)
    ak, ai, aptr = _side_prep(a, "a", mr, k, f"ws + {ws_b}", support)
    if a_rows:
        ai = f"""#if !defined(__riscv_v_intrinsic)
if (mr < {mr})   /* full panels are read in place */
#endif
{{
{indent(ai)}
}}"""
    if two:
        call = f"{two[0]('j0 + qb')}\n{call}\n{two[1]}"
    cols = _blocks("j", "nr", "j0", "qb", nr, call)
    r0, rend, c0, cend = _bounds(split, p, q)
    rows = _blocks("i0", "mr", r0, "", mr, "\n".join(s for s in (ai, cols) if s), end=rend)
    kblk = _blocks("k0", "kb", "0", str(k), kc, "\n".join(s for s in (bk + ak, rows) if s))
    return _blocks("j0", "qb", c0, "", qb, kblk, end=cend), aptr, bptr, ws_a + ws_b


def _rows_blocked(p, q, k, kc, a: Side, mr, nr, call, support, split, two=None):
    """Runtime row side, constant column side (transposed conv, Gemm with a weight B): row
    blocks (pb, packed into L2) > k blocks > column panels > row panels. Each constant column
    panel is then streamed from memory once per row block and k-block and reused from L2 by
    every row panel, instead of once per row panel (which made the transposed conv on a
    7x7 image read its 9 MiB of weights 7 times per k-block from L3). Over rows or columns
    [lo, hi) as `split` says: the loops and their order are the same either way, so every
    output is computed alike."""
    pb = max(mr, min(cdiv(p, mr) * mr, (L2_BLOCK // kc) // mr * mr))
    pname, pcode = strided_packer(mr, a.si, a.sk) if a.kind == "strided" else a.packer
    support[pname] = pcode
    bptr = f"opb + (ptrdiff_t)(j / {nr}) * {k * nr} + (ptrdiff_t)k0 * {nr}"
    aptr = f"ws + (ptrdiff_t)((i0 - ib) / {mr}) * kb * {mr}"
    r0, rend, c0, cend = _bounds(split, p, q)
    rows = _blocks("i0", "mr", "ib", "pb", mr, call)
    if two:
        rows = f"{two[0](cend)}\n{rows}\n{two[1]}"
    cols = _blocks("j", "nr", c0, "", nr, rows, end=cend)
    kblk = _blocks("k0", "kb", "0", str(k), kc,
                   f"{pname}(opa, ib, pb, k0, kb, ws);\n{cols}")
    return _blocks("ib", "pb", r0, "", pb, kblk, end=rend), aptr, bptr, cdiv(pb, mr) * mr * kc
