"""The int8 x int8 -> int32 GEMM core of the quantized kernels (qconv.py, qmatmul.py) and the
requantisation epilogue they share.

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

Threads: the core runs on its caller's thread. The kernels that call it (qconv.py, qmatmul.py)
run on the pool in parts that are blocks of the output, `part_blocks` rows by columns of each
product, one core call per part: a part widens (and, in qmatmul, flips) only its own columns
of B, so splitting columns redoes nothing but A's widening on AVX2 (about 1 / columns more);
rows are split too only where the columns give too few parts (each row block widens its
columns again). The K sum is never split and the sums are exact integers, and part bounds
depend on the shapes alone, so every output is the same for every thread count."""
from __future__ import annotations

import math
import re
from typing import Dict, List, Sequence, Tuple

from ..kernel import Param
from ..loops import cdiv

MR = 4          # rows of A per register block
NB = 64         # columns per portable tile


RV_BLOCKS = (14, 8, 7, 4, 2, 1)   # rows or columns per RVV register block: 7 fits
#                                  a 7 x 7 map (49 = 3 x 14 + 7), 8 powers of two


def _rvv_block(r: int, scalar, vec_load: str, store) -> str:
    """One RVV register block of `r` int32 m2 accumulators (14 of them and the int16 m1 operand
    fill 29 of the 32 registers): every product is one vwmacc.vx at e16/m1, the first k
    peeled into vwmul so that the block is entered at the k loop's own vtype (clang 16 then
    keeps vsetvli out of it). `scalar(i, k)` is block row i's scalar at k, `vec_load(k)` the
    shared int16 m1 vector, `store(i)` writes accumulator c{i}."""
    rows = range(r)
    first = "\n".join(f"            vint32m2_t c{i} = __riscv_vwmul_vx_i32m2(v, (int16_t){scalar(i, '0')}, vl);"
                      for i in rows)
    mac = "\n".join(f"                c{i} = __riscv_vwmacc_vx_i32m2(c{i}, (int16_t){scalar(i, 'k')}, v, vl);"
                    for i in rows)
    stores = "\n".join(f"            {store(i)};" for i in rows)
    return f"""            vint16m1_t v = {vec_load('0')};
{first}
            for (long k = 1; k < K; ++k) {{
                v = {vec_load('k')};
{mac}
            }}
{stores}"""


def _rvv_blocks(idx: str, count: str, body) -> str:
    """Blocks of RV_BLOCKS[0] along `idx`, then one each of the smaller sizes for the rest."""
    big = RV_BLOCKS[0]
    parts = [f"""        long {idx} = 0;
        for (; {idx} + {big} <= {count}; {idx} += {big}) {{
{body(big)}
        }}"""]
    for r in RV_BLOCKS[1:]:
        parts.append(f"""        if ({count} - {idx} >= {r}) {{
{body(r)}
            {idx} += {r};
        }}""")
    return "\n".join(parts)


def _rvv_n_path() -> str:
    """Vectors along n (B's rows, widened to int16 once), scalars from A's rows."""
    body = lambda r: _rvv_block(   # noqa: E731
        r, lambda i, k: f"A[(m0 + {i}) * lda + {k}]",
        lambda k: f"__riscv_vle16_v_i16m1(bw + {k} * N + n0, vl)",
        lambda i: f"__riscv_vse32_v_i32m2(C + (m0 + {i}) * ldc + n0, c{i}, vl)")
    return f"""    int16_t *__restrict bw = (int16_t *)scratch;
    for (long k = 0; k < K; ++k)
        for (long n = 0; n < N;) {{
            const size_t vl = __riscv_vsetvl_e16m2((size_t)(N - n));
            __riscv_vse16_v_i16m2(bw + k * N + n,
                                  __riscv_vsext_vf2_i16m2(__riscv_vle8_v_i8m1(B + k * ldb + n, vl),
                                                          vl), vl);
            n += (long)vl;
        }}
    for (long n0 = 0; n0 < N;) {{
        const size_t vl = __riscv_vsetvl_e16m1((size_t)(N - n0));
{_rvv_blocks("m0", "M", body)}
        n0 += (long)vl;
    }}"""


