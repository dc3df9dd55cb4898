"""RVV 1.0 intrinsic bodies of the packed GEMM's data movement (see packed.py): the strided
packer (operand -> panels) and the epilogue (tile -> output). They read and write exactly the
panels and tiles of the portable code; emit.py places them under
`#if defined(__riscv_v_intrinsic)`. Bodies are returned unindented (the caller shifts them)."""
from __future__ import annotations

from ...cfmt import flt, indent
from ...rvv import vle, vlse, vop, vse, vsetvl, vsetvlmax, vsplat, vsse, vt
from .spec import Epilogue


def _strip(avl: str, start: str, body: str, lmul: int = 8) -> str:
    """A loop over u in [start, avl) strip-mined by vsetvl at LMUL: `body` sees u and vl."""
    return f"""for (size_t u = {start}; u < {avl};) {{
    const size_t vl = {vsetvl(lmul, f'{avl} - u')};
{indent(body)}
    u += vl;
}}"""


FIT_LMULS = (1, 2, 4, 8)


def fitted_strip(avl: str, start: str, body) -> str:
    """`_strip` at the smallest LMUL whose register group holds the run [start, avl) at the VLEN
    the code runs at (m8 strips beyond), picked at run time: runs here are panel and tile
    sides (14 to 64 floats), and a vector instruction costs its whole register group however
    few elements it has, so m8 on a 14-float run costs four times m2. `body(L)`: statements
    at LMUL L."""
    n = avl if start == "0" else f"({avl} - {start})"
    head = f"const size_t rvk_n = {n}, rvk_v = {vsetvlmax(1)};"
    arms = [f"if (rvk_n <= {L} * rvk_v) {{\n{indent(_strip(avl, start, body(L), L))}\n}}"
            for L in FIT_LMULS[:-1]]
    last = f"{{\n{indent(_strip(avl, start, body(8), 8))}\n}}"
    return f"{{\n{indent(head)}\n{indent(' else '.join(arms + [last]))}\n}}"


def fitted_rows(avl: str, loop: str, decls: str, body, peel: bool = False) -> str:
    """fitted_strip's choice made once for a loop of rows (`loop`, as "int i < mr": the index,
    its type and bound; `decls`, the row's pointers) that each copy a run of the same `avl`
    elements from u = 0: where one register group holds the run, its LMUL and vl are set
    before the loop and each row is one strip (a per-row choice and strip loop cost the packer
    more scalar instructions than its vector loads and stores); longer runs strip-mine each
    row at m8. `peel` (the loop runs at least once): row 0 is run before the loop, so the
    vector state is set on entry and clang 16 keeps its vsetvli out of the loop."""
    ctype, var, _, bound = loop.split()

    def head(first: int) -> str:
        return f"for ({ctype} {var} = {first}; {var} < {bound}; ++{var}) {{\n{decls}"

    def one(L: int) -> str:
        if not peel:
            return f"{head(0)}\n{indent(body(L))}\n}}"
        return (f"{{   /* row 0, peeled */\n    const {ctype} {var} = 0;\n{decls}\n"
                f"{indent(body(L))}\n}}\n{head(1)}\n{indent(body(L))}\n}}")
    arms = [f"""if (rvk_n <= {L} * rvk_v) {{
    const size_t vl = rvk_n, u = 0;   /* (not vsetvl: clang 16 then sets vl in the loop) */
{indent(one(L))}
}}""" for L in FIT_LMULS[:-1]]
    last = f"{{\n{indent(head(0))}\n{indent(_strip(avl, '0', body(8), 8), 2)}\n    }}\n}}"
    empty = "if (rvk_n == 0) {\n    /* nothing to copy (a grid run of padding) */\n}"
    return f"""{{
    const size_t rvk_n = {avl}, rvk_v = {vsetvlmax(1)};
{indent(' else '.join([empty] + arms + [last]))}
}}"""


