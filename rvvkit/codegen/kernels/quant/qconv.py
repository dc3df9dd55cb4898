"""rvvkit.QConv (ops/quant/internal.py): quantized 1-D/2-D convolution, NCHW.

Per image and group: the input patches are gathered into an int8 matrix col[K][P] (K = input
channels x taps, P = output pixels), uint8 inputs flipped to int8 on the way and padding filled
with the input zero point (a real 0); then col's column sums when the weights have non-zero
zero points; the int8 GEMM core (qgemm.py) with the weights as A; and the epilogue adding the
folded bias and requantising per output channel. A 1 x 1, stride-1, unpadded convolution of
int8 input reads the input in place (it already is col). A depthwise convolution with int8/uint8
output takes its own direct path (qconv_dw.py) under the same spec and parameters.

Threads (runtime_c/rvk_pool.h), two regions per image: the gather, one part per input channel
(its kh x kw rows of col, for every group at once, in the caller's workspace); then the
products, one part per group, block of output channels and block of output pixels
(qgemm_parts.part_blocks), each with its own sums and the core's scratch in its thread's workspace.
col is gathered once and only read after, so a part redoes nothing of another's (but widen its
own columns of col); each part is its own call, its bounds fixed by the shapes: every output
is computed alike for every thread count."""
from __future__ import annotations

import hashlib
import math
from typing import Dict, List

from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...cfmt import indent
from ...loops import cdiv, loop
from ...rvv import header
from .qconv_dw import dw_applies, qconv_dw
from .qgemm import QGEMM_NAME, qgemm_support, scratch_words
from .qgemm_parts import part_blocks, part_indices, part_span
from .requant import epilogue_support, row_support, tail_params

declare_spec("qconv", ("x_shape", "w_shape", "y_shape", "group", "strides", "pads",
                       "dilations", "x_dtype", "out", "x_zp", "x_flip", "y_zp", "lo", "hi",
                       "paired", "w_zp", "rt_zp"))


