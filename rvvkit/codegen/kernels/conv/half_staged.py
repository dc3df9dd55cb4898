"""The staged float16 GEMM of the convolutions (half.py): R rows of float16 sums in registers
at LMUL L, and their float32 sums in the output itself.

Why: a product `vfmacc.vf` needs one scalar load (`flh`) besides its vector work, so a GEMM
costs about L + 1 + L/R per step and row, for 16·L products at SEW 16 per register's VLEN/16.
Float32 accumulators in registers (2·L registers a row, beside the float16 sum's L) leave room
for R = 4 at L = 2; with them in memory, L = 4 and R = 6 fit (24 + 4 of 32 registers, and the
8 that a flush's float32 group takes while the operand is dead): a third fewer instructions
per product. The float16 sums run for STAGE products and are then added to the float32 sums
in the output rows (`vle32`, `vfwadd.wv`, `vse32`: about 5·L per row and stage), which keeps
the error of a long dot product at that of STAGE terms (docs/guide/precision.md).

Loop shape, normal orientation (vectors along output positions, weights as scalars; the
transposed one swaps the two, and keeps its float32 sums between stages in a scratch of R
contiguous rows: in the output they would be strided, an element a cycle on an X60):

    for each panel of R rows, for each strip of vl positions:
        first stage (the K % STAGE remainder, or STAGE): h_i = x . w_i, in float16
        only stage: c_i = widen(h_i), then the epilogue
        else out_i = widen(h_i); middle stages: out_i += h_i; last: c_i = out_i + h_i, epilogue

A padded row (past M) or column (past the operand) is computed, on zero weights or on the
operand's padding, but never stored."""
from __future__ import annotations

from typing import Callable

from ...cfmt import indent
from ...loops import cdiv

STAGE = 32                  # products summed in float16 before they join the float32 sums
MAX_ROWS = {2: 8, 4: 6}     # L -> R: R float16 sums (L registers) + the operand's L + the
                            # flush's float32 group (2·L, while the operand is dead) <= 32
FLUSH = 5                   # weighted instructions per register of L a flush of one row takes
SCRATCH_LANES = 256         # transposed: the float32 sums between stages go to a scratch of
                            # R rows of this many (VLEN 1024 at L = 4); strips are capped at it


def stages(k: int, stage: int = STAGE) -> tuple:
    """(first stage's steps, stages): the remainder first, so every later stage is whole."""
    n = cdiv(k, stage)
    return k - (n - 1) * stage, n


def step_cost(rows: int, lmul: int, k: int, stage: int = STAGE) -> float:
    """Weighted instructions of one panel and strip: per step R FMAs of L, R scalar loads,
    the operand load (L), a pointer bump and half a branch; per stage boundary, the rows'
    flushes and two vtype changes."""
    per_step = rows * lmul + rows + lmul + 1.5
    return k * per_step + (stages(k, stage)[1] - 1) * (rows * FLUSH * lmul + 2)


def guarded(stmt: str, i: int, first: str, total: int, r: int) -> str:
    """stmt for row (column) i of a panel of r starting at `first`, guarded where the last
    panel may be padded past `total`."""
    full = i < total % r or total % r == 0
    return stmt if full else f"if ({first} + {i} < {total}) {stmt}"


def needs_scratch(g) -> bool:
    return g.trans and stages(g.k, g.stage)[1] > 1


def scratch_floats(g) -> int:
    """Floats of scratch the transposed form's float32 sums take (0: none)."""
    return g.rows * SCRATCH_LANES if needs_scratch(g) else 0


def vmax_decl(g) -> str:
    """C: `vmax`, the strip's lanes (VLMAX at e16m<L>; capped where a scratch row holds it)."""
    v = f"__riscv_vsetvlmax_e16m{g.lmul}()"
    if needs_scratch(g):
        return (f"const size_t vmax = {v} < {SCRATCH_LANES} ? {v} : {SCRATCH_LANES};"
                f"   /* a scratch row's lanes */")
    return f"const size_t vmax = {v};"


