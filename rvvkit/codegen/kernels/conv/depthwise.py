"""Direct depthwise conv (group == C == M): no reuse across channels, so no GEMM; it runs on the
stride-phase grid of conv_input.PhaseGrid one channel at a time (see `dwconv`)."""
from __future__ import annotations

from typing import Optional, Tuple

from ....ops.activations import Act, act_expr, act_rvv_support, has_vector_form
from ...cfmt import indent
from ...kernel import Kernel, Lowered
from ...parallel import Split
from ...loops import cdiv, loop
from ...rvv import FP16_GUARD, GUARD, guarded, header, vle, vop, vse, vsetvl, vsetvlmax, vt
from .im2col import PhaseGrid, tag
from ..gemm.emit import NOINLINE
from ...precision import NO_FP16, fp16_or, precision, wants_half

DW_ROWS, DW_COLS = 4, 32          # register block of the depthwise kernel: 8 zmm here
DW_CHUNK = DW_ROWS * DW_COLS
DW_UNROLL = 49    # taps unrolled in the RVV depthwise kernel (7x7); larger kernels loop


def _dw_taps() -> Tuple[str, str]:
    """t[R*C] = sum over taps k of w[k] * b[off[k] + 0..R*C): the depthwise inner kernel. Written
    as R rows of C (like the GEMM micro-kernel with a shared row weight) because that is the
    shape gcc 12 keeps in registers; a single 1-D row of accumulators was vectorised with
    gathers instead. Not compiled where the RVV grid sweep replaces it (an unused static)."""
    r, c = DW_ROWS, DW_COLS
    name = f"rvk_dwconv_taps_{r}x{c}"
    return name, NOINLINE + f"""#if !defined(__riscv_v_intrinsic)
static RVK_NOINLINE void {name}(int kb, const float *__restrict a,
    const float *__restrict b, const int *__restrict off, float *__restrict t) {{
    float acc[{r}][{c}];
    for (int i = 0; i < {r}; ++i)
        for (int j = 0; j < {c}; ++j) acc[i][j] = 0.0f;
    for (int k = 0; k < kb; ++k) {{
        const float ak = a[k];
        const float *__restrict bk = b + off[k];
        for (int i = 0; i < {r}; ++i)
            for (int j = 0; j < {c}; ++j) acc[i][j] += ak * bk[i * {c} + j];
    }}
    for (int i = 0; i < {r}; ++i)
        for (int j = 0; j < {c}; ++j) t[i * {c} + j] = acc[i][j];
}}
#endif
"""


def _strip_rvv(pg: PhaseGrid, act: Optional[Act], L: int, vfin: bool) -> str:
    """One strip of vl grid cells at LMUL L: a vector load and FMA per tap from the split plane
    at the tap's constant offset, then bias (and the activation, where it has a vector form)
    in registers."""
    nt = len(pg.taps)
    w0 = "w0" if nt <= DW_UNROLL else "wc[0]"
    if nt <= DW_UNROLL:
        taps = "\n".join(f"acc = {vop('vfmacc_vf', L)}(acc, w{i}, "
                         f"{vle(L, f'xp + q0 + {t}')}, vl);" for i, t in enumerate(pg.taps[1:], 1))
    else:
        taps = f"""for (int k = 1; k < {nt}; ++k)
    acc = {vop('vfmacc_vf', L)}(acc, wc[k], {vle(L, 'xp + q0 + tap[k]')}, vl);"""
    fin = f"\nacc = {act.rvv_expr('acc', L)};" if vfin and act else ""
    return f"""const size_t vl = {vsetvl(L, 'left')};
{vt(L)} acc = {vop('vfmul_vf', L)}({vle(L, f'xp + q0 + {pg.taps[0]}')}, {w0}, vl);
{taps}
acc = {vop('vfadd_vf', L)}(acc, bias, vl);{fin}
{vse(L, 'g + q0', 'acc')}
q0 += vl;"""