def _words(nbytes: int) -> int:
    return -(-nbytes // 4)


def _im2col(h: int, w: int, kh: int, kw: int, oh: int, ow: int, st, pads, dil, flip: bool,
            x_zp) -> str:
    """Input channel xc's rows of col, from cc: cc[(i * kw + j) * P + oy * ow + ox] =
    xc[iy][ix] (or the zero point). Per row of taps, the output columns whose input lies
    inside the image are a range [lo, hi) known at build time: only its ends are padding, the
    middle is a plain (strided) copy."""
    sh, sw = st
    ph, pw = pads[0], pads[1]
    dh, dw = dil
    xt = "uint8_t" if flip else "int8_t"
    zp = f"(int8_t)({x_zp})"
    row = f"""const long iy = oy * {sh} - {ph} + i * {dh};
int8_t *__restrict r = row + oy * {ow};
if (iy < 0 || iy >= {h}) {{
    rvk_fill_i8(r, {ow}, {zp});
}} else {{
    const {xt} *__restrict s = xc + iy * {w};
    rvk_fill_i8(r, lo, {zp});
    rvk_copy_i8(r + lo, (const int8_t *)s + lo * {sw} + off, hi - lo, {sw}, {int(flip)});
    rvk_fill_i8(r + hi, {ow} - hi, {zp});
}}"""
    tap = f"""int8_t *__restrict row = cc + (i * {kw} + j) * {oh * ow};
/* ox with 0 <= ox * {sw} - {pw} + j * {dw} < {w} */
const long off = j * {dw} - {pw};
long lo = off < 0 ? (-off + {sw - 1}) / {sw} : 0;
long hi = ({w} - off + {sw - 1}) / {sw};
lo = lo > {ow} ? {ow} : lo;
hi = hi > {ow} ? {ow} : (hi < lo ? lo : hi);
{loop("oy", 0, oh, row, ty="long")}"""
    return loop("i", 0, kh, loop("j", 0, kw, tap, ty="long"), ty="long")


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
    """The part's output rows: channels gi * mg + m0 + [0, mn), pixels p0 + [0, pn)."""
    wzp = (" - w_zp[co] * colsum[q]" if has_wzp else "") + (" - xz * w_rows[co]" if rt_zp else "")
    if out in ("int8", "uint8") and not rt_zp:
        sub = ("w_zp[co], colsum" if has_wzp else "0, NULL")
        return f"""for (long mo = 0; mo < mn; ++mo) {{
    const long co = gi * {mg} + m0 + mo;
    rvk_requant_row(acc + mo * pn, pn, bias[co], {sub}, scale[co], flo, fhi, {{yzp}},
                    (int8_t *)(yn + co * {p} + p0));
}}"""
    if out == "int32":
        store = "yo[q] = v;"
    elif out == "float32":
        store = "yo[q] = (float)v * scale[co];"
    else:
        store = f"yo[q] = ({out}_t)rvk_requant(v, scale[co], flo, fhi, {{yzp}});"
    return f"""for (long mo = 0; mo < mn; ++mo) {{
    const long co = gi * {mg} + m0 + mo;
    const int32_t *__restrict a = acc + mo * pn;
    {yt} *__restrict yo = yn + co * {p} + p0;
    for (long q = 0; q < pn; ++q) {{
        const int32_t v = a[q] + bias[co]{wzp};
        {store}
    }}
}}"""


ARGS_KEY = "rvk_qconv_args"
ARGS = """\
/* What the pool tasks of an int8 convolution read (qconv.py): the kernel's parameters in
 * order, the image's im2col matrix, the image's index, the run-time input zero point. */
typedef struct {
    const void *const *p;
    int8_t *col;
    long b;
    int32_t xz;
} rvk_qconv_args;
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
        body, words, dw_support, split = qconv_dw(
            x_shape, w_shape, y_shape, strides=strides, pads=pads, dilations=dilations,
            x_flip=x_flip, x_zp=x_zp, out=out, y_zp=y_zp, lo=lo, hi=hi, paired=paired)
        return Lowered(Kernel("qconv", tuple(params), body, workspace=words,
                              support={**header(), **dw_support}, macs=n * m * p * k,
                              spec=spec, split=split))
    direct = (kh == kw == 1 and tuple(strides) == (1, 1) and not any(pads) and not x_flip)
    mb, pb = part_blocks(mg, p, group)
    units = group * cdiv(mg, mb) * cdiv(p, pb)
    col_words = 0 if direct else _words(c * kh * kw * p)
    part_words = mb * pb + (pb if w_zp else 0) + scratch_words(mb, pb, k)
    fns = {"part": _part(params, (mg, p, k), (mb, pb), group, out, (lo, hi, y_zp), w_zp, paired),
           "task": _task(params, units, m * p, c * h * w, direct)}
    if not direct:
        xt = "uint8_t" if x_flip else "int8_t"
        fns.update(_gather(xt, c, (h, w, kh, kw, oh, ow), strides, pads, dilations, x_flip,
                           "xz" if rt_zp else x_zp, rt_zp))
    digest = hashlib.sha1("".join(fns.values()).encode()).hexdigest()[:8]
    base = f"rvk_qconv_{c}x{h}x{w}_k{kh}x{kw}_s{strides[0]}x{strides[1]}_g{group}_to_{m}"
    names = {role: f"{base}_{role}_{digest}" for role in fns}
    support: Dict[str, str] = {**header(), **qgemm_support()}
    if not direct:
        support[ROWS_KEY] = ROWS
    if out in ("int8", "uint8"):
        support.update(epilogue_support() if rt_zp else row_support())
    support[ARGS_KEY] = ARGS
    for role in ("gather", "gather_task", "part", "task"):   # each before its caller
        if role in fns:
            text = fns[role]
            for r in sorted(names, key=len, reverse=True):
                text = text.replace(f"@{r}(", f"{names[r]}(")
            support[names[role]] = text
    # the kernel: per image, the gather's region (its channels), then the products' region
    regions: List[str] = []
    if not direct:
        regions.append(f"rvk_parallel({c}, {k * group * (p + 32 * oh)}L, 0L, (float *)0, "
                       f"{names['gather_task']}, &g);")
    regions.append(f"rvk_parallel({units}, {m * p * k}L, {part_words}L, ws + {col_words}, "
                   f"{names['task']}, &g);")
    per_image = "\n".join(regions)
    if n > 1:
        per_image = loop("b", 0, n, "g.b = b;\n" + per_image, ty="long")
    xz = f"(int32_t)x_zp[0] - {zp_shift}" if rt_zp else "0"
    code = f"""const void *p[] = {{{", ".join(prm.name for prm in params)}}};
rvk_qconv_args g = {{p, {"(int8_t *)0" if direct else "(int8_t *)ws"}, 0, {xz}}};
{per_image}"""
    return Lowered(Kernel("qconv", tuple(params), indent(code) + "\n",
                          workspace=col_words + part_words, support=support,
                          macs=n * m * p * k, spec=spec))


def _part(params, mpk, blocks, group: int, out: str, requant, w_zp: bool, paired: bool) -> str:
    """`@part(...)`: one product part u (group, block of output channels, block of pixels) of
    an image, with its sums, column sums and the core's scratch in ws. Parameters: the
    kernel's but x (read as col: the image's im2col matrix, or the input itself) and x_zp
    (as xz), y at the image."""
    mg, p, k = mpk
    mb, pb = blocks
    lo, hi, y_zp = requant
    rparts, cparts = cdiv(mg, mb), cdiv(p, pb)
    rt_zp = any(prm.name == "x_zp" for prm in params)
    yt = "float" if out == "float32" else f"{out}_t"
    head = ["int32_t *__restrict acc = (int32_t *)ws;"]
    if w_zp:
        head.append(f"int32_t *__restrict colsum = (int32_t *)(ws + {mb * pb});")
    head.append(f"int32_t *__restrict scr = (int32_t *)(ws + {mb * pb + (pb if w_zp else 0)});")
    if out in ("int8", "uint8"):
        head.append(f"const float flo = {float(lo - y_zp)!r}f, fhi = {float(hi - y_zp)!r}f;")
    body = [part_span("m0", "mn", "rb", mb, mg), part_span("p0", "pn", "pbk", pb, p),
            f"const int8_t *__restrict bp = col + gi * {k * p} + p0;"]
    if w_zp:
        body += [loop("q", 0, "pn", "colsum[q] = 0;", ty="long"),
                 loop("kk", 0, k, loop("q", 0, "pn", f"colsum[q] += bp[kk * {p} + q];",
                                       ty="long"), ty="long")]
    body += [f"{QGEMM_NAME}(mn, pn, {k}, w + (gi * {mg} + m0) * {k}, {k}, bp, {p}, acc, pn, "
             f"{int(paired)}, scr);",
             _epilogue(out, yt, mg, p, w_zp, rt_zp).replace("{yzp}", str(y_zp))]
    text = "\n".join(body)
    idx = part_indices((("gi", group), ("rb", rparts), ("pbk", cparts)), text)
    one = "(void)u;   /* the one part */" if rparts * cparts * group == 1 else ""
    text = "\n".join(filter(None, (one, idx, text)))
    decls = [f"{yt} *__restrict yn" if prm.name == "y" else prm.decl()
             for prm in params if prm.name not in ("x", "x_zp")]
    decls += ["const int8_t *__restrict col"] + (["int32_t xz"] if rt_zp else [])
    return (f"static void @part({', '.join(decls + ['float *__restrict ws', 'int u'])}) {{\n"
            + indent("\n".join(head) + "\n" + text) + "\n}\n")


def _task(params, units: int, y_image: int, x_image: int, direct: bool) -> str:
    """`@task`: a pool task's range of product parts, a call per part."""
    def cast(i: int, prm: Param) -> str:
        return f"({'const ' if prm.const else ''}{prm.ctype} *)p[{i}]"
    args = [f"{cast(i, prm)} + g->b * {y_image}" if prm.name == "y" else cast(i, prm)
            for i, prm in enumerate(params) if prm.name not in ("x", "x_zp")]
    args.append(f"(const int8_t *)p[0] + g->b * {x_image}" if direct else "g->col")
    if any(prm.name == "x_zp" for prm in params):
        args.append("g->xz")
    return f"""static void @task(void *ctx, int task, int ntasks, float *ws) {{
    const rvk_qconv_args *g = (const rvk_qconv_args *)ctx;
    const void *const *p = g->p;
    int lo, hi;
    rvk_split({units}, task, ntasks, &lo, &hi);
    for (int u = lo; u < hi; ++u)   /* a call per part: its code never depends on the range */
        @part({", ".join(args + ["ws", "u"])});
}}
"""