def _rvv_m_path() -> str:
    """Vectors along m (A's columns, read strided and widened in the loop), scalars from B's
    rows, C stored strided."""
    body = lambda r: _rvv_block(   # noqa: E731
        r, lambda i, k: f"B[{k} * ldb + n0 + {i}]",
        lambda k: (f"__riscv_vsext_vf2_i16m1(__riscv_vlse8_v_i8mf2(A + m0 * lda + {k}, "
                   f"(ptrdiff_t)lda, vl), vl)"),
        lambda i: f"__riscv_vsse32_v_i32m2(C + m0 * ldc + n0 + {i}, cs, c{i}, vl)")
    return f"""    const ptrdiff_t cs = (ptrdiff_t)(ldc * (long)sizeof(int32_t));
    for (long m0 = 0; m0 < M;) {{
        const size_t vl = __riscv_vsetvl_e16m1((size_t)(M - m0));
{_rvv_blocks("n0", "N", body)}
        m0 += (long)vl;
    }}"""


def _rvv() -> str:
    return f"""    /* Exact int8 products cost one vwmacc.vx (int16 x int16 -> int32) each; the register
     * blocks are at e16/m1 so that VLEN's 32 registers, not LMUL, give the reuse (14 rows
     * share each vector operand). Vectors run along whichever of n and m fills more lanes:
     * along n, B is widened once and A's weights are the scalars; along m (small N, e.g.
     * a 7 x 7 feature map), A's columns are the vectors, which costs one more instruction
     * per 14 products (the widening in the loop), so it is taken only when it saves more. */
    const long v1 = (long)__riscv_vsetvlmax_e16m1();
    const long n_lanes = (N + v1 - 1) / v1 * v1 * M, m_lanes = (M + v1 - 1) / v1 * v1 * N;
    if (m_lanes * 16 < n_lanes * 15) {{
{_rvv_m_path()}
        return;
    }}
{_rvv_n_path()}"""


X86_MR = 6     # rows per AVX2 register block: 12 accumulators + 2 B + 1 broadcast


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
{_rvv()}
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


PART_COLS = 128    # columns per part: whole AVX2 panels (16), RVV e16/m1 strips to VLEN 1024
PART_ROWS = 64     # rows per part when rows are split: whole vectors along m to VLEN 1024
PARTS = 16         # parts a product should offer (threads to keep busy) before rows split