def _grid_rvv(pg: PhaseGrid, act: Optional[Act]) -> str:
    """RVV body of the depthwise grid sweep: strips of up to 4 registers of cells (m8 spills:
    clang hoists the tap loads); the last strip takes the smallest LMUL that holds what is
    left, since a plane is often a few registers long (a 7x7 stage's 61 cells) and a strip at
    m4 costs four times one at m1 whatever its vl. An activation without a vector form is a
    scalar pass over the plane."""
    nt, cols = len(pg.taps), pg.cols
    # the unrolled taps' weights in registers: read inside the strips, clang reloaded all of
    # them per strip (its alias analysis does not see past the three LMUL branches)
    tab = (f"static const int tap[{nt}] = {{{', '.join(str(t) for t in pg.taps)}}};\n"
           if nt > DW_UNROLL else
           "const float " + ", ".join(f"w{i} = wc[{i}]" for i in range(nt)) + ";\n")
    vfin = has_vector_form(act)
    post = "" if vfin else f"""
for (size_t q = 0; q < {cols}; ++q) {{
    const float v = g[q];
    g[q] = {act_expr(act, 'v')};
}}"""
    return f"""{tab}const size_t v1 = {vsetvlmax(1)};
for (size_t q0 = 0; q0 < {cols};) {{
    const size_t left = {cols} - q0;
    if (left > 2 * v1) {{
{indent(_strip_rvv(pg, act, 4, vfin), 2)}
    }} else if (left > v1) {{
{indent(_strip_rvv(pg, act, 2, vfin), 2)}
    }} else {{
{indent(_strip_rvv(pg, act, 1, vfin), 2)}
    }}
}}{post}"""


def _strip_half(pg: PhaseGrid, act: Optional[Act], L: int) -> str:
    """One strip of vl grid cells in float16 (Zvfh): per tap a float16 load at LMUL L and a
    widening multiply-add into float32 accumulators (LMUL 2L), then bias and activation."""
    A, nt = 2 * L, len(pg.taps)
    w = (lambda i: f"h{i}") if nt <= DW_UNROLL else (lambda i: f"(_Float16)wc[{i}]")

    def load(t: str) -> str:
        return f"__riscv_vle16_v_f16m{L}(xh + q0 + {t}, vl)"
    if nt <= DW_UNROLL:
        taps = "\n".join(f"acc = __riscv_vfwmacc_vf_f32m{A}(acc, {w(i)}, {load(str(t))}, vl);"
                         for i, t in enumerate(pg.taps[1:], 1))
    else:
        taps = f"""for (int k = 1; k < {nt}; ++k)
    acc = __riscv_vfwmacc_vf_f32m{A}(acc, (_Float16)wc[k], {load('tap[k]')}, vl);"""
    fin = f"\nacc = {act.rvv_expr('acc', A)};" if act else ""
    return f"""const size_t vl = left < {L} * v16 ? left : {L} * v16;
vfloat32m{A}_t acc = __riscv_vfwmul_vf_f32m{A}({load(str(pg.taps[0]))}, {w(0)}, vl);
{taps}
acc = __riscv_vfadd_vf_f32m{A}(acc, bias, vl);{fin}
__riscv_vse32_v_f32m{A}(g + q0, acc, vl);
q0 += vl;"""


def _grid_half(pg: PhaseGrid, act: Optional[Act]) -> str:
    """The float16 sweep (`--precision fp16|auto`, Zvfh) over the float16 plane `xh` that
    PhaseGrid.split_half wrote: strips at LMUL 2 (accumulators at 4), the last one at 1 where
    it fits."""
    nt = len(pg.taps)
    tab = (f"static const int tap[{nt}] = {{{', '.join(str(t) for t in pg.taps)}}};\n"
           if nt > DW_UNROLL else
           "const _Float16 " + ", ".join(f"h{i} = (_Float16)wc[{i}]" for i in range(nt)) +
           ";\n")
    return f"""(void)xp;
{tab}const size_t v16 = __riscv_vsetvlmax_e16m1();
for (size_t q0 = 0; q0 < {pg.cols};) {{
    const size_t left = {pg.cols} - q0;
    if (left > v16) {{
{indent(_strip_half(pg, act, 2), 2)}
    }} else {{
{indent(_strip_half(pg, act, 1), 2)}
    }}
}}"""


