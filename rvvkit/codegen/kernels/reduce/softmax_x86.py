"""A softmax row in x86 intrinsics (AVX-512 where the CPU has it, else AVX2), for the Softmax
kernel and the attention's in-workspace rows.

gcc 12 leaves the portable lanes' max step scalar (16 vmaxss a 16-float run) and runs the
exponentials with masked clamps; written out, the max takes four vector registers, the
exponentials two at a time, and a 1500-key row costs 0.5 instead of 0.7 ns an element on a
Zen 4 core (Whisper's scores: 4.6 instead of 6.5 ms a layer). e^x is rvk_expf's (the prelude:
the same reduction, polynomial and clamps), so the values are the portable form's up to the
order of the sum's additions."""
from __future__ import annotations

import re

from ... import x86

KEY = "1_rvk_softmax_row_x86"

_BODY = """
/* y[0..n) = softmax(x[0..n)); x may be y (each element is read before it is written). With
 * `masked_zeros`, a row whose maximum is -inf (every key masked) becomes zeros. */
static inline void rvk_softmax_row(const float *x, float *y, long n, int masked_zeros) {
    const long nv = n / (4 * W) * (4 * W);
    VT m0 = SET1(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    for (long k = 0; k < nv; k += 4 * W) {
        m0 = MAX(m0, LOAD(x + k));
        m1 = MAX(m1, LOAD(x + k + W));
        m2 = MAX(m2, LOAD(x + k + 2 * W));
        m3 = MAX(m3, LOAD(x + k + 3 * W));
    }
    float t[W];
    STORE(t, MAX(MAX(m0, m1), MAX(m2, m3)));
    float m = t[0];
    for (int j = 1; j < W; ++j) m = t[j] > m ? t[j] : m;
    for (long k = nv; k < n; ++k) m = x[k] > m ? x[k] : m;
    if (m == -INFINITY && masked_zeros) {
        for (long k = 0; k < n; ++k) y[k] = 0.0f;
        return;
    }
    const VT mv = SET1(m);
    VT s0 = SET1(0.0f), s1 = s0;
    const long n2 = n / (2 * W) * (2 * W);
    for (long k = 0; k < n2; k += 2 * W) {
        const VT e0 = rvk_vexp_x86(SUB(LOAD(x + k), mv));
        const VT e1 = rvk_vexp_x86(SUB(LOAD(x + k + W), mv));
        STORE(y + k, e0);
        STORE(y + k + W, e1);
        s0 = ADD(s0, e0);
        s1 = ADD(s1, e1);
    }
    STORE(t, ADD(s0, s1));
    float s = 0.0f;
    for (int j = 0; j < W; ++j) s += t[j];
    for (long k = n2; k < n; ++k) {
        const float v = rvk_expf(x[k] - m);
        y[k] = v;
        s += v;
    }
    const VT r = SET1(1.0f / s);
    for (long k = 0; k < n2; k += W) STORE(y + k, MUL(LOAD(y + k), r));
    for (long k = n2; k < n; ++k) y[k] *= 1.0f / s;
}
"""

# rvk_expf (codegen/c.py) on W lanes: clamp, n = round(x / ln2) in t's low bits, r = x - n ln2
# in two parts, e^r - 1 by the degree-7 polynomial, 2^n in the exponent field
_EXP = """
static inline VT rvk_vexp_x86(VT x) {
    /* the clamps as rvk_expf's: (a < b ? a : b) returns b, here x, when x is NaN */
    x = MIN(SET1(88.0f), x);
    x = MAX(SET1(-87.3f), x);
    const VT t = FMA(x, SET1(1.442695f), SET1(12582912.0f));
    const VT n = SUB(t, SET1(12582912.0f));
    VT r = FNMA(n, SET1(0.6933594f), x);
    r = FMA(n, SET1(2.1219444e-4f), r);
    VT p = SET1(1.9875691e-4f);
    p = FMA(p, r, SET1(1.3981999e-3f));
    p = FMA(p, r, SET1(8.333452e-3f));
    p = FMA(p, r, SET1(4.1665796e-2f));
    p = FMA(p, r, SET1(0.16666666f));
    p = FMA(p, r, SET1(0.5f));
    const VT q = FMA(MUL(r, r), p, r);
    const VT s = EXP2(t);
    return FMA(s, q, s);
}
"""

_WIDE = {   # macro -> (its parameters, AVX-512 form, AVX2 form)
    "W": ("", "16", "8"), "VT": ("", "__m512", "__m256"),
    "SET1": ("(v)", "_mm512_set1_ps(v)", "_mm256_set1_ps(v)"),
    "LOAD": ("(p)", "_mm512_loadu_ps(p)", "_mm256_loadu_ps(p)"),
    "STORE": ("(p, v)", "_mm512_storeu_ps((p), (v))", "_mm256_storeu_ps((p), (v))"),
    "MAX": ("(a, b)", "_mm512_max_ps((a), (b))", "_mm256_max_ps((a), (b))"),
    "MIN": ("(a, b)", "_mm512_min_ps((a), (b))", "_mm256_min_ps((a), (b))"),
    "ADD": ("(a, b)", "_mm512_add_ps((a), (b))", "_mm256_add_ps((a), (b))"),
    "SUB": ("(a, b)", "_mm512_sub_ps((a), (b))", "_mm256_sub_ps((a), (b))"),
    "MUL": ("(a, b)", "_mm512_mul_ps((a), (b))", "_mm256_mul_ps((a), (b))"),
    "FMA": ("(a, b, c)", "_mm512_fmadd_ps((a), (b), (c))", "_mm256_fmadd_ps((a), (b), (c))"),
    "FNMA": ("(a, b, c)", "_mm512_fnmadd_ps((a), (b), (c))", "_mm256_fnmadd_ps((a), (b), (c))"),
    # 2^n from t's bits: (bits(t) - bits(1.5 * 2^23) + 127) << 23
    "EXP2": ("(t)",
             "_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t), "
             "_mm512_set1_epi32(127 - 0x4B400000)), 23))",
             "_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t), "
             "_mm256_set1_epi32(127 - 0x4B400000)), 23))"),
}


def _defines(form: int) -> str:
    """The macros for one form (1: AVX-512, 2: AVX2), prefixed RVK_SMX_."""
    return "\n".join(f"#define RVK_SMX_{name}{v[0]} {v[form]}" for name, v in _WIDE.items())


def _named(text: str) -> str:
    """The body with its macros prefixed (RVK_SMX_), so that they cannot meet other names."""
    for name in _WIDE:
        text = re.sub(rf"\b{name}\b", f"RVK_SMX_{name}", text)
    return text


def support() -> dict:
    """The row function (and the x86 header) under the x86 guard."""
    undef = "\n".join(f"#undef RVK_SMX_{name}" for name in _WIDE)
    code = (f"{x86.GUARD}\n#if defined(__AVX512F__)\n{_defines(1)}\n#else\n{_defines(2)}\n"
            f"#endif\n{_named(_EXP)}{_named(_BODY)}{undef}\n#endif\n")
    return {**x86.header(), KEY: code}


def row(x: str, y: str, n, masked_zeros: bool) -> str:
    """C statement: the softmax of row x into y (n elements)."""
    return f"rvk_softmax_row({x}, {y}, {n}, {int(masked_zeros)});"
