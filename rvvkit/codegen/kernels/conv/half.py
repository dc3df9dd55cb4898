"""The float16 form of a pointwise conv (1x1, stride 1, unpadded, one group), for RVV cores with
Zvfh (`rvvkit build --precision fp16|auto`, see codegen/precision.py).

Per image, OUT[m][p] = sum_k W[m][k] * X'[k][p] over k = (c, r, s). X' (the input itself for a
pointwise conv, else its im2col matrix) is written once in float16 (vfncvt: every output channel
reads all of it); the weights are stored in float16 (half_gemm.py: the GEMM, in whichever
orientation, LMUL and panel rows cost least). The products are summed in float16 in stages of
32, each stage's sums added to float32 sums (half_staged.py): against the float32 GEMM, half
the register groups per product. The epilogue (bias, residual, activation) works on the float32
sums and stores float32, so the tensors between layers stay float32.

`auto` carries this form beside the float32 GEMM and its weights (`combine`); `fp16` carries
this form alone, and its source refuses to compile without Zvfh."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ....ops.activations import Act, act_rvv_support, has_vector_form
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param
from ...rvv import header
from ...precision import fp16_only, fp16_or
from .half_gemm import HalfGemm, convert_run, operand_floats, plan

def pointwise(ws_, strides, pads) -> bool:
    return tuple(ws_[2:]) == (1, 1) and tuple(strides) == (1, 1) and not any(pads)


def eligible(group: int, act: Optional[Act]) -> bool:
    """A conv of one group whose activation has a vector form (a grouped conv, depthwise
    included, keeps float32)."""
    return group == 1 and has_vector_form(act)


def gemm_of(ws_, ys) -> HalfGemm:
    return plan(ws_[0], ws_[1] * ws_[2] * ws_[3], ys[2] * ys[3])


def _epilogue(g: HalfGemm, i: int, bias: bool, residual: bool, act: Optional[Act]) -> str:
    """Accumulator c<i> + bias + residual, activated, stored: row m0 + i over positions
    [j, j + vl), or (transposed) position t0 + i over channels [m0, m0 + vl), strided."""
    hw, a = g.cols, g.acc_lmul
    if g.trans:
        at, bvec = f"m0 * {hw} + t0 + {i}", f"__riscv_vle32_v_f32m{a}(b + m0, vl)"
        res = f"__riscv_vlse32_v_f32m{a}(rn + {at}, {4 * hw}, vl)"
        out = f"__riscv_vsse32_v_f32m{a}(yn + {at}, {4 * hw}, v, vl);"
    else:
        at = f"(ptrdiff_t)(m0 + {i}) * {hw} + j"
        bvec, res = None, f"__riscv_vle32_v_f32m{a}(rn + {at}, vl)"
        out = f"__riscv_vse32_v_f32m{a}(yn + {at}, v, vl);"
    lines = [f"vfloat32m{a}_t v = c{i};"]
    if bias:
        lines.append(f"v = __riscv_vfadd_vv_f32m{a}(v, {bvec}, vl);" if bvec else
                     f"v = __riscv_vfadd_vf_f32m{a}(v, b[m0 + {i}], vl);")
    if residual:
        lines.append(f"v = __riscv_vfadd_vv_f32m{a}(v, {res}, vl);")
    if act is not None:
        lines.append(f"v = {act.rvv_expr('v', a, 'vl')};")
    lines.append(out)
    return "{\n" + indent("\n".join(lines)) + "\n}"


def _im2col_half(xs, ws_, ys, strides, pads, dil) -> str:
    """The implicit GEMM operand X'[k][p], k = (c, r, s), as float16 in xh (zeros where the
    window leaves the image): each k row is, per output row, one run of the input row read
    with the conv's stride, converted on the way, and zeros at both ends."""
    _, cin, h, w = xs
    _, _, kh, kw = ws_
    _, _, ho, wo = ys
    (sh, sw), (pt, pl), (dh, dw) = strides, pads[:2], dil
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
{indent(convert_run("d", "src", "hi - lo", wo, sw), 2)}
    }}
}}"""


def half_body(xs, ws_, ys, geometry, bias: bool, residual: bool, act: Optional[Act],
              wname: str) -> str:
    """The float16 form's statements (Zvfh intrinsics); `wname` holds the float16 weights;
    geometry = (strides, pads, dilations)."""
    n, cin, h, w = xs
    g = gemm_of(ws_, ys)
    m, hw = g.m, g.cols
    prep = ("/* the input to float16 once: every output channel reads all of it */\n"
            + convert_run("xh", "xn", str(cin * hw), cin * hw) if pointwise(ws_, *geometry[:2])
            else
            _im2col_half(xs, ws_, ys, *geometry))
    gemm = g.loops(lambda i: _epilogue(g, i, bias, residual, act), "yn", "acc_ws")
    per_image = [f"const float *__restrict xn = x + (ptrdiff_t)n * {cin * h * w};",
                 f"float *__restrict yn = y + (ptrdiff_t)n * {m * hw};"]
    if residual:
        per_image.append(f"const float *__restrict rn = r + (ptrdiff_t)n * {m * hw};")
    body = "\n".join(per_image) + "\n" + prep + "\n" + gemm
    if n > 1:
        body = f"for (int n = 0; n < {n}; ++n) {{\n{indent(body)}\n}}"
    else:
        body = "const int n = 0;\n" + body
    scratch = (f"float *__restrict acc_ws = ws + {operand_floats(g)};   /* the float32 sums "
               "between stages */\n" if g.scratch_floats else "")
    return f"""_Float16 *__restrict xh = (_Float16 *)ws;
{scratch}const _Float16 *__restrict wp = (const _Float16 *){wname};
{g.vmax_decl()}
{body}"""


def workspace_of(ws_, ys) -> int:
    """Floats of workspace: the float16 operand of one image, and the staged GEMM's scratch."""
    g = gemm_of(ws_, ys)
    return operand_floats(g) + g.scratch_floats