def _grid(pg: PhaseGrid, act: Optional[Act], residual: bool, tname: str,
          half: Optional[str] = None) -> Tuple[str, str]:
    """(name, C definition) of the sweep g = act(conv + bias) over one channel's grid cells
    (act left to the caller when a residual is added first). With `half` (a precision,
    codegen/precision.py) the RVV sweep is float16 where Zvfh is (`xh`: the float16 plane's
    scratch); "fp16" refuses to compile elsewhere."""
    ch, nt = DW_CHUNK, len(pg.taps)
    qpad = cdiv(pg.cols, ch) * ch
    name = f"rvk_dwconv_grid_{pg.h}x{pg.w}_k{pg.kh}x{pg.kw}_" \
           f"{tag(pg.key(), False, residual, act)}"
    fin = "t[j]" if residual else act_expr(act, "t[j]")   # act after the residual add
    chunk = f"""{tname}({nt}, wc, xp + q0, tap, t);
for (int j = 0; j < {ch}; ++j) t[j] += bias;
for (int j = 0; j < {ch}; ++j) g[q0 + j] = {fin};"""
    if qpad > ch:
        chunk = f"for (int q0 = 0; q0 < {qpad}; q0 += {ch}) {{\n{indent(chunk)}\n}}"
    else:
        chunk = f"const int q0 = 0;\n{chunk}"
    sweep = "(void)xhp;\n" + _grid_rvv(pg, act if not residual else None)
    if half and has_vector_form(act):
        sweep = (f"{FP16_GUARD}\n_Float16 *__restrict xh = (_Float16 *)xhp;\n"
                 f"{_grid_half(pg, act if not residual else None)}\n#else\n"
                 + (f"{NO_FP16}\n" if half == "fp16" else "") + f"{sweep}\n#endif")
    return name, f"""static void {name}(const float *__restrict xp, const float *__restrict wc,
    float bias, float *__restrict g, void *xhp) {{
{GUARD}
{indent(sweep, directives=True)}
#else
    (void)xhp;
    static const int tap[{nt}] = {{{", ".join(str(t) for t in pg.taps)}}};
    float t[{ch}];
{indent(chunk)}
#endif
}}
"""


# Planes of fewer than DW_CHUNK / SMALL_PLANE outputs (the 7x7, 4x4, 2x2 stages of a small
# network) take the direct loop: the grid sweep would compute a whole padded chunk of cells per
# channel and split every plane first, tens of times the work of the outputs themselves.
SMALL_PLANE = 2


def _dw_small(xs, ws_, ys, strides, pads, dil, bias, residual, act) -> Tuple[str, int]:
    """(portable branch, its workspace floats) of a depthwise conv on small planes, channel-last:
    the input plane and the weights are transposed to [position][channel] in the workspace, so
    each (output, tap) pair is one multiply-add over contiguous channels (vectorised, no bounds
    checks inside); out-of-plane taps are skipped per output, then bias, residual and activation
    are applied while transposing back. (The grid helpers are unused there: RVK_UNUSED.)"""
    n, c, h, w = xs
    _, _, kh, kw = ws_
    _, _, ho, wo = ys
    (sh, sw), (pt, pl), (dh, dw) = strides, pads[:2], dil
    k, hw, howo = kh * kw, h * w, ho * wo
    value = f"yt[p * {c} + ch] + rn[ch * {howo} + p]" if residual else f"yt[p * {c} + ch]"
    bexpr = "b[ch]" if bias else "0.0f"
    rdecl = f"\nconst float *__restrict rn = r + (ptrdiff_t)nb * {c * howo};" if residual else ""
    taps = loop("kj", 0, kw, f"""const int jj = oj * {sw} - {pl} + kj * {dw};
if (jj >= 0 && jj < {w}) {{
    const float *__restrict xv = xt + (ii * {w} + jj) * {c};
    const float *__restrict wv = wt + (ki * {kw} + kj) * {c};
{indent(loop("ch", 0, c, "acc[ch] += xv[ch] * wv[ch];"))}
}}""")
    rows = loop("ki", 0, kh, f"""const int ii = oi * {sh} - {pt} + ki * {dh};
if (ii >= 0 && ii < {h}) {{
{indent(taps)}
}}""")
    out = loop("oi", 0, ho, loop("oj", 0, wo, f"""float *__restrict acc = yt + (oi * {wo} + oj) * {c};
{loop("ch", 0, c, f"acc[ch] = {bexpr};")}
{rows}"""))
    back = loop("ch", 0, c, loop("p", 0, howo, f"""const float v = {value};
yn[ch * {howo} + p] = {act_expr(act, 'v')};"""))
    per_batch = f"""const float *__restrict xn = x + (ptrdiff_t)nb * {c * hw};
float *__restrict yn = y + (ptrdiff_t)nb * {c * howo};{rdecl}
{loop("ch", 0, c, loop("q", 0, hw, f"xt[q * {c} + ch] = xn[ch * {hw} + q];"))}
{out}
{back}"""
    body = f"""float *__restrict wt = ws;
float *__restrict xt = ws + {k * c};
float *__restrict yt = ws + {k * c + hw * c};
{loop("ch", 0, c, loop("t", 0, k, f"wt[t * {c} + ch] = w[ch * {k} + t];"))}
{loop("nb", 0, n, per_batch)}
"""
    return indent(body), k * c + hw * c + howo * c


