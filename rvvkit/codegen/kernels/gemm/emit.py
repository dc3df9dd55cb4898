"""C emitters of the packed GEMM's helpers (see packed.py): the MR x NR micro-kernel, the strided
panel packer and the epilogue that stores a tile. Each returns (name, C definition); names say
what the helper is, with a hash suffix only where the shapes in the name do not identify the
text. Under RVV intrinsics the bodies come from rvv.py / rvv_move.py."""
from __future__ import annotations

import hashlib
from typing import Optional, Tuple

from ....ops.activations import act_expr, has_vector_form
from ...cfmt import flt, indent
from ...loops import loop
from ...rvv import GUARD
from . import rvv as rvv
from . import rvv_fused as fused
from . import rvv_move as rvv_move
from .spec import Epilogue


# gcc must compile the micro-kernel on its own, for any kb and offsets: inlined into the driver,
# its heuristics stop fully unrolling the MR loop for MR > 8 (accumulators go to memory, 4x
# slower); constant-propagated (IPA-CP clones for a constant kb and offset table, as in the
# depthwise kernel) it unrolls k and "vectorises" with gathers. Hence noinline + noipa.
NOINLINE = """#ifndef RVK_NOINLINE
#if defined(__GNUC__) && !defined(__clang__)
#define RVK_NOINLINE __attribute__((noinline, noipa))
#elif defined(__GNUC__)
#define RVK_NOINLINE __attribute__((noinline))
#else
#define RVK_NOINLINE
#endif
#endif
"""


# x86 without AVX-512 has 16 vector registers of 8 floats: an MR x NR tile sized for 32 registers
# would spill its accumulators there (gcc keeps the whole acc array in memory), so the tile is
# computed in blocks of at most 6 rows x 16 columns (12 accumulators, 2 vectors of b, 1
# broadcast), one pass over k each, written with GNU vector types so they stay in registers.
AVX2_ROWS, AVX2_COLS = 6, 16


def _tile_at(to_y: bool, nr: int, i, j) -> str:
    """Where tile element (i, j) goes: t's row-major MR x NR tile, or y at its row stride."""
    return f"y + {i} * ldy + {j}" if to_y else f"t + {i * nr + j}"


def _a_at(i, in_place: bool) -> str:
    """Row i's element of A at the current k: a packed panel's column, or (in_place: A read
    where it lies, row stride lda) row i itself."""
    return f"ak[{i} * lda]" if in_place else f"ak[{i}]"


def _block8(mr: int, nr: int, i0: int, j0: int, arow: str, brow: str,
            to_y: bool = False, in_place: bool = False) -> str:
    rows, nv = min(AVX2_ROWS, mr - i0), min(AVX2_COLS, nr - j0) // 8
    accs = [[f"c{i}{v}" for v in range(nv)] for i in range(rows)]
    decl = "v8 " + ", ".join(f"{c} = {{0}}" for r in accs for c in r) + ";"
    loads = "\n".join(f"v8 b{v};\nmemcpy(&b{v}, bk + {8 * v}, sizeof b{v});" for v in range(nv))
    fmas = "\n".join(f"{{\n    const float s = {_a_at(i, in_place)};\n"
                     "    const v8 av = {s, s, s, s, s, s, s, s};\n"
                     + "".join(f"    {accs[i][v]} += av * b{v};\n" for v in range(nv)) + "}"
                     for i in range(rows))
    stores = "\n".join(f"memcpy({_tile_at(to_y, nr, i0 + i, j0 + 8 * v)}, &{accs[i][v]}, "
                       f"sizeof {accs[i][v]});" for i in range(rows) for v in range(nv))
    off_a = (f" + {i0} * lda" if in_place else f" + {i0}") if i0 else ""
    off_b = f" + {j0}" if j0 else ""
    return f"""{{ /* rows {i0}..{i0 + rows - 1}, columns {j0}..{j0 + 8 * nv - 1} */
    {decl}
    for (int k = 0; k < kb; ++k) {{
        const float *__restrict ak = {arow}{off_a};
        const float *__restrict bk = {brow}{off_b};
{indent(loads, 2)}
{indent(fmas, 2)}
    }}
{indent(stores)}
}}"""


