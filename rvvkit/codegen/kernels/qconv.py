"""rvvkit.QConv (ops/quant_internal.py): quantized 1-D/2-D convolution, NCHW.

Per image and group: the input patches are gathered into an int8 matrix col[K][P] (K = input
channels x taps, P = output pixels), uint8 inputs flipped to int8 on the way and padding filled
with the input zero point (a real 0); then col's column sums when the weights have non-zero
zero points; the int8 GEMM core (qgemm.py) with the weights as A; and the epilogue adding the
folded bias and requantising per output channel. A 1 x 1, stride-1, unpadded convolution of
int8 input reads the input in place (it already is col). A depthwise convolution with int8/uint8
output takes its own direct path (qconv_dw.py) under the same spec and parameters."""
from __future__ import annotations

import math
import textwrap
from typing import Dict

from ..kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ..cfmt import indent
from ..loops import loop
from ..rvv import header
from .qconv_dw import dw_applies, qconv_dw
from .qgemm import (QGEMM_NAME, epilogue_support, qgemm_support, row_support, scratch_words,
                    tail_params)

declare_spec("qconv", ("x_shape", "w_shape", "y_shape", "group", "strides", "pads",
                       "dilations", "x_dtype", "out", "x_zp", "x_flip", "y_zp", "lo", "hi",
                       "paired", "w_zp", "rt_zp"))


