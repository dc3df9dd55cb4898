"""MatMulNBits with float activations (accuracy_level 0..3, or float zero points): the
weights in the column layout of nbits_layout.py (re-laid at build time), a vector running along
output columns, each packed weight byte read once per row:

    y[n] = sum_blk sw[blk, n] * (sum_k a[k] * code[k, n] - zp[blk, n] * sum_k a[k])

The block sums of the activation rows are computed once per thread (the prologue, into the
workspace), not once per part of the columns; onnxruntime
dequantizes first and then multiplies, so the two differ by float rounding only."""
from __future__ import annotations

from ... import rvv
from ...kernel import Lowered, declare_spec
from ....ops.llm import nbits
from .nbits_layout import (PAIRS, at_column, column_kernel, default_zero_point, portable_part, rows,
                           rvv_columns, rvv_zero_point, scale_at, scale_load)

declare_spec("matmul_nbits_f32", ("M", "K", "N", "bits", "block", "zp_kind", "bias", "pairs",
                                     "scales"))


def _block_sums(m: int, k: int, nb: int, block: int) -> str:
    """C (the prologue): every row's block sums, row i's at ws + i * nb."""
    body = f"""const float *__restrict x = a + i * {k};
for (long blk = 0; blk < {nb}; ++blk) {{
    const long k1 = blk * {block} + {block} < {k} ? blk * {block} + {block} : {k};
    float s = 0.0f;
    for (long t = blk * {block}; t < k1; ++t) s += x[t];
    ws[i * {nb} + blk] = s;
}}
"""
    return rows(body, m)


def _row(k: int, nb: int) -> str:
    return (f"const float *__restrict x = a + i * {k};\n"
            f"const float *__restrict asum = ws + i * {nb};\n"
            "(void)asum;   /* unused where the zero point is 0 */\n")


def _zero_point(zp_kind: str, bits: int, at: str) -> str:
    return f"zp[{at}]" if zp_kind else f"{default_zero_point(bits)!r}f"


def _portable(m: int, k: int, n: int, bits: int, block: int, nb: int, zp_kind: str,
              bias: bool, scales: str) -> str:
    """Portable C: per column the products summed in k's order, as the RVV form does."""
    def finish(d: str, half: int) -> str:
        at = at_column(half, "c", nb, bits)
        return (f"{scale_at(at, scales)} *\n"
                f"            ({d} - {_zero_point(zp_kind, bits, at)} * asum[blk])")
    k1 = f"(blk * {block} + {block} < {k} ? blk * {block} + {block} : {k})"
    body = portable_part(n, bits, bias, nb, "float", f"long t = blk * {block}; t < {k1}",
                         "const float at = x[t];", "at * (float){code}", finish)
    return rows(_row(k, nb) + body, m)


def _rvv(m: int, k: int, n: int, bits: int, block: int, nb: int, zp_kind: str, bias: bool,
         scales: str) -> str:
    def finish(acc: str, half: int, out: str) -> str:
        at = at_column(half, "(j - j0)", nb, bits)
        return f"""{rvv_zero_point(zp_kind, bits, at, acc, "asum[blk]")}
{out} = __riscv_vfmacc_vv_f32m4({out}, {acc},
    {scale_load(at, scales)}, vl);"""
    zero = "__riscv_vfmv_v_f_f32m4(0.0f, vl)"
    k1 = f"(blk * {block} + {block} < {k} ? blk * {block} + {block} : {k})"
    if bits == 4:
        per_block = f"""vfloat32m4_t flo = {zero}, fhi = flo;
for (long t = blk * {block}; t < {k1}; ++t) {{
    const vuint8m1_t qv = __riscv_vle8_v_u8m1(qp + t * {PAIRS} + j, vl);
    flo = __riscv_vfmacc_vf_f32m4(flo, x[t], __riscv_vfcvt_f_xu_v_f32m4(
        __riscv_vzext_vf4_u32m4(__riscv_vand_vx_u8m1(qv, 15, vl), vl),
        vl), vl);
    fhi = __riscv_vfmacc_vf_f32m4(fhi, x[t], __riscv_vfcvt_f_xu_v_f32m4(
        __riscv_vzext_vf4_u32m4(__riscv_vsrl_vx_u8m1(qv, 4, vl), vl),
        vl), vl);
}}
{finish("flo", 0, "o0lo")}
{finish("fhi", 1, "o0hi")}"""
    else:
        per_block = f"""vfloat32m4_t facc = {zero};
for (long t = blk * {block}; t < {k1}; ++t)
    facc = __riscv_vfmacc_vf_f32m4(facc, x[t], __riscv_vfcvt_f_x_v_f32m4(
        __riscv_vsext_vf4_i32m4(
            __riscv_vle8_v_i8m1(qp + t * {PAIRS} + j, vl), vl), vl), vl);
{finish("facc", 0, "o0lo")}"""
    return rows(_row(k, nb) + rvv_columns(n, bits, bias, nb, per_block), m)


def matmul_nbits_f32(m: int, k: int, n: int, bits: int, block: int, zp_kind: str,
                     bias: bool, scales: str = "float32") -> Lowered:
    """Params as nbits_layout.column_kernel. Workspace: the rows' block sums, written by the
    prologue."""
    nb = nbits.blocks_of(k, block)
    per_part = rvv.guarded(_rvv(m, k, n, bits, block, nb, zp_kind, bias, scales),
                           _portable(m, k, n, bits, block, nb, zp_kind, bias, scales))
    return column_kernel("matmul_nbits_f32", m, k, n, bits, block, zp_kind, bias, "",
                         per_part, m * nb, scales, prologue=_block_sums(m, k, nb, block))
