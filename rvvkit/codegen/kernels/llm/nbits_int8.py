"""MatMulNBits with int8 activations (accuracy_level 4: onnxruntime quantizes each block of
the activation row to int8 with scale amax / 127 and sums integer products per block):

    y[n] = sum_blk sa[blk] * sw[blk, n] * (sum_k aq[k] * code[k, n] - zp[blk, n] * sum_k aq[k])

The weights are in the column layout of nbits_layout.py, so a vector runs along output
columns. Per k a vector loads one byte per column pair, splits the nibbles and multiplies
them by the activation scalar into 16-bit sums (16 steps fit: 16 * 128 * 15 < 2^15), which
are widened into 32-bit sums; each packed weight byte is read once per generated token.
The portable path computes the same integer sums in scalar C."""
from __future__ import annotations

from textwrap import dedent

from ... import rvv
from ...cfmt import indent
from ...kernel import Lowered, declare_spec
from ....ops.llm import nbits
from .nbits_layout import (column_kernel, default_zero_point, portable_columns, row_body,
                           rvv_columns, rvv_zero_point, scale_at, scale_load, width_of)

declare_spec("matmul_nbits_i8", ("M", "K", "N", "bits", "block", "zp_kind", "bias", "pairs",
                                     "scales"))

def _quantize_row(k: int, nb: int, block: int) -> str:
    """C: row i of `a` to int8 blocks in the workspace (aq, sa, asum), as onnxruntime's MLAS
    does it: scale amax / 127, values times 127 / amax rounded to nearest even."""
    # RVV: vfcvt.x.f rounds in the dynamic mode, nearest even by default. (A compiler's own
    # vectorisation of the scalar loop tripped QEMU 7.2's translator: an assertion.)
    rvv_block = """            size_t vl;
            vfloat32m1_t mx = __riscv_vfmv_v_f_f32m1(0.0f, 1);
            for (long t = k0; t < k1; t += (long)vl) {
                vl = __riscv_vsetvl_e32m4((size_t)(k1 - t));
                mx = __riscv_vfredmax_vs_f32m4_f32m1(
                    __riscv_vfabs_v_f32m4(__riscv_vle32_v_f32m4(x + t, vl), vl), mx, vl);
            }
            const float amax = __riscv_vfmv_f_s_f32m1_f32(mx);
            const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
            vint32m1_t sum = __riscv_vmv_v_x_i32m1(0, 1);
            for (long t = k0; t < k1; t += (long)vl) {
                vl = __riscv_vsetvl_e32m4((size_t)(k1 - t));
                const vint32m4_t q = __riscv_vfcvt_x_f_v_i32m4(
                    __riscv_vfmul_vf_f32m4(__riscv_vle32_v_f32m4(x + t, vl), inv, vl), vl);
                sum = __riscv_vredsum_vs_i32m4_i32m1(q, sum, vl);
                __riscv_vse8_v_i8m1(aq + t, __riscv_vncvt_x_x_w_i8m1(
                    __riscv_vncvt_x_x_w_i16m2(q, vl), vl), vl);
            }
            asum[blk] = __riscv_vmv_x_s_i32m1_i32(sum);
"""
    portable_block = """            float amax = 0.0f;
            for (long t = k0; t < k1; ++t) amax = fabsf(x[t]) > amax ? fabsf(x[t]) : amax;
            const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
            int32_t sum = 0;
            for (long t = k0; t < k1; ++t) {
                /* nearest even: |x * inv| <= 127, far below 2^22, so adding and taking
                   away 1.5 * 2^23 rounds it in the default mode */
                aq[t] = (int8_t)(int)((x[t] * inv + 12582912.0f) - 12582912.0f);
                sum += aq[t];
            }
            asum[blk] = sum;
"""
    guarded = indent(rvv.guarded(dedent(rvv_block), dedent(portable_block)), directives=True)
    return f"""const float *__restrict x = a + i * {k};
for (long blk = 0; blk < {nb}; ++blk) {{
    const long k0 = blk * {block}, k1 = k0 + {block} < {k} ? k0 + {block} : {k};
{guarded}
    for (long t = k1; t < k0 + {block}; ++t) aq[t] = 0;   /* K's tail */
    sa[blk] = amax / 127.0f;
}}
"""