def ukernel(mr: int, nr: int, ind: str = "") -> Tuple[str, str]:
    """t[MR][NR] = sum_k a[k][MR] (x) b[k][NR] over kb steps of packed panels. With ind "a" or
    "b", that side is read in place: its row k starts at side + off[k] (conv on the padded
    input, where a k-row of the implicit im2col matrix is a shifted run of the input).

    Under RVV intrinsics the same panels are consumed by LMUL variants chosen by VLEN
    (gemm_rvv.uk_dispatch); the portable body below is what every other compiler sees."""
    name = f"rvk_gemm_micro_{mr}x{nr}" + (f"_indirect_{ind}" if ind else "")
    offp = "const int *__restrict off, " if ind else ""
    variants, dispatch = rvv.uk_dispatch(name, mr, nr, ind)
    avx2, generic = _portable_body(mr, nr, ind, False)
    return name, NOINLINE + f"""{GUARD}
#include <riscv_vector.h>
{variants}#endif
static RVK_NOINLINE void {name}(int kb, const float *__restrict a,
    const float *__restrict b, {offp}float *__restrict t) {{
{GUARD}
{indent(dispatch)}
{avx2}#else
{generic}
#endif
}}
"""


def _portable_body(mr: int, nr: int, ind: str, to_y: bool,
                   in_place: bool = False) -> Tuple[str, str]:
    """(AVX2 branch, generic C) of the micro-kernel's non-RVV body, storing the tile into t
    or (to_y) straight into y; `in_place`: A read where it lies (row i at a + i * lda)."""
    arow = "a + off[k]" if ind == "a" else ("a + k" if in_place else f"a + k * {mr}")
    brow = "b + off[k]" if ind == "b" else f"b + k * {nr}"
    zero = loop("i", 0, mr, loop("j", 0, nr, "acc[i][j] = 0.0f;"))
    fma = loop("i", 0, mr, f"const float ai = {_a_at('i', in_place)};\n"
               + loop("j", 0, nr, "acc[i][j] += ai * bk[j];"))
    store = loop("i", 0, mr, loop("j", 0, nr, "y[(ptrdiff_t)i * ldy + j] = acc[i][j];"
                                  if to_y else f"t[i * {nr} + j] = acc[i][j];"))
    avx2 = ""
    if nr % 8 == 0:
        blocks = "\n".join(_block8(mr, nr, i0, j0, arow, brow, to_y, in_place)
                            for i0 in range(0, mr, AVX2_ROWS) for j0 in range(0, nr, AVX2_COLS))
        avx2 = f"""#elif defined(__GNUC__) && defined(__AVX__) && !defined(__AVX512F__)
    typedef float v8 __attribute__((vector_size(32)));
{indent(blocks)}
"""
    return avx2, f"""    float acc[{mr}][{nr}];
{indent(zero)}
    /* per k: one broadcast of a per row, NR/VEC vector loads of b, MR*NR/VEC FMAs */
    for (int k = 0; k < kb; ++k) {{
        const float *__restrict ak = {arow};
        const float *__restrict bk = {brow};
{indent(fma, 2)}
    }}
{indent(store)}"""


def _host_only(name: str, params: str, avx2: str, generic: str) -> Tuple[str, str]:
    """(name, C) of a micro-kernel compiled where RVV intrinsics are not: the AVX2 blocks where
    the compiler targets AVX2 without AVX-512, else the generic body."""
    body = f"{avx2.replace('#elif', '#if', 1)}#else\n{generic}\n#endif" if avx2 else generic
    return name, NOINLINE + f"""#if !defined(__riscv_v_intrinsic)
static RVK_NOINLINE void {name}({params}) {{
{body}
}}
#endif
"""


def ukernel_to_y_host(mr: int, nr: int, ind: str = "") -> Tuple[str, str]:
    """Not RVV: the micro-kernel storing a full tile of a one-k-block GEMM with a copying
    epilogue straight into y (row stride ldy). Through t, the tile's extra store, load and
    store cost a K = 64 attention product (QK^T) ~10 % on x86."""
    name = f"rvk_gemm_micro_{mr}x{nr}" + (f"_indirect_{ind}" if ind else "") + "_to_y_host"
    offp = "const int *__restrict off, " if ind else ""
    return _host_only(name, f"int kb, const float *__restrict a,\n    const float *__restrict b, "
                      f"{offp}float *__restrict y, ptrdiff_t ldy",
                      *_portable_body(mr, nr, ind, True))


def ukernel_rows_host(mr: int, nr: int) -> Tuple[str, str]:
    """Not RVV: the micro-kernel reading a full panel of MR rows of a runtime A where it lies
    (row stride lda) instead of from a packed panel. Where B is narrow (attention's P.V
    against a 64-wide V), packing A costs a transposing copy per 64 MACs: ~12 % of the
    product on x86."""
    return _host_only(f"rvk_gemm_micro_{mr}x{nr}_rows_host",
                      "int kb, const float *__restrict a, ptrdiff_t lda,\n"
                      "    const float *__restrict b, float *__restrict t",
                      *_portable_body(mr, nr, "", False, True))