def _words(nbytes: int) -> int:
    return -(-nbytes // 4)


def _im2col(cg: int, h: int, w: int, kh: int, kw: int, oh: int, ow: int, st, pads, dil,
            flip: bool, x_zp) -> str:
    """col[(c * kh + i) * kw + j][oy * ow + ox] = x[c][iy][ix] (or the zero point). Per row of
    taps, the output columns whose input lies inside the image are a range [lo, hi) known at
    build time: only its ends are padding, the middle is a plain (strided) copy."""
    sh, sw = st
    ph, pw = pads[0], pads[1]
    dh, dw = dil
    xt = "uint8_t" if flip else "int8_t"
    return f"""        for (long c = 0; c < {cg}; ++c) {{
            const {xt} *__restrict xc = xg + c * {h * w};
            for (long i = 0; i < {kh}; ++i)
                for (long j = 0; j < {kw}; ++j) {{
                    int8_t *__restrict row = col + ((c * {kh} + i) * {kw} + j) * {oh * ow};
                    /* ox with 0 <= ox * {sw} - {pw} + j * {dw} < {w} */
                    const long off = j * {dw} - {pw};
                    long lo = off < 0 ? (-off + {sw - 1}) / {sw} : 0;
                    long hi = ({w} - off + {sw - 1}) / {sw};
                    lo = lo > {ow} ? {ow} : lo;
                    hi = hi > {ow} ? {ow} : (hi < lo ? lo : hi);
                    for (long oy = 0; oy < {oh}; ++oy) {{
                        const long iy = oy * {sh} - {ph} + i * {dh};
                        int8_t *__restrict r = row + oy * {ow};
                        if (iy < 0 || iy >= {h}) {{
                            rvk_fill_i8(r, {ow}, (int8_t)({x_zp}));
                            continue;
                        }}
                        const {xt} *__restrict s = xc + iy * {w};
                        rvk_fill_i8(r, lo, (int8_t)({x_zp}));
                        rvk_copy_i8(r + lo, (const int8_t *)s + lo * {sw} + off, hi - lo, {sw}, {int(flip)});
                        rvk_fill_i8(r + hi, {ow} - hi, (int8_t)({x_zp}));
                    }}
                }}
        }}
"""


ROWS_KEY = "hd_rvk_rows_i8"
ROWS = """\
/* Byte rows of im2col: RVV strip-mined where the compiler's own vectorisation (clang 16) leaves
 * these short, run-time-bounded loops scalar. `flip` reads uint8 as int8 (x ^ 0x80). */
static RVK_HD inline void rvk_fill_i8(int8_t *__restrict d, long n, int8_t v) {
#if defined(__riscv_v_intrinsic)
    for (long i = 0; i < n;) {
        const size_t vl = __riscv_vsetvl_e8m4((size_t)(n - i));
        __riscv_vse8_v_i8m4(d + i, __riscv_vmv_v_x_i8m4(v, vl), vl);
        i += (long)vl;
    }
#else
    for (long i = 0; i < n; ++i) d[i] = v;
#endif
}
static RVK_HD inline void rvk_copy_i8(int8_t *__restrict d, const int8_t *__restrict s, long n,
                                      long stride, int flip) {
#if defined(__riscv_v_intrinsic)
    for (long i = 0; i < n;) {
        const size_t vl = __riscv_vsetvl_e8m4((size_t)(n - i));
        vint8m4_t v;
        if (stride == 1)
            v = __riscv_vle8_v_i8m4(s + i, vl);
        else
            v = __riscv_vlse8_v_i8m4(s + i * stride, (ptrdiff_t)stride, vl);
        if (flip) v = __riscv_vxor_vx_i8m4(v, (int8_t)-128, vl);
        __riscv_vse8_v_i8m4(d + i, v, vl);
        i += (long)vl;
    }
#else
    const int8_t x = flip ? (int8_t)-128 : 0;
    for (long i = 0; i < n; ++i) d[i] = (int8_t)(s[i * stride] ^ x);
#endif
}
"""


def _epilogue(out: str, yt: str, mg: int, p: int, has_wzp: bool, rt_zp: bool) -> str:
    wzp = (" - w_zp[co] * colsum[q]" if has_wzp else "") + (" - xz * w_rows[co]" if rt_zp else "")
    if out in ("int8", "uint8") and not rt_zp:
        sub = ("w_zp[co], colsum" if has_wzp else "0, NULL")
        return f"""        for (long mo = 0; mo < {mg}; ++mo) {{
            const long co = gi * {mg} + mo;
            rvk_requant_row(acc + mo * {p}, {p}, bias[co], {sub}, scale[co], flo, fhi, {{yzp}},
                            (int8_t *)(yn + co * {p}));
        }}
"""
    if out == "int32":
        store = "yo[q] = v;"
    elif out == "float32":
        store = "yo[q] = (float)v * scale[co];"
    else:
        store = f"yo[q] = ({out}_t)rvk_requant(v, scale[co], flo, fhi, {{yzp}});"
    return f"""        for (long mo = 0; mo < {mg}; ++mo) {{
            const long co = gi * {mg} + mo;
            const int32_t *__restrict a = acc + mo * {p};
            {yt} *__restrict yo = yn + co * {p};
            for (long q = 0; q < {p}; ++q) {{
                const int32_t v = a[q] + bias[co]{wzp};
                {store}
            }}
        }}
"""


def qconv(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations, x_dtype: str,
          out: str, x_zp: int, x_flip: bool, y_zp: int, lo: int, hi: int, paired: bool,
          has_scale: bool, w_zp: bool, rt_zp: bool = False, zp_shift: int = 0) -> Lowered:
    """Params: x, w (int8 [M][C/g][kh][kw]), bias (int32 [M]), [scale (float [M])],
    [w_zp (int32 [M])], [x_zp (x's type, 1), w_rows (int32 [M]): a run-time zero point], y.
    With a run-time zero point, padding takes it too (read once per call)."""
    n, c, h, w = x_shape
    m, cg, kh, kw = w_shape
    oh, ow = y_shape[2], y_shape[3]
    mg, p, k = m // group, oh * ow, cg * kh * kw
    params = [Param("x", dtype=x_dtype), Param("w", dtype="int8"), Param("bias", dtype="int32"),
              *tail_params(has_scale, "w_zp" if w_zp else "",
                           ("x_zp", "w_rows") if rt_zp else (), x_dtype, out)]
    spec = make_spec("qconv", x_shape=x_shape, w_shape=w_shape, y_shape=y_shape, group=group,
                     strides=strides, pads=pads, dilations=dilations, x_dtype=x_dtype, out=out,
                     x_zp=x_zp, x_flip=int(x_flip), y_zp=y_zp, lo=lo, hi=hi,
                     paired=int(paired), w_zp=int(w_zp), rt_zp=int(rt_zp))
    if has_scale and dw_applies(x_shape, w_shape, group, out, w_zp, rt_zp):
        body, words, dw_support = qconv_dw(
            x_shape, w_shape, y_shape, strides=strides, pads=pads, dilations=dilations,
            x_flip=x_flip, x_zp=x_zp, out=out, y_zp=y_zp, lo=lo, hi=hi, paired=paired)
        return Lowered(Kernel("qconv", tuple(params), body, workspace=words,
                              support={**header(), **dw_support}, macs=n * m * p * k,
                              spec=spec))
    direct = (kh == kw == 1 and tuple(strides) == (1, 1) and not any(pads) and not x_flip)
    col_words = 0 if direct else _words(k * p)
    sum_words = p if w_zp else 0
    acc_words = mg * p
    scr_words = scratch_words(mg, p, k)
    xt = "uint8_t" if x_flip else "int8_t"
    yt = "float" if out == "float32" else f"{out}_t"
    col = ("        const int8_t *__restrict col = (const int8_t *)xg;\n" if direct else
           _im2col(cg, h, w, kh, kw, oh, ow, strides, pads, dilations, x_flip,
                   "xz" if rt_zp else x_zp))
    colsum = ""
    if w_zp:
        colsum = f"""        for (long q = 0; q < {p}; ++q) colsum[q] = 0;
        for (long kk = 0; kk < {k}; ++kk)
            for (long q = 0; q < {p}; ++q) colsum[q] += col[kk * {p} + q];
"""
    epi = _epilogue(out, yt, mg, p, w_zp, rt_zp).replace("{yzp}", str(y_zp))
    qlo, qhi = float(lo - y_zp), float(hi - y_zp)
    decl_col = "" if direct else \
        f"    int8_t *__restrict col = (int8_t *)(ws + {acc_words + sum_words});\n"
    decl_col += f"    int32_t *__restrict scr = (int32_t *)(ws + {acc_words + sum_words + col_words});\n"
    group_body = textwrap.dedent(f"""\
        const {xt} *__restrict xg = x + (b * {c} + gi * {cg}) * {h * w};
{col}{colsum}        {QGEMM_NAME}({mg}, {p}, {k}, w + gi * {mg * k}, {k}, col, {p}, acc, {p}, {int(paired)}, scr);
{epi}""").rstrip()
    image = (f"{yt} *__restrict yn = y + b * {m * p};\n"
             + loop("gi", 0, group, group_body, ty="long"))
    head = "    int32_t *__restrict acc = (int32_t *)ws;\n"
    if w_zp:
        head += f"    int32_t *__restrict colsum = (int32_t *)(ws + {acc_words});\n"
    head += decl_col
    if out in ("int8", "uint8"):
        head += f"    const float flo = {qlo!r}f, fhi = {qhi!r}f;\n"
    if rt_zp:
        head += f"    const int32_t xz = (int32_t)x_zp[0] - {zp_shift};\n"
    body = head + indent(loop("b", 0, n, image, ty="long")) + "\n"
    support: Dict[str, str] = {**header(), **qgemm_support()}
    if not direct:
        support[ROWS_KEY] = ROWS
    if out in ("int8", "uint8"):
        support.update(epilogue_support() if rt_zp else row_support())
    kernel = Kernel("qconv", tuple(params), body,
                    workspace=acc_words + sum_words + col_words + scr_words,
                    support=support, macs=n * m * p * k, spec=spec)
    return Lowered(kernel)


def conv_1d_as_2d(x_shape, w_shape, y_shape, strides, pads, dilations):
    """A 1-D convolution as 2-D with H = 1 (same buffers, same weight order)."""
    x2 = (x_shape[0], x_shape[1], 1, x_shape[2])
    w2 = (w_shape[0], w_shape[1], 1, w_shape[2])
    y2 = (y_shape[0], y_shape[1], 1, y_shape[2])
    return x2, w2, y2, (1, strides[0]), (0, pads[0], 0, pads[1]), (1, dilations[0])


def macs_of(x_shape, w_shape, y_shape) -> int:
    return int(math.prod(y_shape) * math.prod(w_shape[1:]))