def _portable(k: int, n: int, bits: int, block: int, nb: int, zp_kind: str,
              bias: bool, scales: str) -> str:
    width = width_of(n, bits)
    z = "zp[blk * {n} + c]".format(n=n) if zp_kind else f"{default_zero_point(bits)!r}f"
    if bits == 4:
        code = f"(c < {width} ? (q[(long)t * {width} + c] & 15) : " \
               f"(q[(long)t * {width} + c - {width}] >> 4))"
    else:
        code = f"q[(long)t * {width} + c]"
    cols = f"""for (long c = c0; c < c1; ++c) {{
                float acc = {"bias[c]" if bias else "0.0f"};
                for (long blk = 0; blk < {nb}; ++blk) {{
                    int32_t dot = 0;
                    for (long t = blk * {block}; t < blk * {block} + {block}; ++t)
                        dot += (int32_t)aq[t] * (int32_t){code};
                    acc += sa[blk] * {scale_at(f"blk * {n} + c", scales)} *
                           ((float)dot - {z} * (float)asum[blk]);
                }}
                y[i * {n} + c] = acc;
            }}"""
    return portable_columns(n, bits, cols)


def _rvv(k: int, n: int, bits: int, block: int, nb: int, zp_kind: str, bias: bool,
         scales: str) -> str:
    width = width_of(n, bits)
    zero = "__riscv_vmv_v_x_i32m4(0, vl)"

    def finish(acc: str, col: str, out: str) -> str:
        return f"""                    {{
                        vfloat32m4_t f = __riscv_vfcvt_f_x_v_f32m4({acc}, vl);
                        {rvv_zero_point(zp_kind, bits, n, "f", col, "(float)asum[blk]")}
                        const vfloat32m4_t w = __riscv_vfmul_vf_f32m4(
                            {scale_load(f"blk * {n} + {col}", scales)}, sa[blk], vl);
                        {out} = __riscv_vfmacc_vv_f32m4({out}, f, w, vl);
                    }}"""
    if bits == 4:
        per_block = f"""                    vint32m4_t ilo = {zero}, ihi = ilo;
                    for (long h = blk * {block}; h < blk * {block} + {block}; h += 16) {{
                        vint16m2_t slo = __riscv_vmv_v_x_i16m2(0, vl), shi = slo;
                        for (long t = h; t < h + 16; ++t) {{
                            const vuint8m1_t qv = __riscv_vle8_v_u8m1(q + t * {width} + j, vl);
                            slo = __riscv_vwmaccsu_vx_i16m2(slo, aq[t],
                                __riscv_vand_vx_u8m1(qv, 15, vl), vl);
                            shi = __riscv_vwmaccsu_vx_i16m2(shi, aq[t],
                                __riscv_vsrl_vx_u8m1(qv, 4, vl), vl);
                        }}
                        ilo = __riscv_vwadd_wv_i32m4(ilo, slo, vl);
                        ihi = __riscv_vwadd_wv_i32m4(ihi, shi, vl);
                    }}
{finish("ilo", "j", "ylo")}
{finish("ihi", f"j + {width}", "yhi")}"""
    else:
        per_block = f"""                    vint32m4_t iacc = {zero};
                    for (long t = blk * {block}; t < blk * {block} + {block}; t += 2) {{
                        /* two products fit 16 bits: |aq| <= 127, |code - 128| <= 128 */
                        vint16m2_t two = __riscv_vwmul_vx_i16m2(
                            __riscv_vle8_v_i8m1(q + t * {width} + j, vl), aq[t], vl);
                        two = __riscv_vwmacc_vx_i16m2(two, aq[t + 1],
                            __riscv_vle8_v_i8m1(q + (t + 1) * {width} + j, vl), vl);
                        iacc = __riscv_vwadd_wv_i32m4(iacc, two, vl);
                    }}
{finish("iacc", "j", "ylo")}"""
    return rvv_columns(n, bits, bias, nb, per_block)


def matmul_nbits_i8(m: int, k: int, n: int, bits: int, block: int, zp_kind: str,
                    bias: bool, scales: str = "float32") -> Lowered:
    """Params as nbits_layout.column_kernel. Workspace: the quantized row (aq int8, sa float
    and asum int32 per block)."""
    nb = nbits.blocks_of(k, block)
    aq_words = -(-nb * block // 4)
    setup = f"""    int8_t *__restrict aq = (int8_t *)ws;
    float *__restrict sa = ws + {aq_words};
    int32_t *__restrict asum = (int32_t *)(ws + {aq_words + nb});
"""
    per_row = row_body(_quantize_row(k, nb, block),
                       _rvv(k, n, bits, block, nb, zp_kind, bias, scales),
                       _portable(k, n, bits, block, nb, zp_kind, bias, scales))
    return column_kernel("matmul_nbits_i8", m, k, n, bits, block, zp_kind, bias, setup,
                         per_row, aq_words + 2 * nb, scales)
