"""The direct int8 depthwise path of rvvkit.QConv (qconv.py calls it for group == C == M).

A depthwise channel reuses nothing across channels, so the generic path's im2col and 1-row
GEMM per channel is mostly overhead. Here each channel's input plane is copied once into
stride-phase planes bordered with the input zero point (conv_input.PhaseGrid's layout, int8,
uint8 flipped on the way): every tap is then one constant offset on the "grid" of cells
q = oy * wq + ox, and the grid is swept in long vectors with no bounds checks (a small plane is
one strip, not one per output row). Each image's channel is a part of its own on the thread
pool (codegen/parallel.py), with its planes and grid in its thread's workspace.

RVV (e8/m1 inputs, int16/m2 products, int32/m4 sums): a tap is a vle8 and a vwmul.vx; when
`paired` (no weight is -128, so two products sum within int16) the next tap joins with
vwmacc.vx. Up to DW_BATCH such int16 products are formed at e8 before one switch to e16 widens
them into the int32 sums (vwadd), so a 3 x 3 strip changes vtype twice for its taps, not once
per tap. The sums start from the bias, are requantised in registers with rvk_requant_row's
arithmetic, and the bytes go to an int8 grid whose rows are then copied out.

Portable C: the grid in blocks of up to DW_QB cells, int32 sums in a local block that gcc
keeps in registers and vectorises along q (pairs of taps added in int16 first when `paired`),
requantised with rvk_requant in the block into the same int8 grid."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...cfmt import indent
from ...loops import cdiv, loop
from ...parallel import Split, parts_loop
from ...rvv import GUARD
from ..conv.im2col import PhaseGrid
from .requant import epilogue_support

DW_MAX_TAPS = 49   # 7 x 7; the taps are unrolled, larger kernels keep the generic path
DW_BATCH = 5       # int16 m2 products held before widening: 10 registers beside 4 + 4 int32
DW_QB = 32         # portable block of grid cells: 4 AVX2 registers of int32 sums
RVV_MIN_CELLS = 16   # e8/m1 elements at VLEN 128, the least the V extension allows


def dw_applies(x_shape, w_shape, group: int, out: str, w_zp: bool, rt_zp: bool) -> bool:
    """Whether qconv() takes this path. Weight zero points (only asymmetric or uint8 weights
    have them) and run-time input zero points keep the generic path, which already handles
    their extra sums; so do int32/float outputs, which no depthwise layer of a quantized
    network produces."""
    n, c, h, w = x_shape
    m, cg, kh, kw = w_shape
    return (group == c == m and cg == 1 and out in ("int8", "uint8") and not w_zp
            and not rt_zp and kh * kw <= DW_MAX_TAPS and n * c * h * w > 0)


ROWS_KEY = "hd_rvk_phase_rows_i8"
ROWS = """\
/* `rows` input rows into a bordered phase plane: n bytes each, source elements `stride` apart
 * (one stride phase), uint8 read as int8 (`flip`: x ^ 0x80). e8/m1 strips because the rows of
 * the small planes deep in a network are a few bytes and a strip costs its register group. */
