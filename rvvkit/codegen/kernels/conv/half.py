"""The float16 form of a pointwise conv (1x1, stride 1, unpadded, one group), for RVV cores with
Zvfh (`rvvkit build --precision fp16|auto`, see codegen/precision.py).

Per image, OUT[m][p] = sum_c W[m][c] * X[c][p]. The input is converted to float16 once
(vfncvt: every output channel reads all of it), the weights are stored as float16 panels of R
output channels, W16[m / R][c][R], zero padded. Per panel and strip of positions, R float32
accumulators (LMUL 4) take one widening multiply-add each per input channel: a float16 strip
(LMUL 2) of X and one float16 weight scalar, `vfwmacc.vf`. Against the float32 GEMM this
halves the register groups per product (a strip holds twice the positions per register) and
keeps a float32 sum, so only the operands' rounding differs from float32. The epilogue (bias,
residual, activation) works on the float32 accumulators and stores float32, so the tensors
between layers stay float32.

`auto` carries this form beside the float32 GEMM and its weights (`combine`); `fp16` carries
this form alone, and its source refuses to compile without Zvfh."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ....ops.activations import Act, act_rvv_support, has_vector_form
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param
from ...loops import cdiv
from ...rvv import header

FP16_GUARD = "#if defined(__riscv_v_intrinsic) && defined(__riscv_zvfh)"
NO_FP16 = ('#error "this artifact was built with --precision fp16: compile it for a core with '
           'Zvfh (e.g. rvvkit run --on qemu --isa k1), or rebuild with --precision auto"')
# accumulators are f32m4 (4 registers each), the input strip f16m2 (2): 7 x 4 + 2 = 30 of 32
MAX_ROWS = 7
HALF_MAX = 65504.0          # the largest finite float16


def rows_for(m: int) -> int:
    """Output channels per panel: the fewest padded rows, then the most rows per panel."""
    return min(range(4, MAX_ROWS + 1), key=lambda r: (cdiv(m, r) * r, -r))


def pointwise(ws_, strides, pads) -> bool:
    return tuple(ws_[2:]) == (1, 1) and tuple(strides) == (1, 1) and not any(pads)


def eligible(group: int, act: Optional[Act]) -> bool:
    """A conv of one group whose activation has a vector form (a grouped conv, depthwise
    included, keeps float32)."""
    return group == 1 and has_vector_form(act)


def pack_half(w: np.ndarray, rows: int) -> np.ndarray:
    """(M, C, kh, kw) float weights -> float16 panels [M / rows][K][rows] over K = (c, r, s),
    zero padded. A weight beyond float16's range is clamped to +-65504 (not made infinite)."""
    m, c = w.shape[0], int(np.prod(w.shape[1:]))
    wt = np.zeros((cdiv(m, rows) * rows, c), np.float32)
    wt[:m] = np.clip(np.asarray(w, np.float32).reshape(m, c), -HALF_MAX, HALF_MAX)
    return np.ascontiguousarray(wt.reshape(-1, rows, c).transpose(0, 2, 1)).astype(np.float16)


def _epilogue_row(i: int, hw: int, bias: bool, residual: bool, act: Optional[Act]) -> str:
    lines = [f"vfloat32m4_t v = c{i};"]
    if bias:
        lines.append(f"v = __riscv_vfadd_vf_f32m4(v, b[m0 + {i}], vl);")
    if residual:
        lines.append(f"v = __riscv_vfadd_vv_f32m4(v, __riscv_vle32_v_f32m4("
                     f"rn + (ptrdiff_t)(m0 + {i}) * {hw} + j, vl), vl);")
    if act is not None:
        lines.append(f"v = {act.rvv_expr('v', 4, 'vl')};")
    lines.append(f"__riscv_vse32_v_f32m4(yn + (ptrdiff_t)(m0 + {i}) * {hw} + j, v, vl);")
    return "{\n" + indent("\n".join(lines)) + "\n}"


def _to_half(n_elems: int) -> str:
    """x (this image, n_elems floats) to float16 in xh: the pointwise conv's operand."""
    return f"""/* the input to float16 once: every output channel reads all of it */
for (size_t i = 0, vl; i < {n_elems}; i += vl) {{
    vl = __riscv_vsetvl_e32m8({n_elems} - i);
    __riscv_vse16_v_f16m4(xh + i, __riscv_vfncvt_f_f_w_f16m4(
        __riscv_vle32_v_f32m8(xn + i, vl), vl), vl);
}}"""


