"""A softmax row in x86 intrinsics (AVX-512 where the CPU has it, else AVX2), for the Softmax
kernel and the attention's in-workspace rows.

gcc 12 leaves the portable lanes' max step scalar (16 vmaxss a 16-float run) and runs the
exponentials with masked clamps; written out, the max takes four vector registers, the
exponentials two at a time, and a 1500-key row costs 0.5 instead of 0.7 ns an element on a
Zen 4 core (Whisper's scores: 4.6 instead of 6.5 ms a layer). e^x is rvk_expf's step for step
(codegen/expmath.py), so the values are the portable form's up to the order of the sum's
additions."""
from __future__ import annotations

import re

from ... import expmath, x86

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

# rvk_expf (codegen/c.py) on W lanes, by the same steps (codegen/expmath.py), so each lane gives
# the C helper's bits: clamp, n = rint(x / ln2), r = x - n ln2 in two fused steps, the nested
# polynomial in multiplies and fused steps, 2^n as two normal factors
_EXP = """
static inline VT rvk_vexp_x86(VT x) {
    /* the clamps as rvk_expf's: (a < b ? a : b) returns b, here x, when x is NaN */
    x = MIN(SET1(HI), x);
    x = MAX(SET1(LO), x);
    const VT n = ROUND(MUL(x, SET1(LOG2E)));
    VT r = FNMA(n, SET1(LN2_HI), x);
    r = FNMA(n, SET1(LN2_LO), r);
    VT w = MUL(r, SET1(P0));
""" + "\n".join(f"    w = MUL(w, r);\n    w = FMA(SET1(P{k}), r, w);"
                for k in range(1, len(expmath.POLY))) + """
    const VT y = ADD(FMA(r, w, r), SET1(1.0f));
    const VI ni = NBITS(ADD(n, SET1(12582912.0f)));
    const VI n1 = HALF(ni);
    return MUL(MUL(y, POW2(n1)), POW2(ISUB(ni, n1)));
}
"""
_CONSTS = {"LO": expmath.C_LO, "HI": expmath.C_HI, "LOG2E": expmath.C_LOG2E,
           "LN2_HI": expmath.C_LN2_HI, "LN2_LO": expmath.C_LN2_LO,
           **{f"P{k}": c for k, c in enumerate(expmath.C_POLY)}}
_EXP = re.sub(r"\b(" + "|".join(_CONSTS) + r")\b", lambda m: _CONSTS[m.group(1)], _EXP)

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
    "VI": ("", "__m512i", "__m256i"),
    "ROUND": ("(a)", "_mm512_roundscale_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)",
              "_mm256_round_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)"),
    # n from the bits of n + 1.5 * 2^23 (n in the low mantissa bits, exactly)
    "NBITS": ("(t)", "_mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B400000))",
              "_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000))"),
    "HALF": ("(k)", "_mm512_srai_epi32((k), 1)", "_mm256_srai_epi32((k), 1)"),  # floor(k / 2)
    "ISUB": ("(a, b)", "_mm512_sub_epi32((a), (b))", "_mm256_sub_epi32((a), (b))"),
    # 2^k, k in [-126, 127], in the exponent field
    "POW2": ("(k)",
             "_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32((k), "
             "_mm512_set1_epi32(127)), 23))",
             "_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32((k), "
             "_mm256_set1_epi32(127)), 23))"),
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