def pack_weights(ws_, ys):
    """The transform of the conv's weights to the float16 GEMM's layout."""
    g = gemm_of(ws_, ys)
    return lambda wt: g.pack(np.asarray(wt, np.float32).reshape(g.m, g.k))


def _hint(ws_, geometry, form: str) -> str:
    return ("conv1x1_" if pointwise(ws_, *geometry[:2]) else "conv2d_") + form


def support_of(act: Optional[Act], lmul: int) -> dict:
    sup = header()
    sup.update(act_rvv_support(act, lmul))
    return sup


def half_only(xs, ws_, ys, geometry, bias: bool, residual: bool, act: Optional[Act], params,
              spec) -> Lowered:
    """`--precision fp16`: the float16 form alone, its weights stored as float16."""
    body = fp16_only(half_body(xs, ws_, ys, geometry, bias, residual, act, "w"))
    params = tuple(Param(p.name, p.const, "float16") if p.name == "w" else p for p in params)
    kern = Kernel(_hint(ws_, geometry, "f16"), params, indent(body, directives=True) + "\n",
                  workspace_of(ws_, ys), support_of(act, gemm_of(ws_, ys).acc_lmul),
                  xs[0] * ws_[0] * ys[2] * ys[3] * ws_[1] * ws_[2] * ws_[3],
                  spec=dict(spec, half_rows=gemm_of(ws_, ys).rows))
    return Lowered(kern, {1: pack_weights(ws_, ys)})


def combine(xs, ws_, ys, geometry, bias: bool, residual: bool, act: Optional[Act],
            direct: Lowered) -> Lowered:
    """`--precision auto`: one kernel carrying the float32 GEMM (weights `w`) and the float16
    form (weights `wh`, the parameter after `w`); the compiler's target keeps one. Both are
    compiled everywhere (neither's helpers go unused), the float16 one only under Zvfh."""
    dk = direct.kernel
    body = fp16_or(half_body(xs, ws_, ys, geometry, bias, residual, act, "wh"),
                   dk.body) + "(void)wh;\n"
    support = dict(dk.support)
    support.update(support_of(act, gemm_of(ws_, ys).acc_lmul))
    params = dk.params[:2] + (Param("wh", True, "float16"),) + dk.params[2:]
    kern = Kernel(_hint(ws_, geometry, "auto"), params, indent(body, directives=True) + "\n",
                  max(dk.workspace, workspace_of(ws_, ys)), support, dk.macs,
                  spec=dict(dk.spec, half_rows=gemm_of(ws_, ys).rows))
    return Lowered(kern, dict(direct.transforms), ((2, 1, pack_weights(ws_, ys)),))