def _im2col_half(xs, ws_, ys, strides, pads, dil) -> str:
    """The implicit GEMM operand X'[k][p], k = (c, r, s), as float16 in xh (zeros where the
    window leaves the image): each k row is, per output row, one run of the input row read
    with the conv's stride, converted on the way, and zeros at both ends."""
    _, cin, h, w = xs
    _, _, kh, kw = ws_
    _, _, ho, wo = ys
    (sh, sw), (pt, pl), (dh, dw) = strides, pads[:2], dil
    load = ("__riscv_vle32_v_f32m8(src + o, vl)" if sw == 1 else
            f"__riscv_vlse32_v_f32m8(src + o * {sw}, {4 * sw}, vl)")
    return f"""/* the implicit im2col matrix in float16, once: every output channel reads all of it */
for (int c = 0; c < {cin}; ++c)
for (int r = 0; r < {kh}; ++r)
for (int s = 0; s < {kw}; ++s) {{
    _Float16 *__restrict row = xh + (ptrdiff_t)((c * {kh} + r) * {kw} + s) * {ho * wo};
    /* the outputs whose input column iw = o * {sw} - {pl} + s * {dw} lies in [0, {w}) */
    const int off = s * {dw} - {pl};
    int lo = off >= 0 ? 0 : (-off + {sw - 1}) / {sw};
    int hi = off >= {w} ? 0 : ({w} - 1 - off) / {sw} + 1;
    lo = lo < {wo} ? lo : {wo};
    hi = hi < {wo} ? (hi > lo ? hi : lo) : {wo};
    for (int oh = 0; oh < {ho}; ++oh) {{
        _Float16 *__restrict d = row + oh * {wo};
        const int ih = oh * {sh} - {pt} + r * {dh};
        const int inside = ih >= 0 && ih < {h};
        for (int o = 0; o < (inside ? lo : {wo}); ++o) d[o] = (_Float16)0.0f;
        if (!inside) continue;
        for (int o = hi; o < {wo}; ++o) d[o] = (_Float16)0.0f;
        const float *__restrict src = xn + (ptrdiff_t)c * {h * w} + ih * {w} + off + lo * {sw};
        d += lo;
        for (size_t o = 0, vl; o < (size_t)(hi - lo); o += vl) {{
            vl = __riscv_vsetvl_e32m8((size_t)(hi - lo) - o);
            __riscv_vse16_v_f16m4(d + o, __riscv_vfncvt_f_f_w_f16m4({load}, vl), vl);
        }}
    }}
}}"""


def half_body(xs, ws_, ys, geometry, bias: bool, residual: bool, act: Optional[Act],
              wname: str) -> str:
    """The float16 form's statements (Zvfh intrinsics); `wname` holds the float16 panels;
    geometry = (strides, pads, dilations)."""
    n, cin, h, w = xs
    m, k = ws_[0], cin * ws_[2] * ws_[3]
    hw, rows = ys[2] * ys[3], rows_for(m)
    first = "\n".join(f"vfloat32m4_t c{i} = __riscv_vfwmul_vf_f32m4(xv, wm[{i}], vl);"
                      for i in range(rows))
    step = "\n".join(f"c{i} = __riscv_vfwmacc_vf_f32m4(c{i}, wk[{i}], xv, vl);"
                     for i in range(rows))
    stores = []
    for i in range(rows):
        st = _epilogue_row(i, hw, bias, residual, act)
        stores.append(st if i < m % rows or m % rows == 0 else f"if (m0 + {i} < {m}) {st}")
    prep = (_to_half(cin * hw) if pointwise(ws_, *geometry[:2]) else
            _im2col_half(xs, ws_, ys, *geometry))
    image = f"""{prep}
for (int m0 = 0; m0 < {m}; m0 += {rows}) {{
    const _Float16 *__restrict wm = wp + (ptrdiff_t)m0 * {k};
    for (size_t j = 0, vl; j < {hw}; j += vl) {{
        /* vl in scalar code: clang 16's vsetvl intrinsic would re-issue vsetvli in the k loop */
        vl = {hw} - j < vmax ? {hw} - j : vmax;
        const _Float16 *__restrict xk = xh + j;
        vfloat16m2_t xv = __riscv_vle16_v_f16m2(xk, vl);
{indent(first, 2)}
        for (const _Float16 *__restrict wk = wm + {rows}; wk != wm + {k * rows}; wk += {rows}) {{
            xk += {hw};
            xv = __riscv_vle16_v_f16m2(xk, vl);
{indent(step, 3)}
        }}
{indent(chr(10).join(stores), 2)}
    }}
}}"""
    per_image = [f"const float *__restrict xn = x + (ptrdiff_t)n * {cin * h * w};",
                 f"float *__restrict yn = y + (ptrdiff_t)n * {m * hw};"]
    if residual:
        per_image.append(f"const float *__restrict rn = r + (ptrdiff_t)n * {m * hw};")
    body = "\n".join(per_image) + "\n" + image
    if n > 1:
        body = f"for (int n = 0; n < {n}; ++n) {{\n{indent(body)}\n}}"
    else:
        body = "const int n = 0;\n" + body
    return f"""_Float16 *__restrict xh = (_Float16 *)ws;
const _Float16 *__restrict wp = (const _Float16 *){wname};
const size_t vmax = __riscv_vsetvlmax_e16m2();
{body}"""