def _gather(xt: str, c: int, dims, strides, pads, dilations, flip: bool, zp,
            rt_zp: bool) -> Dict[str, str]:
    """`@gather` (input channel u's kh x kw rows of the image's col) and `@gather_task`."""
    h, w, kh, kw, oh, ow = dims
    xz = (", int32_t xz", ", g->xz") if rt_zp else ("", "")
    sig = f"const {xt} *__restrict x, int8_t *__restrict col{xz[0]}, int u"
    return {"gather": f"""static void @gather({sig}) {{
    const {xt} *__restrict xc = x + (long)u * {h * w};
    int8_t *__restrict cc = col + (long)u * {kh * kw * oh * ow};
{indent(_im2col(h, w, kh, kw, oh, ow, strides, pads, dilations, flip, zp))}
}}
""", "gather_task": f"""static void @gather_task(void *ctx, int task, int ntasks, float *ws) {{
    const rvk_qconv_args *g = (const rvk_qconv_args *)ctx;
    int lo, hi;
    (void)ws;
    rvk_split({c}, task, ntasks, &lo, &hi);
    for (int u = lo; u < hi; ++u)
        @gather((const {xt} *)g->p[0] + g->b * {c * h * w}, g->col{xz[1]}, u);
}}
"""}


def conv_1d_as_2d(x_shape, w_shape, y_shape, strides, pads, dilations):
    """A 1-D convolution as 2-D with H = 1 (same buffers, same weight order)."""
    x2 = (x_shape[0], x_shape[1], 1, x_shape[2])
    w2 = (w_shape[0], w_shape[1], 1, w_shape[2])
    y2 = (y_shape[0], y_shape[1], 1, y_shape[2])
    return x2, w2, y2, (1, strides[0]), (0, pads[0], 0, pads[1]), (1, dilations[0])


def macs_of(x_shape, w_shape, y_shape) -> int:
    return int(math.prod(y_shape) * math.prod(w_shape[1:]))