def strided_pack(pw: int, si: int, sk: int) -> str:
    """RVV body of one panel of the strided packer (clang turns the portable loops into
    memcpy/memset calls per k-row, which glibc runs as scalar code on riscv64). Contiguous
    along k (si != 1, sk == 1): each of the c indices is a vector of k values stored with
    stride pw; otherwise each k-row is a (strided) load of c values; padding is stored zeros."""
    L = 8
    zero = f"const {vt(L)} z = {vsplat(L, '0.0f', vsetvlmax(L))};"
    if sk == 1 and si != 1:
        return f"""{zero}
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
}}"""
    def load(L: int) -> str:
        return vle(L, "sk_ + u") if si == 1 else \
            vlse(L, "sk_ + (ptrdiff_t)u * " + str(si), si)
    pad = f"""for (int kk = 0; kk < kb; ++kk) {{
    float *__restrict dk = d + kk * {pw};
{indent(fitted_strip(str(pw), "(size_t)c", lambda L: vse(L, 'dk + u', vsplat(L, '0.0f'))))}
}}"""
    rows = f"""    const float *__restrict sk_ = s + kk * {sk};
    float *__restrict dk = d + kk * {pw};"""
    copy = fitted_rows("(size_t)c", "ptrdiff_t kk < kb", rows,
                       lambda L: vse(L, 'dk + u', load(L)), peel=True)
    return f"""{copy}
if (c < {pw}) {{   /* the last panel's padding */
{indent(pad)}
}}"""


EP_LMULS = FIT_LMULS   # epilogue vectors: fitted to the run (fitted_strip)


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
        out.append(f"v = {ep.act.rvv_expr('v', L)};")
    return "\n".join(out)


def _runs(ep: Epilogue, pos: str, count: str, first: str) -> str:
    """Head of the loop over the contiguous output runs of a tile side of `count` cells from
    grid position `pos`: each run has `run` valid outputs from output index `first`. Without
    a grid the whole side is one run (a block, not a loop)."""
    if not ep.grid:
        return f"const int {pos[0]}s = 0, {first} = {pos};\nconst size_t run = (size_t){count};"
    wp, wo = ep.grid
    s = pos[0] + "s"
    return f"""const int gn = {pos} + {s}, gw = gn % {wp};
const int len = {wp} - gw < {count} - {s} ? {wp} - gw : {count} - {s};
const size_t run = gw >= {wo} ? 0 : (size_t)({wo} - gw < len ? {wo} - gw : len);
const int {first} = gn / {wp} * {wo} + gw;"""


def _over_runs(ep: Epilogue, pos: str, count: str, first: str, body: str) -> str:
    s = pos[0] + "s"
    head = _runs(ep, pos, count, first)
    if not ep.grid:
        return f"{{\n{indent(head)}\n{indent(body)}\n}}"
    return f"for (int {s} = 0; {s} < {count};) {{\n{indent(head)}\n{indent(body)}\n" \
           f"    {s} += len;\n}}"


def ep_rows(ep: Epilogue, nr: int) -> str:
    """RVV epilogue, normal orientation: per tile row, the contiguous column runs of t and y
    are strip-mined (vl = vsetvl(run - u)), partial sums added, the epilogue applied in
    registers."""
    def body(L: int, final: bool) -> str:
        ld = f"{vt(L)} v = {vle(L, 'ti + u')};\n" \
             f"if (!first) v = {vop('vfadd_vv', L)}(v, {vle(L, 'yi + u')}, vl);"
        fin = _ep_apply(ep, "(i0 + i)", "(yc + (int)u)", L)
        return ld + ("\n" + fin if final and fin else "") + "\n" + vse(L, "yi + u", "v")

    def rows(final: bool) -> str:
        decls = f"""    const float *__restrict ti = t + i * {nr} + js;
    float *__restrict yi = y + (ptrdiff_t)(i0 + i) * {ep.ldy} + yc;"""
        return fitted_rows("run", "int i < mr", decls, lambda L: body(L, final))
    body = f"if (last) {{\n{indent(rows(True))}\n}} else {{\n{indent(rows(False))}\n}}"
    return _over_runs(ep, "j0", "nr", "yc", body)


def ep_cols(ep: Epilogue, nr: int) -> str:
    """RVV epilogue, transposed orientation: tile row i is output column n, so for each tile
    column j a run of rows is a strided load from t (stride NR) and a contiguous run of y."""
    def body(L: int) -> str:
        fin = _ep_apply(ep, "(j0 + j)", "(n0 + (int)u)", L)
        return (f"{vt(L)} v = {vlse(L, 'tj + u * ' + str(nr), nr)};\n"
                f"if (!first) v = {vop('vfadd_vv', L)}(v, {vle(L, 'yj + u')}, vl);\n"
                + (f"if (last) {{\n{indent(fin)}\n}}\n" if fin else "")
                + vse(L, "yj + u", "v"))
    decls = f"""    const float *__restrict tj = t + is * {nr} + j;
    float *__restrict yj = y + (ptrdiff_t)(j0 + j) * {ep.ldy} + n0;"""
    cols = f"""{'' if _ep_apply(ep, "0", "0", 1) else "(void)last;"}
{fitted_rows("run", "int j < nr", decls, body)}"""
    return _over_runs(ep, "i0", "mr", "n0", cols)
