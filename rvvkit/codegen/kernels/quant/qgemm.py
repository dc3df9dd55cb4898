"""The int8 x int8 -> int32 GEMM core of the quantized kernels (qconv.py, qmatmul.py): its AVX2
and portable paths, and the support definition holding all three (the RVV path is emitted by
qgemm_rvv.py). The requantisation epilogue the kernels share is in requant.py; how they split
a product into parts for the thread pool, in qgemm_parts.py.

    rvk_qgemm(M, N, K, A, lda, B, ldb, C, ldc, paired):  C[m][n] = sum_k A[m][k] * B[k][n]

A supplies scalars (a row of weights, or of activations), B vectors along n (the im2col rows of
a convolution, or the weight rows of a matrix product), C is row-major int32.

RVV: every product is one vwmacc.vx (int16 x int16 -> int32, exact) at e16/m1, in register
blocks of up to 14 int32 m2 accumulators that share one int16 vector operand (VLEN's 32
registers give the reuse, not LMUL); the first k is peeled into vwmul so that the k loop runs
at its own vtype with no vsetvli inside. The vectors run along n (B widened to int16 once per
call, in `scratch`; A's elements are the scalars) or, when that fills clearly fewer lanes
(N small against M, e.g. a 7 x 7 feature map), along m (A's columns read strided and widened
in the loop; B's elements are the scalars; C stored strided). The choice is made at run time
from the VLEN.

x86 with AVX2: B's rows are interleaved in pairs and widened to int16 once per call, into
16-column panels (in `scratch`), A's rows widened once; then vpmaddwd multiplies 8 columns x 2 k
and adds the pair in one instruction (exact: two int8 products fit int32 many times over), into
a 6 x 16 block of int32 accumulators (12 registers + 2 loads + 1 broadcast).

Portable C (other x86, GCC 12 riscv64, the CUDA unit's one-thread form): a 4 x 64 int32 tile,
written so that compilers vectorise the column loop. When `paired`, two k's products are added
in int16 before widening: exact because the builder sets it only when the constant side never
holds -128 (|a*b| <= 127*128, and two such products stay within int16).

`scratch` holds scratch_words(M, N, K) int32 words (the RVV and AVX2 paths use it).

Threads: the core runs on its caller's thread (see qgemm_parts.py)."""
from __future__ import annotations

from typing import Dict

from .qgemm_rvv import rvv_body

MR = 4          # rows of A per register block
NB = 64         # columns per portable tile
X86_MR = 6      # rows per AVX2 register block: 12 accumulators + 2 B + 1 broadcast