static RVK_HD inline void rvk_phase_rows_i8(int8_t *__restrict d, long dstep,
                                         const int8_t *__restrict s, long sstep, long rows,
                                         long n, long stride, int flip) {
#if defined(__riscv_v_intrinsic)
    for (long r = 0; r < rows; ++r, d += dstep, s += sstep)
        for (long j = 0; j < n;) {
            const size_t vl = __riscv_vsetvl_e8m1((size_t)(n - j));
            vint8m1_t v = stride == 1
                ? __riscv_vle8_v_i8m1(s + j, vl)
                : __riscv_vlse8_v_i8m1(s + j * stride, (ptrdiff_t)stride, vl);
            if (flip) v = __riscv_vxor_vx_i8m1(v, (int8_t)-128, vl);
            __riscv_vse8_v_i8m1(d + j, v, vl);
            j += (long)vl;
        }
#else
    const int8_t f = flip ? (int8_t)-128 : 0;
    for (long r = 0; r < rows; ++r, d += dstep, s += sstep)
        for (long j = 0; j < n; ++j) d[j] = (int8_t)(s[j * stride] ^ f);
#endif
}
"""


def _units(taps: List[int], paired: bool) -> List[Tuple[int, ...]]:
    """Tap indices grouped as summed in int16: pairs when `paired`, else one by one."""
    step = 2 if paired else 1
    return [tuple(range(t, min(t + step, len(taps)))) for t in range(0, len(taps), step)]


def _rvv_strip(taps: List[int], paired: bool) -> str:
    """Statements of one RVV strip (vl cells from s = xp + q) leaving the int32 sums in `acc`:
    per batch, its int16 products at e8, then their widening adds at e16."""
    units = _units(taps, paired)
    batches = []
    for b0 in range(0, len(units), DW_BATCH):
        out = []
        for i, u in enumerate(units[b0:b0 + DW_BATCH]):
            out.append(f"vint16m2_t p{i} = __riscv_vwmul_vx_i16m2("
                       f"__riscv_vle8_v_i8m1(s + {taps[u[0]]}, vl), w{u[0]}, vl);")
            out += [f"p{i} = __riscv_vwmacc_vx_i16m2(p{i}, w{t}, "
                    f"__riscv_vle8_v_i8m1(s + {taps[t]}, vl), vl);" for t in u[1:]]
        for i in range(len(units[b0:b0 + DW_BATCH])):
            out.append("vint32m4_t acc = __riscv_vwadd_wv_i32m4(bv, p0, vl);" if b0 == i == 0
                       else f"acc = __riscv_vwadd_wv_i32m4(acc, p{i}, vl);")
        text = "\n".join(out)
        batches.append(text if b0 == 0 else "{\n" + indent(text) + "\n}")   # fresh p names
    return "\n".join(batches)


def _rvv(pg: PhaseGrid, taps: List[int], paired: bool, y_zp: int, lo: int, hi: int) -> str:
    """One channel's grid on RVV, strip by strip, requantised in registers with the instructions
    of rvk_requant_row (rounding in the saturating narrowing conversion, the clamp at int16)."""
    cols = pg.cols
    strip = f"""const size_t vl = __riscv_vsetvl_e8m1((size_t)({cols} - q));
const int8_t *__restrict s = xp + q;
{_rvv_strip(taps, paired)}
const vfloat32m4_t f = __riscv_vfmul_vf_f32m4(__riscv_vfcvt_f_x_v_f32m4(acc, vl), sc, vl);
vint16m2_t h = __riscv_vsadd_vx_i16m2(__riscv_vfncvt_x_f_w_i16m2(f, vl), (int16_t)({y_zp}), vl);
h = __riscv_vmin_vx_i16m2(__riscv_vmax_vx_i16m2(h, (int16_t)({lo}), vl), (int16_t)({hi}), vl);
__riscv_vse8_v_i8m1(g + q, __riscv_vnsra_wx_i8m1(h, 0, vl), vl);"""
    bias = "const vint32m4_t bv = __riscv_vmv_v_x_i32m4(bc, __riscv_vsetvlmax_e32m4());\n"
    if cols <= RVV_MIN_CELLS:   # one strip at every VLEN
        return bias + "{\n" + indent("const long q = 0;\n" + strip) + "\n}"
    return bias + f"for (long q = 0; q < {cols};) {{\n{indent(strip)}\n    q += (long)vl;\n}}"


def _block(cols: int) -> int:
    """Cells of a portable block: DW_QB, or the power of two (>= 8) that holds a smaller grid
    (the planes deep in a network have a handful of cells; gcc's code for blocks of other
    sizes was slower than a larger power of two)."""
    qb = 8
    while qb < min(cols, DW_QB):
        qb *= 2
    return qb


def _portable(pg: PhaseGrid, taps: List[int], paired: bool, y_zp: int) -> str:
    """One channel's grid in portable C: blocks of int32 sums, requantised in the block (gcc
    vectorises rvk_requant over a block, not over the short output rows)."""
    qb = _block(pg.cols)
    lines = []
    for i, u in enumerate(_units(taps, paired)):
        prod = " + ".join(f"w{t} * s[j + {taps[t]}]" for t in u)
        lines.append(f"for (int j = 0; j < {qb}; ++j) t[j] {'+=' if i else '='} "
                     f"(int16_t)({prod});")
    lines.append(f"for (int j = 0; j < {qb}; ++j) g[q0 * {qb} + j] = "
                 f"(int8_t)rvk_requant(t[j] + bc, sc, flo, fhi, {y_zp});")
    return loop("q0", 0, cdiv(pg.cols, qb), f"const int8_t *__restrict s = xp + q0 * {qb};\n"
                f"int32_t t[{qb}];\n" + "\n".join(lines), ty="long")


def _split(pg: PhaseGrid, flip: bool) -> str:
    """Calls copying the channel's input rows into the phase planes (borders stay x_zp)."""
    w, sh, sw, wq = pg.w, pg.sh, pg.sw, pg.wq
    pt, pl = pg.pads[0], pg.pads[1]
    return "\n".join(
        f"rvk_phase_rows_i8(xp + {ph * pg.plane + ilo * wq + jlo}, {wq}, (const int8_t *)xc + "
        f"{(ilo * sh + a - pt) * w + jlo * sw + b - pl}, {sh * w}, {ihi - ilo}, {jhi - jlo}, "
        f"{sw}, {int(flip)});" for ph, a, b, ilo, ihi, jlo, jhi in pg.rects())