def _round_up(v: int, step: int) -> int:
    return -(-v // step) * step


def part_blocks(m: int, n: int, outer: int = 1) -> Tuple[int, int]:
    """(rows, columns) of a part of an M x N int8 product, of which the kernel computes
    `outer` independent ones (images, groups, batch steps). Columns come in even blocks of
    about PART_COLS, a multiple of 16 (the portable tile's AVX2 panels); rows stay whole
    unless outer x column blocks is below PARTS, then they split in multiples of PART_ROWS
    (each row block widens its column block again, and flips it in qmatmul: a few per cent
    of the product's instructions). Sizes depend on the shapes alone, never on the thread count."""
    cols = cdiv(n, PART_COLS)
    nb = min(n, _round_up(cdiv(n, cols), 16))
    have = outer * cdiv(n, nb)
    mb = m
    if have < PARTS and m >= 2 * PART_ROWS:
        splits = min(cdiv(PARTS, have), m // PART_ROWS)
        mb = min(m, _round_up(cdiv(m, splits), PART_ROWS))
    return mb, nb


def part_span(first: str, count: str, index: str, size: int, total: int) -> str:
    """Statement declaring `first` and `count` of the block of `size` (of `total`) at part
    index `index`; the whole when one block holds it."""
    if size >= total:
        return f"const long {first} = 0, {count} = {total};"
    return (f"const long {first} = {index} * {size}, "
            f"{count} = {total} - {first} < {size} ? {total} - {first} : {size};")


def part_indices(dims: Sequence[Tuple[str, int]], body: str, var: str = "u") -> str:
    """Statements declaring the indices `dims` ((name, count), outermost first) of part `var`
    that `body` uses (an index of count 1 is 0)."""
    out, inner = [], 1
    for name, count in reversed(dims):
        if re.search(rf"\b{name}\b", body):
            if count == 1:
                expr = "0"
            else:
                expr = var if inner == 1 else f"{var} / {inner}"
                expr += f" % {count}" if inner * count < math.prod(c for _, c in dims) else ""
            out.append(f"const long {name} = {expr};")
        inner *= count
    return "\n".join(reversed(out))


def scratch_words(m: int, n: int, k: int) -> int:
    """int32 words of the GEMM core's scratch: the AVX2 path's widened operands, which also
    hold the RVV path's (B as int16, K x N)."""
    k2 = (k + 1) // 2
    return k2 * (-(-n // 16) * 16) + (-(-m // X86_MR) * X86_MR) * k2


EPILOGUE_KEY = "hd_rvk_requant"
EPILOGUE = """\
/* int32 sum -> quantized value as onnxruntime rounds it: one float multiply, saturation to
 * [lo - zp, hi - zp], round half to even (adding 1.5 * 2^23 leaves the rounded integer in the
 * low mantissa bits of a float of magnitude below 2^22, in the default round-to-nearest-even
 * mode), + zp. The integer is read from the bits rather than converted, because QEMU 7.2
 * aborts translating the narrowing vfncvt.rtz that clang makes of a conversion here. */
static RVK_HD inline __attribute__((unused)) int32_t rvk_requant(int32_t v, float scale, float lo,
                                                                 float hi, int32_t zp) {
    float f = (float)v * scale;
    f = f < lo ? lo : f;
    f = f > hi ? hi : f;
    f += 12582912.0f;
    int32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits - 0x4B400000 + zp;
}
"""


ROW_KEY = "hd_rvk_requant_row"
ROW = """\
/* One output row: y[q] = requant(acc[q] + add - coef * sub[q]) (sub may be NULL), the same
 * arithmetic as rvk_requant, strip-mined at e32/m4 on RVV (clang 16 vectorised the scalar form
 * into compare-and-merge pairs and fractional-LMUL narrowing steps, about twice the work).
 * There the product is rounded by the narrowing conversion to int16 (frm: round to nearest
 * even, as everywhere in rvvkit), which saturates, so the clamp to [lo, hi] + zp (the same
 * integers as rvk_requant's float clamp, rounding being monotonic) runs on half-width
 * registers. The result's low byte is the int8 or uint8 output. */
static RVK_HD inline void rvk_requant_row(const int32_t *__restrict acc, long n, int32_t add,
                                          int32_t coef, const int32_t *__restrict sub,
                                          float scale, float lo, float hi, int32_t zp,
                                          int8_t *__restrict y) {
#if defined(__riscv_v_intrinsic)
    const int16_t ilo = (int16_t)((int32_t)lo + zp), ihi = (int16_t)((int32_t)hi + zp);
    for (long q = 0; q < n;) {
        const size_t vl = __riscv_vsetvl_e32m4((size_t)(n - q));
        vint32m4_t v = __riscv_vadd_vx_i32m4(__riscv_vle32_v_i32m4(acc + q, vl), add, vl);
        if (sub)
            v = __riscv_vnmsac_vx_i32m4(v, coef, __riscv_vle32_v_i32m4(sub + q, vl), vl);
        const vfloat32m4_t f = __riscv_vfmul_vf_f32m4(__riscv_vfcvt_f_x_v_f32m4(v, vl), scale,
                                                      vl);
        vint16m2_t h = __riscv_vsadd_vx_i16m2(__riscv_vfncvt_x_f_w_i16m2(f, vl), (int16_t)zp, vl);
        h = __riscv_vmin_vx_i16m2(__riscv_vmax_vx_i16m2(h, ilo, vl), ihi, vl);
        __riscv_vse8_v_i8m1(y + q, __riscv_vnsra_wx_i8m1(h, 0, vl), vl);
        q += (long)vl;
    }
#else
    for (long q = 0; q < n; ++q)
        y[q] = (int8_t)rvk_requant(acc[q] + add - (sub ? coef * sub[q] : 0), scale, lo, hi, zp);
#endif
}
"""


def epilogue_support() -> Dict[str, str]:
    return {EPILOGUE_KEY: EPILOGUE}


def tail_params(has_scale: bool, zp: str, rt_zp: Tuple[str, str], zp_dtype: str,
                out: str) -> List[Param]:
    """The kernel parameters after operands and bias, in the order passes/quant.py gives the
    node's inputs: [scale (float, per channel)], [`zp` (int32 per-channel zero points; '' when
    absent)], [`rt_zp` = (run-time zero point of `zp_dtype`, int32 weight sums); () when
    absent], then y of type `out`."""
    params = [Param("scale")] if has_scale else []
    if zp:
        params.append(Param(zp, dtype="int32"))
    if rt_zp:
        params += [Param(rt_zp[0], dtype=zp_dtype), Param(rt_zp[1], dtype="int32")]
    return params + [Param("y", False, out)]


def row_support() -> Dict[str, str]:
    """rvk_requant_row (after rvk_requant, which its portable branch calls)."""
    return {EPILOGUE_KEY: EPILOGUE, ROW_KEY: ROW}
