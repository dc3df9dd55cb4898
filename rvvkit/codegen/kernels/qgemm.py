"""The int8 x int8 -> int32 GEMM core of the quantized kernels (qconv.py, qmatmul.py) and the
requantisation epilogue they share.

    rvk_qgemm(M, N, K, A, lda, B, ldb, C, ldc, paired):  C[m][n] = sum_k A[m][k] * B[k][n]

A supplies scalars (a row of weights, or of activations), B vectors along n (the im2col rows of
a convolution, or the weight rows of a matrix product), C is row-major int32.

RVV: a strip of n at e8/m1 (VLEN/8 columns) times 4 rows of A. Each product is a widening
multiply into int16 (vwmul.vx); when `paired`, the next k's product is added in int16 too
(vwmacc.vx) before one widening add into the int32 accumulators (vwadd.wv) — two k per
accumulator update. That is exact because paired is only set when one operand never holds
-128 (the builder checks the constant side): |a*b| <= 127*128 and two such sums stay within
int16. The 4 rows' int8-vtype operations are issued together, then the 4 int16-vtype adds, so
the vtype changes twice per k step rather than per row.

Portable C (x86, GCC 12 riscv64): the same loop nest over a 4 x 64 int32 tile, written so that
gcc/clang vectorise the column loop (int16 products, widened once per pair)."""
from __future__ import annotations

from typing import Dict

MR = 4          # rows of A per register block
NB = 64         # columns per portable tile


def _rvv_rows(mr: int) -> str:
    rows = range(mr)
    init = "\n".join(f"            vint32m4_t c{r} = __riscv_vmv_v_x_i32m4(0, vl);" for r in rows)
    a0 = "\n".join(f"                const int8_t a{r}0 = A[(m0 + {r}) * lda + k], "
                   f"a{r}1 = A[(m0 + {r}) * lda + k + 1];" for r in rows)
    mul = "\n".join(f"                vint16m2_t p{r} = __riscv_vwmul_vx_i16m2(b0, a{r}0, vl);\n"
                    f"                p{r} = __riscv_vwmacc_vx_i16m2(p{r}, a{r}1, b1, vl);"
                    for r in rows)
    acc = "\n".join(f"                c{r} = __riscv_vwadd_wv_i32m4(c{r}, p{r}, vl);"
                    for r in rows)
    one = "\n".join(f"                c{r} = __riscv_vwadd_wv_i32m4(c{r}, "
                    f"__riscv_vwmul_vx_i16m2(b0, A[(m0 + {r}) * lda + k], vl), vl);"
                    for r in rows)
    store = "\n".join(f"            __riscv_vse32_v_i32m4(C + (m0 + {r}) * ldc + n0, c{r}, vl);"
                      for r in rows)
    return f"""{init}
            long k = 0;
            if (paired) {{
            for (; k + 1 < K; k += 2) {{
                const vint8m1_t b0 = __riscv_vle8_v_i8m1(B + k * ldb + n0, vl);
                const vint8m1_t b1 = __riscv_vle8_v_i8m1(B + (k + 1) * ldb + n0, vl);
{a0}
{mul}
{acc}
            }}
            }}
            for (; k < K; ++k) {{
                const vint8m1_t b0 = __riscv_vle8_v_i8m1(B + k * ldb + n0, vl);
{one}
            }}
{store}"""


def _rvv() -> str:
    return f"""    const size_t vmax = __riscv_vsetvlmax_e8m1();
    for (long n0 = 0; n0 < N; n0 += (long)vmax) {{
        const size_t vl = (size_t)(N - n0) < vmax ? (size_t)(N - n0) : vmax;
        long m0 = 0;
        for (; m0 + {MR} <= M; m0 += {MR}) {{
{_rvv_rows(MR)}
        }}
        for (; m0 < M; ++m0) {{
{_rvv_rows(1)}
        }}
    }}"""


def _portable() -> str:
    return f"""    for (long m0 = 0; m0 < M; m0 += {MR}) {{
        const long mr = M - m0 < {MR} ? M - m0 : {MR};
        for (long n0 = 0; n0 < N; n0 += {NB}) {{
            const long nb = N - n0 < {NB} ? N - n0 : {NB};
            int32_t acc[{MR}][{NB}];
            for (long r = 0; r < {MR}; ++r)
                for (long j = 0; j < {NB}; ++j) acc[r][j] = 0;
            long k = 0;
            if (paired) {{
            for (; k + 1 < K; k += 2) {{
                const int8_t *b0 = B + k * ldb + n0, *b1 = b0 + ldb;
                for (long r = 0; r < mr; ++r) {{
                    const int16_t a0 = A[(m0 + r) * lda + k], a1 = A[(m0 + r) * lda + k + 1];
                    for (long j = 0; j < nb; ++j)
                        acc[r][j] += (int16_t)(a0 * b0[j] + a1 * b1[j]);
                }}
            }}
            }}
            for (; k < K; ++k) {{
                const int8_t *b0 = B + k * ldb + n0;
                for (long r = 0; r < mr; ++r) {{
                    const int16_t a0 = A[(m0 + r) * lda + k];
                    for (long j = 0; j < nb; ++j) acc[r][j] += (int16_t)(a0 * b0[j]);
                }}
            }}
            for (long r = 0; r < mr; ++r)
                for (long j = 0; j < nb; ++j) C[(m0 + r) * ldc + n0 + j] = acc[r][j];
        }}
    }}"""


QGEMM_NAME = "rvk_qgemm"
QGEMM_KEY = "hd_rvk_qgemm"


def qgemm_support() -> Dict[str, str]:
    """The GEMM core as a support definition (one copy per translation unit; "hd_": the CUDA
    unit's one-thread form compiles its portable branch)."""
    code = f"""/* C[m][n] = sum_k A[m][k] * B[k][n]: int8 operands, int32 sums (see qgemm.py). */
static RVK_HD inline void {QGEMM_NAME}(long M, long N, long K, const int8_t *__restrict A,
                                long lda, const int8_t *__restrict B, long ldb,
                                int32_t *__restrict C, long ldc, int paired) {{
#if defined(__riscv_v_intrinsic)
{_rvv()}
#else
{_portable()}
#endif
}}
"""
    return {QGEMM_KEY: code}


EPILOGUE_KEY = "hd_rvk_requant"
EPILOGUE = """\
/* int32 sum -> quantized value as onnxruntime rounds it: one float multiply, saturation to
 * [lo - zp, hi - zp], round half to even (adding 1.5 * 2^23 leaves the rounded integer in the
 * low mantissa bits of a float of magnitude below 2^22, in the default round-to-nearest-even
 * mode), + zp. The integer is read from the bits rather than converted, because QEMU 7.2
 * aborts translating the narrowing vfncvt.rtz that clang makes of a conversion here. */
static RVK_HD inline int32_t rvk_requant(int32_t v, float scale, float lo, float hi, int32_t zp) {
    float f = (float)v * scale;
    f = f < lo ? lo : f;
    f = f > hi ? hi : f;
    f += 12582912.0f;
    int32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits - 0x4B400000 + zp;
}
"""


def epilogue_support() -> Dict[str, str]:
    return {EPILOGUE_KEY: EPILOGUE}