def _avx2(mr: int = X86_MR) -> str:
    """AVX2 path (see the module doc): B widened into 16-column panels of int16 pairs
    ([N/16][K2][16] int32, so the k loop reads memory in order), A's rows widened to int16
    once per call, 4 x 16 blocks of int32 accumulators fed by vpmaddwd."""
    rows = "\n".join(
        f"                a = _mm256_set1_epi32(*(const rvk_i32_alias *)(am + {2 * r} * K2 + 2 * kp));\n"
        f"                c{r}0 = _mm256_add_epi32(c{r}0, _mm256_madd_epi16(b0, a));\n"
        f"                c{r}1 = _mm256_add_epi32(c{r}1, _mm256_madd_epi16(b1, a));"
        for r in range(mr))
    init = ", ".join(f"c{r}0 = _mm256_setzero_si256(), c{r}1 = c{r}0" for r in range(mr))
    stores = "\n".join(f"            _mm256_storeu_si256((__m256i *)t[{r}], c{r}0);\n"
                       f"            _mm256_storeu_si256((__m256i *)(t[{r}] + 8), c{r}1);"
                       for r in range(mr))
    return f"""    const long K2 = (K + 1) / 2, NP = (N + 15) / 16;
    int32_t *__restrict bp = scratch;                        /* [NP][K2][16] int16 pairs */
    int16_t *__restrict ah = (int16_t *)(scratch + K2 * NP * 16);   /* [M rounded up][2 K2] */
    for (long kp = 0; kp < K2; ++kp) {{
        const int8_t *r0 = B + 2 * kp * ldb;
        const int8_t *r1 = 2 * kp + 1 < K ? r0 + ldb : NULL;
        long n = 0;
        if (r1) {{
            for (; n + 16 <= N; n += 16) {{
                const __m128i x0 = _mm_loadu_si128((const __m128i *)(r0 + n));
                const __m128i x1 = _mm_loadu_si128((const __m128i *)(r1 + n));
                __m256i *d = (__m256i *)(bp + ((n >> 4) * K2 + kp) * 16);
                _mm256_storeu_si256(d, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, x1)));
                _mm256_storeu_si256(d + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, x1)));
            }}
        }}
        for (long pn = n >> 4; pn < NP; ++pn) {{   /* the rest: padding and an odd K's partner are 0 */
            int16_t *d = (int16_t *)(bp + (pn * K2 + kp) * 16);
            for (long j = 0; j < 16; ++j) {{
                const long c = pn * 16 + j;
                if (c < n) continue;
                d[2 * j] = c < N ? r0[c] : 0;
                d[2 * j + 1] = r1 != NULL && c < N ? r1[c] : 0;
            }}
        }}
    }}
    for (long r = 0; r < (M + {mr - 1}) / {mr} * {mr}; ++r) {{   /* once per call: reused by every panel */
        int16_t *d = ah + r * 2 * K2;
        if (r < M) {{
            const int8_t *a = A + r * lda;
            for (long k = 0; k < K; ++k) d[k] = a[k];
            if (K & 1) d[K] = 0;
        }} else {{
            for (long k = 0; k < 2 * K2; ++k) d[k] = 0;
        }}
    }}
    /* Panels in chunks whose widened B (K2 x 16 x chunk int32) stays in L2 while every row
     * block passes over it. */
    long PC = (192 * 1024 / 64) / K2;
    PC = PC < 1 ? 1 : PC;
    for (long p0 = 0; p0 < NP; p0 += PC) {{
    const long p1 = p0 + PC < NP ? p0 + PC : NP;
    for (long m0 = 0; m0 < M; m0 += {mr}) {{
        const long mr = M - m0 < {mr} ? M - m0 : {mr};
        const int16_t *am = ah + m0 * 2 * K2;
        for (long pn = p0; pn < p1; ++pn) {{
            const int32_t *panel = bp + pn * K2 * 16;
            __m256i {init};
            for (long kp = 0; kp < K2; ++kp) {{
                const __m256i b0 = _mm256_loadu_si256((const __m256i *)(panel + kp * 16));
                const __m256i b1 = _mm256_loadu_si256((const __m256i *)(panel + kp * 16 + 8));
                __m256i a;
{rows}
            }}
            int32_t t[{mr}][16];
{stores}
            const long n0 = pn * 16, nb = N - n0 < 16 ? N - n0 : 16;
            for (long r = 0; r < mr; ++r)
                memcpy(C + (m0 + r) * ldc + n0, t[r], (size_t)nb * sizeof(int32_t));
        }}
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
#if defined(__AVX2__) && !defined(__CUDACC__) && !defined(RVK_CUDA_EMU)
#include <immintrin.h>
/* A pair of int16 read as one int32 (vpbroadcastd): may_alias makes that defined. */
typedef int32_t rvk_i32_alias __attribute__((may_alias));
#endif
/* GCC's interprocedural constant propagation clones this per call site with the shapes as
 * constants, and the clone spills the AVX2 accumulators (half the speed): keep it generic. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(RVK_CUDA_EMU)
#define RVK_QGEMM_DECL static __attribute__((noipa, unused))
#else
#define RVK_QGEMM_DECL static RVK_HD inline
#endif
RVK_QGEMM_DECL void {QGEMM_NAME}(long M, long N, long K, const int8_t *__restrict A,
                                long lda, const int8_t *__restrict B, long ldb,
                                int32_t *__restrict C, long ldc, int paired,
                                int32_t *__restrict scratch) {{
#if defined(__riscv_v_intrinsic)
    (void)paired;
{rvv_body()}
#elif defined(__AVX2__) && !defined(__CUDACC__) && !defined(RVK_CUDA_EMU)
    (void)paired;
{_avx2()}
#else
    (void)scratch;
{_portable()}
#endif
}}
"""
    return {QGEMM_KEY: code}


def scratch_words(m: int, n: int, k: int) -> int:
    """int32 words of the GEMM core's scratch: the AVX2 path's widened operands, which also
    hold the RVV path's (B as int16, K x N)."""
    k2 = (k + 1) // 2
    return k2 * (-(-n // 16) * 16) + (-(-m // X86_MR) * X86_MR) * k2
