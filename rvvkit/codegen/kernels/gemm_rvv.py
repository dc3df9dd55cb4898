"""RVV 1.0 intrinsic bodies of the packed GEMM (see gemm.py): the register-blocked micro-kernel
variants, the strided packer and the epilogue. They read and write exactly the panels and tiles
of the portable code, so packing, tiling and the build-time weight transforms stay shared with
x86; gemm.py places these bodies under `#if defined(__riscv_v_intrinsic)`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

from ..cfmt import flt
from ..loops import cdiv
from ..rvv import GUARD, vact, vle, vlse, vop, vse, vsetvl, vsetvlmax, vsplat, vsse, vt

if TYPE_CHECKING:
    from .gemm import Epilogue


# --- RVV micro-kernel. Per k step a row group of R rows costs one vector load of b, R scalar
# loads of a, R vfmacc.vf and the loop's scalar overhead; the accumulators (R register groups of
# LMUL registers) plus the b vector must fit the 32 vector registers: R <= 32/LMUL - 1. A strip
# covers min(NR, LMUL*VLEN/32) columns. The best LMUL depends on VLEN, known only at run time, so
# the kernel holds one variant per LMUL that wins for some VLEN and picks it by vsetvlmax.
LMULS = (1, 2, 4, 8)
VLENS = (128, 256, 512, 1024, 2048)
LOOP = 3        # scalar instructions per k step besides the loads/FMAs (pointer bumps, branch)


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
    """Dynamic instructions per k step of the MR x NR RVV micro-kernel at LMUL and VLEN: per
    strip and row group one b load, R scalar a loads, R vfmacc, the loop's bumps and branch
    (shared by the unrolled steps) and, reading in place, the offset-table address."""
    strips = cdiv(nr, lmul * vlen // 32)
    per_strip = sum(1 + 2 * (r1 - r0) + LOOP / unroll(r1 - r0, lmul) +
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


def _uk_group(mr: int, nr: int, lmul: int, ind: str, r0: int, r1: int) -> str:
    """Rows r0..r1-1 of one column strip: accumulators c_i (LMUL registers each) over all kb
    steps. k = 0 is peeled (c = a*b: no zeroed accumulators; kb >= 1 always), the rest runs
    rvv_unroll steps per iteration on pointers (no counter) plus one remainder step."""
    vty, R = vt(lmul), r1 - r0
    U = unroll(R, lmul)

    def step(u: int, init: bool, pad: str) -> str:
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
        return "\n".join(pad + line for line in out)

    def bump(n: int, table: bool = True) -> str:
        """Advance the read pointers (and the offset-table cursor) by n steps."""
        parts = ([] if ind == "a" else [f"ak += {n * mr};"]) + \
            ([] if ind == "b" else [f"bk += {n * nr};"]) + \
            ([f"ok += {n};"] if ind and table else [])
        return " ".join(parts)

    decls = "\n".join(f"      {vty} c{i};" for i in range(R))
    ptrs = ([] if ind == "a" else [f"const float *__restrict ak = a + {r0};"]) + \
        ([] if ind == "b" else ["const float *__restrict bk = b + j0;"]) + \
        (["const int *__restrict ok = off + 1;"] if ind else [])
    if ind:
        cursor, end = "ok", f"off + 1 + (ptrdiff_t)((kb - 1) / {U}) * {U}"
    else:
        cursor, end = "bk", f"b + j0 + {nr} + (ptrdiff_t)((kb - 1) / {U}) * {U * nr}"
    unrolled = "\n".join(step(u, False, "        ") for u in range(U))
    return f"""    {{ /* rows {r0}..{r1 - 1} */
      {" ".join(ptrs)}
      {vty} bv;
{decls}
{step(0, True, "      ")}
      {bump(1, table=False)}
      for (const {"int" if ind else "float"} *const end = {end}; {cursor} != end;) {{
{unrolled}
        {bump(U)}
      }}
      if ((kb - 1) % {U}) {{
{step(0, False, "        ")}
      }}
{chr(10).join(f"      {vse(lmul, f't + {(r0 + i) * nr} + j0', f'c{i}')}" for i in range(R))}
    }}"""


def uk_variant(name: str, mr: int, nr: int, lmul: int, ind: str) -> str:
    """One LMUL variant: column strips of vl = min(NR - j0, VLMAX) columns, then row groups of
    at most rows_per_group(LMUL) rows, each sweeping k with its accumulators in registers."""
    offp = "const int *__restrict off, " if ind else ""
    groups = [_uk_group(mr, nr, lmul, ind, r0, r1) for r0, r1 in row_groups(mr, lmul)]
    body = "\n".join(groups)
    return f"""static inline void {name}(int kb, const float *__restrict a,
    const float *__restrict b, {offp}float *__restrict t) {{
  /* vl = min(NR - j0, VLMAX) in scalar code: clang 16 puts a vsetvli inside the k loops
     when the strip's vl comes from the vsetvl intrinsic (its "mu" vtype differs) */
  const size_t vlmax = {vsetvlmax(lmul)};
  for (size_t j0 = 0; j0 < {nr};) {{
    const size_t vl = {nr} - j0 < vlmax ? {nr} - j0 : vlmax;
{body}
    j0 += vl;
  }}
}}
"""


def strided_pack(pw: int, si: int, sk: int) -> str:
    """RVV body of one panel of the strided packer (clang turns the portable loops into
    memcpy/memset calls per k-row, which glibc runs as scalar code on riscv64). Contiguous
    along k (si != 1, sk == 1): each of the c indices is a vector of k values stored with
    stride pw; otherwise each k-row is a (strided) load of c values; padding is stored zeros."""
    L = 8
    zero = f"const {vt(L)} z = {vsplat(L, '0.0f', vsetvlmax(L))};"
    if sk == 1 and si != 1:
        return f"""{GUARD}
    {zero}
    for (int u = 0; u < c; ++u) {{
      const float *__restrict su = s + (ptrdiff_t)u * {si};
      for (size_t kk = 0; kk < (size_t)kb;) {{
        const size_t vl = {vsetvl(L, '(size_t)kb - kk')};
        {vsse(L, f'd + kk * {pw} + u', pw, vle(L, "su + kk"))}
        kk += vl;
      }}
    }}
    for (int u = c; u < {pw}; ++u) {{
      for (size_t kk = 0; kk < (size_t)kb;) {{
        const size_t vl = {vsetvl(L, '(size_t)kb - kk')};
        {vsse(L, f'd + kk * {pw} + u', pw, 'z')}
        kk += vl;
      }}
    }}