def _fused_name(base: str, ep: "Epilogue") -> str:
    """Name of a micro-kernel storing into y with `ep` applied in registers: one per epilogue
    form, whatever y's stride (a parameter), so the layers of a model share it."""
    name = f"{base}_to_y{ep.describe()}"
    digest = hashlib.sha1(fused.form(ep).encode()).hexdigest()[:8]
    return name if trivial(ep) else f"{name}_{digest}"


def ukernel_to_y(mr: int, nr: int, ind: str, ep: "Epilogue") -> Tuple[str, str]:
    """RVV only: the micro-kernel finishing a full tile of a one-k-block GEMM in registers and
    storing it straight into y (rvv_fused.py), `t` pointing at the tile's origin in y and
    the addends' pointers at theirs."""
    name = _fused_name(f"rvk_gemm_micro_{mr}x{nr}" + (f"_indirect_{ind}" if ind else ""), ep)
    extra, names = fused.params(ep), fused.arg_names(ep)
    variants, dispatch = rvv.uk_dispatch(name, mr, nr, ind, fused.store(ep, nr), extra, names)
    offp = "const int *__restrict off, " if ind else ""
    return name, NOINLINE + f"""{GUARD}
{variants}static RVK_NOINLINE void {name}(int kb, const float *__restrict a,
    const float *__restrict b, {offp}float *__restrict t{extra}) {{
{indent(dispatch)}
}}
#endif
"""


def ukernel_pair(mr: int, nr: int, ind: str, ep: Optional["Epilogue"] = None) -> Tuple[str, str]:
    """RVV only: the micro-kernel over np adjacent NR-wide panels (gemm_rvv's panel groups),
    `bs` floats apart, into t (np MR x NR tiles) or, with `ep`, finished into y."""
    base = f"rvk_gemm_micro_{mr}x{nr}" + (f"_indirect_{ind}" if ind else "") + "_pair"
    name = base if ep is None else _fused_name(base, ep)
    store = rvv.pair_store(nr, mr) if ep is None else fused.store(ep, nr)
    extra, names = (fused.params(ep), fused.arg_names(ep)) if ep is not None else ("", "")
    variants, dispatch = rvv.pair_dispatch(name, mr, nr, ind, store, extra, names)
    offp = "const int *__restrict off, " if ind else ""
    return name, NOINLINE + f"""{GUARD}
{variants}static RVK_NOINLINE void {name}(int lmul, int np, int kb, const float *__restrict a,
    const float *__restrict b, ptrdiff_t bs, {offp}float *__restrict t{extra}) {{
    (void)np;
{indent(dispatch)}
}}
#endif
"""


def trivial(ep: "Epilogue") -> bool:
    """An epilogue that only copies the tile."""
    return ep.alpha == 1.0 and not ep.addends and ep.act is None and ep.grid is None


def strided_packer(pw: int, si: int, sk: int) -> Tuple[str, str]:
    """Packs idx in [i0, i0+n), k in [k0, k0+kb) of src[idx*si + k*sk] into pw-wide panels."""
    name = f"rvk_pack_panels_{pw}_stride_{si}x{sk}"
    # k outer, whatever the strides: each panel row is then written whole. Reading along k
    # (contiguous loads, stores pw floats apart) measured 2x slower on x86 for A-sides of
    # 12 rows and B-sides of 32 (0.31 against 0.15 ns and 1.7 against 0.8 ns per float)
    el = f"s[(ptrdiff_t)u * {si} + (ptrdiff_t)kk * {sk}]"
    outer, inner = "for (int kk = 0; kk < kb; ++kk)", f"for (int u = 0; u < {pw}; ++u)"
    return name, f"""static void {name}(const float *__restrict src, int i0, int n, int k0, int kb,
    float *__restrict dst) {{
    for (int pp = 0; pp * {pw} < n; ++pp) {{
        const int c = n - pp * {pw} < {pw} ? n - pp * {pw} : {pw};
        float *__restrict d = dst + (ptrdiff_t)pp * kb * {pw};
        const float *__restrict s = src + (ptrdiff_t)(i0 + pp * {pw}) * {si} + (ptrdiff_t)k0 * {sk};
{GUARD}
{indent(rvv_move.strided_pack(pw, si, sk), 2)}
#else
        if (c == {pw}) {{
            {outer}
                {inner} d[kk * {pw} + u] = {el};
        }} else {{
            for (int kk = 0; kk < kb; ++kk) {{
                for (int u = 0; u < c; ++u) d[kk * {pw} + u] = {el};
                for (int u = c; u < {pw}; ++u) d[kk * {pw} + u] = 0.0f;
            }}
        }}
#endif
    }}
}}
"""