def loops(g, store: Callable[[int], str], out: str, scratch: str = "") -> str:
    """C of HalfGemm g's staged form over `wp`, `xh` and `vmax` (vmax_decl); the float32 sums
    between stages in out[m][cols] (float, the name `out`), or for the transposed form in
    `scratch` (scratch_floats(g)); store(i) finishes `c<i>` (vfloat32m<2L>_t): normal, row
    m0 + i over positions [j, j + vl); transposed, position t0 + i over channels
    [m0, m0 + vl)."""
    L, r = g.lmul, g.rows
    if g.trans:
        vec, vstride, sc, sstride = "wk", g.m, "xk", g.cols
        head = f"""for (size_t m0 = 0, vl; m0 < {g.m}; m0 += vl) {{
    vl = {g.m} - m0 < vmax ? {g.m} - m0 : vmax;
    for (int t0 = 0; t0 < {g.cols}; t0 += {r}) {{
        /* the last group may read up to {r - 1} columns past the operand (padded; unused) */
        const _Float16 *__restrict xk = xh + t0;
        const _Float16 *__restrict wk = wp + m0;"""
        acc = scratch
        first, total = "t0", g.cols
    else:
        vec, vstride, sc, sstride = "xk", g.cols, "wk", r
        head = f"""for (int m0 = 0; m0 < {g.m}; m0 += {r}) {{
    const _Float16 *__restrict wm = wp + (ptrdiff_t)m0 * {g.k};
    for (size_t j = 0, vl; j < {g.cols}; j += vl) {{
        /* vl in scalar code: clang 16's vsetvl intrinsic would re-issue vsetvli in the k loop */
        vl = {g.cols} - j < vmax ? {g.cols} - j : vmax;
        const _Float16 *__restrict xk = xh + j, *__restrict wk = wm;"""
        acc = f"{out} + (ptrdiff_t)m0 * {g.cols} + j"
        first, total = "m0", g.m
    n0, n = stages(g.k, g.stage)
    if n > 1:      # the float32 sums between stages
        head += f"\n        float *__restrict acc = {acc};"
    ops = _Ops(L, 0 if g.trans else g.cols)

    def flush(kind: str) -> str:
        return "\n".join(guarded(ops.flush(kind, i, store), i, first, total, r)
                         for i in range(r))
    body = [f"vfloat16m{L}_t xv, " + ", ".join(f"h{i}" for i in range(r)) + ";",
            _stage(n0, vec, vstride, sc, sstride, r, L)]
    if n == 1:
        body.append(flush("only"))
    else:
        body.append(flush("first"))
        if n > 2:
            body.append(f"for (int s = 1; s < {n - 1}; ++s) {{\n"
                        + indent(_stage(g.stage, vec, vstride, sc, sstride, r, L) + "\n"
                                 + flush("middle")) + "\n}")
        body += [_stage(g.stage, vec, vstride, sc, sstride, r, L), flush("last")]
    return f"{head}\n{indent(chr(10).join(body), 2)}\n    }}\n}}"


class _Ops:
    """The flush of row i's float16 sums into its float32 sums at acc + i rows of `row`
    floats (the output's rows, or the scratch's)."""

    def __init__(self, lmul: int, row: int):
        self.f, self.acc, self.row = f"f32m{2 * lmul}", 2 * lmul, row or SCRATCH_LANES

    def _load(self, i: int) -> str:
        return f"__riscv_vle32_v_{self.f}(acc + {i * self.row}, vl)"

    def _save(self, i: int, v: str) -> str:
        return f"__riscv_vse32_v_{self.f}(acc + {i * self.row}, {v}, vl);"

    def flush(self, kind: str, i: int, store: Callable[[int], str]) -> str:
        widen = f"__riscv_vfwcvt_f_f_v_{self.f}(h{i}, vl)"
        added = f"__riscv_vfwadd_wv_{self.f}({self._load(i)}, h{i}, vl)"
        if kind == "first":
            return self._save(i, widen)
        if kind == "middle":
            return self._save(i, added)
        value = widen if kind == "only" else added
        return "{\n" + indent(f"vfloat32m{self.acc}_t c{i} = {value};\n{store(i)}") + "\n}"


def _stage(n: int, vec: str, vstride: int, sc: str, sstride: int, r: int, L: int) -> str:
    """C: n steps of float16 sums h<i> (the first a product), two per trip after the one or
    two peeled so that none is left over (clang sank a leftover step into the flush below
    and spilled its operand); leaves the pointers n steps on."""
    h = f"f16m{L}"

    def one(u: int, first: bool) -> str:
        lines = [f"xv = __riscv_vle16_v_{h}({vec}{f' + {u * vstride}' if u else ''}, vl);"]
        for i in range(r):
            s = f"{sc}[{u * sstride + i}]"
            lines.append(f"h{i} = __riscv_vfmul_vf_{h}(xv, {s}, vl);" if first else
                         f"h{i} = __riscv_vfmacc_vf_{h}(h{i}, {s}, xv, vl);")
        return "\n".join(lines)
    peeled = 1 if n % 2 else 2
    out = [one(u, u == 0) for u in range(peeled)]
    out.append(f"{vec} += {peeled * vstride};\n{sc} += {peeled * sstride};")
    pairs = (n - peeled) // 2
    if pairs:
        end = f"{sc} + (ptrdiff_t){2 * pairs * sstride}"
        out.append(f"""for (const _Float16 *const end = {end}; {sc} != end;) {{
{indent(one(0, False))}
{indent(one(1, False))}
    {vec} += {2 * vstride};
    {sc} += {2 * sstride};
}}""")
    return "\n".join(out)