"""
    load = vle(L, "sk_ + u") if si == 1 else vlse(L, "sk_ + (ptrdiff_t)u * " + str(si), si)
    return f"""{GUARD}
    {zero}
    for (int kk = 0; kk < kb; ++kk) {{
      const float *__restrict sk_ = s + (ptrdiff_t)kk * {sk};
      float *__restrict dk = d + kk * {pw};
      for (size_t u = 0; u < (size_t)c;) {{
        const size_t vl = {vsetvl(L, '(size_t)c - u')};
        {vse(L, 'dk + u', load)}
        u += vl;
      }}
      for (size_t u = (size_t)c; u < {pw};) {{
        const size_t vl = {vsetvl(L, f'{pw} - u')};
        {vse(L, 'dk + u', 'z')}
        u += vl;
      }}
    }}
"""


EP_LMUL = 8   # epilogue vectors: the running value and one loaded operand


def _ep_apply(ep: Epilogue, m: str, n: str, L: int) -> str:
    """Statements turning vector `v` (output row m, columns n .. n+vl) into the final value:
    alpha, addends (vector loads where the index runs with n, scalars otherwise), act."""
    out, scal = [], []
    if ep.alpha != 1.0:
        out.append(f"v = {vop('vfmul_vf', L)}(v, {flt(ep.alpha)}, vl);")
    for ptr, idx, scale in ep.addends:
        if "{n}" in idx:     # every index form is linear in n with coefficient 1
            term = vle(L, f"{ptr} + ({idx.format(m=m, n=n)})")
            if scale in (None, 1.0):
                out.append(f"v = {vop('vfadd_vv', L)}(v, {term}, vl);")
            else:
                out.append(f"v = {vop('vfmacc_vf', L)}(v, {flt(scale)}, {term}, vl);")
        else:
            term = f"{ptr}[{idx.format(m=m, n='0')}]"
            scal.append(term if scale in (None, 1.0) else f"{flt(scale)} * {term}")
    if scal:
        out.append(f"v = {vop('vfadd_vf', L)}(v, {' + '.join(scal)}, vl);")
    if ep.act is not None:
        out.append(f"v = {vact(ep.act, 'v', L)};")
    return "\n".join(out)


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line if line else line for line in text.splitlines())


def ep_rows(ep: Epilogue, nr: int) -> str:
    """RVV epilogue, normal orientation: per tile row, the contiguous column runs of t and y
    are strip-mined (vl = vsetvl(run - u)), partial sums added, the epilogue applied in
    registers."""
    L = EP_LMUL
    if ep.grid:
        wp, wo = ep.grid
        head = f"""for (int js = 0; js < nr;) {{
    const int gn = j0 + js, gw = gn % {wp};
    const int len = {wp} - gw < nr - js ? {wp} - gw : nr - js;
    const size_t run = gw >= {wo} ? 0 : (size_t)({wo} - gw < len ? {wo} - gw : len);
    const int yc = gn / {wp} * {wo} + gw;"""
        tail = "\n    js += len;\n  }"
    else:
        head = "{\n    const int js = 0, yc = j0;\n    const size_t run = (size_t)nr;"
        tail = "\n  }"
    ld = f"{vt(L)} v = {vle(L, 'ti + u')};\n" \
         f"if (!first) v = {vop('vfadd_vv', L)}(v, {vle(L, 'yi + u')}, vl);"
    fin = _ep_apply(ep, "(i0 + i)", "(yc + (int)u)", L)

    def loop(final: bool) -> str:
        body = ld + ("\n" + fin if final and fin else "") + "\n" + vse(L, "yi + u", "v")
        return f"""for (int i = 0; i < mr; ++i) {{
      const float *__restrict ti = t + i * {nr} + js;
      float *__restrict yi = y + (ptrdiff_t)(i0 + i) * {ep.ldy} + yc;
      for (size_t u = 0; u < run;) {{
        const size_t vl = {vsetvl(L, 'run - u')};
{_indent(body, '        ')}
        u += vl;
      }}
    }}"""
    return f"""{head}
    if (last) {{
    {loop(True)}
    }} else {{
    {loop(False)}
    }}{tail}"""


def ep_cols(ep: Epilogue, nr: int) -> str:
    """RVV epilogue, transposed orientation: tile row i is output column n, so for each tile
    column j a run of rows is a strided load from t (stride NR) and a contiguous run of y."""
    L = EP_LMUL
    if ep.grid:
        wp, wo = ep.grid
        head = f"""for (int is = 0; is < mr;) {{
    const int gn = i0 + is, gw = gn % {wp};
    const int len = {wp} - gw < mr - is ? {wp} - gw : mr - is;
    const size_t run = gw >= {wo} ? 0 : (size_t)({wo} - gw < len ? {wo} - gw : len);
    const int n0 = gn / {wp} * {wo} + gw;"""
        tail = "\n    is += len;\n  }"
    else:
        head = "{\n    const int is = 0, n0 = i0;\n    const size_t run = (size_t)mr;"
        tail = "\n  }"
    fin = _ep_apply(ep, "(j0 + j)", "(n0 + (int)u)", L)
    body = (f"{vt(L)} v = {vlse(L, 'tj + u * ' + str(nr), nr)};\n"
            f"if (!first) v = {vop('vfadd_vv', L)}(v, {vle(L, 'yj + u')}, vl);\n"
            + (f"if (last) {{\n{_indent(fin, '  ')}\n}}\n" if fin else "(void)last;\n")
            + vse(L, "yj + u", "v"))
    return f"""{head}
    for (int j = 0; j < nr; ++j) {{
      const float *__restrict tj = t + is * {nr} + j;
      float *__restrict yj = y + (ptrdiff_t)(j0 + j) * {ep.ldy} + n0;
      for (size_t u = 0; u < run;) {{
        const size_t vl = {vsetvl(L, 'run - u')};
{_indent(body, '        ')}
        u += vl;
      }}
    }}{tail}"""