def _ep_value(ep: Epilogue, v: str, m: str, n: str) -> str:
    expr = v if ep.alpha == 1.0 else f"{flt(ep.alpha)} * {v}"
    for ptr, idx, scale in ep.addends:
        term = f"{ptr}[{idx.format(m=m, n=n)}]"
        expr += f" + {term}" if scale in (None, 1.0) else f" + {flt(scale)} * {term}"
    return expr


def _ep_rows(ep: Epilogue, nr: int, rows, cols) -> str:
    """Epilogue of a tile whose columns are output columns (normal orientation): each row run
    is contiguous in t and y, so the passes vectorise. With a grid, tile column n is position
    (n / wp, n % wp) of a padded row grid; runs are cut at grid rows and columns >= wo dropped."""
    if ep.grid:
        wp, wo = ep.grid
        head = f"""for (int js = 0; js < {cols};) {{
    const int gn = j0 + js, gw = gn % {wp};
    const int len = {wp} - gw < {cols} - js ? {wp} - gw : {cols} - js;
    const int vl = gw >= {wo} ? 0 : ({wo} - gw < len ? {wo} - gw : len);
    const int yc = gn / {wp} * {wo} + gw;"""
        tail = "    js += len;\n}"
    else:
        head, tail = f"{{\n    const int js = 0, vl = {cols}, yc = j0;", "}"
    t, y, m = f"t[i * {nr} + js + u]", f"y[(ptrdiff_t)(i0 + i) * {ep.ldy} + yc + u]", "(i0 + i)"

    def each(stmt: str) -> str:
        return loop("i", 0, rows, loop("u", 0, "vl", stmt))
    final = f"const float v = {_ep_value(ep, t, m, '(yc + u)')};\n{y} = {act_expr(ep.act, 'v')};"
    body = f"""if (!first) {{
{indent(each(f"{t} += {y};"))}
}}
if (last) {{
{indent(each(final))}
}} else {{
{indent(each(f"{y} = {t};"))}
}}"""
    return f"{head}\n{indent(body)}\n{tail}"


def _ep_cols(ep: Epilogue, nr: int, rows, cols) -> str:
    """Transposed orientation: tile rows are output columns, stored with stride ldy (scalar).
    With a grid, tile rows on wrap-around cells (grid column >= wo) are skipped."""
    t, y = f"t[i * {nr} + j]", f"y[(ptrdiff_t)(j0 + j) * {ep.ldy} + n]"
    value = _ep_value(ep, "v", "(j0 + j)", "n")
    if value == "v" and ep.act is None:         # nothing to apply: a copy
        store = f"float v = {t};\nif (!first) v += {y};\n(void)last;\n{y} = v;"
    else:
        fin = f"    v = {value};\n" if value != "v" else ""
        store = f"""float v = {t};
if (!first) v += {y};
if (last) {{
{fin}    {y} = {act_expr(ep.act, 'v')};
}} else {{
    {y} = v;
}}"""
    if ep.grid:
        wp, wo = ep.grid
        store = f"""const int gn = i0 + i;
if (gn % {wp} < {wo}) {{
    const int n = gn / {wp} * {wo} + gn % {wp};
{indent(store)}
}}"""
    else:
        store = f"const int n = i0 + i;\n{store}"
    return loop("j", 0, cols, loop("i", 0, rows, store))


def epilogue(mr: int, nr: int, ep: Epilogue) -> Tuple[str, str]:
    """Stores tile t (MR x NR) at (i0, j0): accumulates onto y unless `first`, applies the
    fused epilogue when `last` (k-blocked products keep raw partial sums in y meanwhile).
    With RVV intrinsics (and an activation with a vector form) the runs are strip-mined."""
    name = f"rvk_gemm_store_{mr}x{nr}{ep.describe()}_{ep.tag()}"
    ptrs = "".join(f"const float *__restrict {p}, " for p, _, _ in ep.addends)
    body = _ep_cols if ep.trans else _ep_rows
    portable = f"""if (mr == {mr} && nr == {nr}) {{
{indent(body(ep, nr, mr, nr))}
}} else {{
{indent(body(ep, nr, 'mr', 'nr'))}
}}"""
    if has_vector_form(ep.act):
        vec = (rvv_move.ep_cols if ep.trans else rvv_move.ep_rows)(ep, nr)
        portable = f"{GUARD}\n{indent(vec)}\n#else\n{indent(portable)}\n#endif"
    else:
        portable = indent(portable)
    return name, f"""static void {name}(float *__restrict t, int i0, int j0, int mr, int nr,
    int first, int last, {ptrs}float *__restrict y) {{
{portable}
}}
"""