def workspace_of(ws_, ys) -> int:
    """Floats of workspace the float16 operand of one image takes (K x output positions)."""
    return cdiv(ws_[1] * ws_[2] * ws_[3] * ys[2] * ys[3], 2)


def _hint(ws_, geometry, form: str) -> str:
    return ("conv1x1_" if pointwise(ws_, *geometry[:2]) else "conv2d_") + form


def support_of(act: Optional[Act]) -> dict:
    sup = header()
    sup.update(act_rvv_support(act, 4))
    return sup


def half_only(xs, ws_, ys, geometry, bias: bool, residual: bool, act: Optional[Act], params,
              spec) -> Lowered:
    """`--precision fp16`: the float16 form alone, its weights stored as float16."""
    m = ws_[0]
    body = f"{FP16_GUARD}\n{half_body(xs, ws_, ys, geometry, bias, residual, act, 'w')}\n" \
        f"#else\n" \
        f"{NO_FP16}\n#endif\n"
    params = tuple(Param(p.name, p.const, "float16") if p.name == "w" else p for p in params)
    rows = rows_for(m)
    kern = Kernel(_hint(ws_, geometry, "f16"), params, indent(body) + "\n",
                  workspace_of(ws_, ys), support_of(act),
                  xs[0] * m * ys[2] * ys[3] * ws_[1] * ws_[2] * ws_[3],
                  spec=dict(spec, half_rows=rows))
    return Lowered(kern, {1: lambda wt: pack_half(wt, rows)})


def combine(xs, ws_, ys, geometry, bias: bool, residual: bool, act: Optional[Act],
            direct: Lowered) -> Lowered:
    """`--precision auto`: one kernel carrying the float32 GEMM (weights `w`) and the float16
    form (weights `wh`, the parameter after `w`); the compiler's target keeps one. Both are
    compiled everywhere (neither's helpers go unused), the float16 one only under Zvfh."""
    dk, m = direct.kernel, ws_[0]
    rows = rows_for(m)
    body = (f"{FP16_GUARD}\nconst int half = 1;\n#else\nconst int half = 0;\n#endif\n"
            f"if (half) {{\n{FP16_GUARD}\n"
            f"{half_body(xs, ws_, ys, geometry, bias, residual, act, 'wh')}\n#endif\n"
            f"}} else {{\n{dk.body.rstrip()}\n}}\n(void)wh;\n")
    support = dict(dk.support)
    support.update(support_of(act))
    params = dk.params[:2] + (Param("wh", True, "float16"),) + dk.params[2:]
    kern = Kernel(_hint(ws_, geometry, "auto"), params, indent(body) + "\n",
                  max(dk.workspace, workspace_of(ws_, ys)), support, dk.macs,
                  spec=dict(dk.spec, half_rows=rows))
    return Lowered(kern, dict(direct.transforms), ((2, 1, lambda wt: pack_half(wt, rows)),))