def dwconv(xs, ws_, ys, strides, pads, dil, bias, residual, act, params, spec) -> Lowered:
    """Direct depthwise conv on the phase grid of one channel at a time (L1-resident): every
    tap is a uniform shift of the split plane, so the output grid is swept in register blocks
    of DW_CHUNK cells with kh*kw vector FMAs each and no bounds checks, bias and activation
    applied in registers; the wrap-around cells are then dropped by row copies. (Per-element
    row loops of <= 16 constant trips are avoided: gcc unrolls them and vectorises the outer
    loop with gathers, 3x slower overall.) Helpers are RVK_NOINLINE for the same reason."""
    n, cin, h, w = xs
    _, _, kh, kw = ws_
    _, _, ho, wo = ys
    small = ho * wo * SMALL_PLANE < DW_CHUNK
    pg = PhaseGrid((1, 1, h, w), ws_, ys, strides, pads, dil)
    ch, nt = DW_CHUNK, kh * kw
    qpad = cdiv(pg.cols, ch) * ch
    sname, scode = pg.split(ch, zero=False)   # zeroed once per thread: `clear`, below
    tname, tcode = _dw_taps()
    half_form = precision() if wants_half() else None
    gname, gcode = _grid(pg, act, residual, tname, half_form)
    gbuf = pg.size + ch
    yrow = f"y + (ptrdiff_t)nc * {ho * wo} + i * {wo}"
    if residual:   # rare for depthwise: a plain loop is fine
        store = loop("i", 0, ho, f"""float *__restrict yr = {yrow};
const float *__restrict rr = r + (ptrdiff_t)nc * {ho * wo} + i * {wo};
for (int j = 0; j < {wo}; ++j) {{
    const float v = g[i * {pg.wq} + j] + rr[j];
    yr[j] = {act_expr(act, 'v')};
}}""")
    else:
        store = f"""{GUARD}
rvk_vcopy_rows(y + (ptrdiff_t)nc * {ho * wo}, {wo}, g, {pg.wq}, 1, {wo}, {ho});
#else
{loop("i", 0, ho, f"RVK_MEMCPY({yrow}, g + i * {pg.wq}, {wo} * sizeof(float));")}
#endif"""
    bexpr = f"b[nc % {cin}]" if bias else "0.0f"
    # one image-channel plane per part (the planes' scratch is reused per plane); the small
    # planes' portable form transposes whole tensors, so it stays on one thread
    parts = not small and n * cin > 1
    first, last = ("rvk_lo", "rvk_hi") if parts else ("0", str(n * cin))
    # the split planes' padding is never written: cleared once per thread, not per plane
    hbuf = cdiv(gbuf, 2) if half_form else 0         # the float16 plane (and its slack)
    clear = f"RVK_MEMZERO(ws, (size_t){gbuf + qpad + hbuf} * sizeof(float));\n"
    split = f"{sname}(x + (ptrdiff_t)nc * {h * w}, ws);"
    if half_form:
        hname, hcode = pg.split_half()
        split = fp16_or(f"{hname}(x + (ptrdiff_t)nc * {h * w}, "
                        f"(_Float16 *)(ws + {gbuf + qpad}));", split)
    body = f"""{"" if parts else clear}for (int nc = {first}; nc < {last}; ++nc) {{
    const float *g = ws + {gbuf};   /* written through ws: not restrict */
{indent(split, directives=True)}
    {gname}(ws, w + nc % {cin} * {nt}, {bexpr}, ws + {gbuf}, ws + {gbuf + qpad});
{indent(store, directives=True)}
}}
"""
    support = {**header(), **act_rvv_support(act, 1), **act_rvv_support(act, 2),
               **act_rvv_support(act, 4), sname: scode, tname: tcode, gname: gcode}
    if half_form:
        support[hname] = hcode
    code = indent(body, directives=True) + "\n"
    wsize = gbuf + qpad + hbuf
    if small:   # RVV keeps the vector grid sweep; other targets take the direct loop
        scode_, swords = _dw_small(xs, ws_, ys, strides, pads, dil, bias, residual, act)
        code = guarded(code, scode_)
        wsize = max(wsize, swords)
        support = {k: v.replace("static void", "static RVK_UNUSED void", 1)
                   if k in (sname, gname) else v for k, v in support.items()}
    macs = n * cin * ho * wo * kh * kw
    kern = Kernel("dwconv", params, code, wsize, support, macs, spec=spec,
                  split=Split(n * cin, macs) if parts else None,
                  prologue=clear if parts else "")
    return Lowered(kern)