def qconv_dw(x_shape, w_shape, y_shape, *, strides, pads, dilations, x_flip: bool, x_zp: int,
             out: str, y_zp: int, lo: int, hi: int,
             paired: bool) -> Tuple[str, int, Dict[str, str], Optional[Split]]:
    """(body, workspace words, support, split) of the depthwise kernel, with qconv()'s
    parameters x, w, bias, scale, y (see dw_applies for when it runs). Threads: a part is one
    image's channel, whose planes and grid are its thread's workspace; each part writes the
    planes' borders itself (a thread's workspace is its own, not the previous part's)."""
    n, c, h, w = x_shape
    _, _, kh, kw = w_shape
    ho, wo = y_shape[2], y_shape[3]
    pg = PhaseGrid((1, 1, h, w), w_shape, y_shape, strides, pads, dilations)
    taps, nt = pg.taps, kh * kw
    # the planes, then the bytes a portable block reads past the last cell
    xp_bytes = len(pg.phases) * pg.plane + DW_QB
    xp_words = cdiv(xp_bytes, 4)
    grid_bytes = cdiv(pg.cols, DW_QB) * DW_QB    # the requantised grid
    xt = "uint8_t" if x_flip else "int8_t"
    weights = "\n".join(f"const int8_t w{t} = wc[{t}];" for t in range(nt))
    rows = loop("oy", 0, ho, f"memcpy(yc + oy * {wo}, g + oy * {pg.wq}, {wo});", ty="long")
    ch = "ch" if n > 1 else "nc"   # the channel of image-channel plane nc
    per_channel = (f"const long ch = nc % {c};\n" if n > 1 else "") + f"""\
const {xt} *__restrict xc = x + nc * {h * w};
{out}_t *__restrict yc = y + nc * {ho * wo};
/* the borders are the zero point, the planes' insides the channel's input */
memset(xp, (int8_t)({x_zp}), {xp_bytes});
{_split(pg, x_flip)}
const int8_t *__restrict wc = w + {ch} * {nt};
{weights}
const int32_t bc = bias[{ch}];
const float sc = scale[{ch}];
{GUARD}
{_rvv(pg, taps, paired, y_zp, lo, hi)}
#else
const float flo = {float(lo - y_zp)!r}f, fhi = {float(hi - y_zp)!r}f;
{_portable(pg, taps, paired, y_zp)}
#endif
{rows}"""
    planes, split = parts_loop("nc", n * c, per_channel, ty="long")
    body = f"""int8_t *__restrict xp = (int8_t *)ws;
int8_t *__restrict g = (int8_t *)(ws + {xp_words});
{planes}
"""
    support = {**epilogue_support(), ROWS_KEY: ROWS}
    lines = indent(body).split("\n")   # directives at the left margin
    body = "\n".join(ln.lstrip() if ln.lstrip().startswith("#") else ln for ln in lines)
    macs = n * c * ho * wo * nt
    return body + "\n", xp_words + cdiv(grid_bytes, 4), support, split(macs)
