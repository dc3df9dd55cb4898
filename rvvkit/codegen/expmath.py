"""The one e^x rvvkit computes, as data: the portable C helper (codegen/c.py's MATH, also the
CUDA unit's), the x86 softmax row (kernels/reduce/softmax_x86.py) and the RVV register-group
helper (kernels/math/vmath.py) are written from these constants and these steps, so an
activation or a softmax gives the same bits on the host, under QEMU, on a board and on the
CUDA emulator (the sums around them may still add in another order).

The steps, each a single IEEE operation whichever the executor, so no compiler may fuse or
split them differently (-ffp-contract=fast would turn a C multiply-then-add into an FMA on
one target and not on another):

1. x clamped to [LO, HI] (a NaN stays NaN);
2. n = round-to-nearest-even(x * LOG2E), the product rounded first;
3. r = x - n LN2_HI, then r = r - n LN2_LO, each one fused multiply-add;
4. q = e^r - 1 = r (1 + r P(r)), P(r) = c5 + r (c4 + ... + r c0) nested: w = r c0, then per
   coefficient w = w r and w = fma(c, r, w) (so w = r (c + w) with one rounding less), and
   q = fma(r, w, r). One dependent chain, no constant broadcast into a vector register (at
   LMUL 8 there are four groups), each step one IEEE operation;
5. y = q + 1;
6. e^x = y 2^n1 2^n2 with n1 = floor(n / 2), n2 = n - n1: two normal factors, so a large x
   overflows to inf and a small one reaches the subnormals and zero as expf does.
"""
from __future__ import annotations

import numpy as np

from .cfmt import flt

LO, HI = -104.0, 89.0            # e^-104 is below the smallest subnormal, e^89 above FLT_MAX
LOG2E = 1.44269504               # 1 / ln 2
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4   # ln 2 = HI + LO; HI has 9 bits, n HI exact
# e^r - 1 - r = r^2 (c0 r^5 + ... + c5) on |r| <= ln2/2, highest degree first (~1 ulp)
POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
        5.0000001201e-1)


def lit(c: float) -> str:
    """The shortest C literal of c's float32 value, in scientific notation where positional
    would spell a long run of zeros (2.1219444e-4f, not 0.00021219444f)."""
    text = flt(c)
    if len(text.strip("()-f").split(".")[-1]) < 10:
        return text
    text = np.format_float_scientific(np.float32(c), unique=True, trim="-", exp_digits=1)
    return f"({text}f)" if text.startswith("-") else f"{text}f"


# the same as C literals (the shortest decimal of each float32 value)
C_LO, C_HI, C_LOG2E, C_LN2_HI = (flt(v) for v in (LO, HI, LOG2E, LN2_HI))
C_LN2_LO = lit(LN2_LO)
C_POLY = tuple(lit(c) for c in POLY)


EXPM1_LO, EXPM1_HI = -87.0, 88.0   # e^x - 1 is -1 in float below; 2^n stays one factor
C_EXPM1_LO, C_EXPM1_HI = flt(EXPM1_LO), flt(EXPM1_HI)


def _c_reduce(lo: str, hi: str) -> str:
    """C statements: x clamped to [lo, hi] (C literals), then n (float), r and q = e^r - 1
    (steps 1-4)."""
    terms = "\n".join(f"    w = w * r;\n    w = fmaf({c}, r, w);" for c in C_POLY[1:])
    return f"""    x = x > {hi} ? {hi} : x;
    x = x < {lo} ? {lo} : x;
    const float n = rintf(x * {C_LOG2E});
    float r = fmaf(-n, {C_LN2_HI}, x);
    r = fmaf(-n, {C_LN2_LO}, r);
    float w = r * {C_POLY[0]};
{terms}
    const float q = fmaf(r, w, r);
    const float t = n + 12582912.0f;        /* 1.5 * 2^23: n in t's low bits, exactly */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const int32_t ni = (int32_t)(bits - 0x4B400000u);"""


def c_math() -> str:
    """The scalar C helpers rvk_expf and rvk_expm1f (RVK_HD: __host__ __device__ in the CUDA
    unit)."""
    return f"""/* e^x by the steps of rvvkit/codegen/expmath.py, shared with the x86 and RVV
 * forms so each gives the same bits: n = rint(x / ln2), r = x - n ln2 in two fused steps,
 * e^r - 1 by a degree-7 polynomial in fused steps (<= 2 ulp; tests/host/test_prelude_math.py),
 * times 2^n as two normal factors (inf above, subnormals below, as expf). Call-free, so loops
 * around it vectorise (libm's expf is a call per element). NaN in, NaN out. */
static RVK_UNUSED RVK_HD inline float rvk_expf(float x) {{
{_c_reduce(C_LO, C_HI)}
    const int32_t n1 = ni >> 1;             /* floor(n / 2): arithmetic shift, as vsra */
    const uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(ni - n1 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return (q + 1.0f) * s1 * s2;
}}

/* e^x - 1, accurate near 0: 2^n q + (2^n - 1), as the RVV form (kernels/math/vmath.py). */
static RVK_UNUSED RVK_HD inline float rvk_expm1f(float x) {{
{_c_reduce(C_EXPM1_LO, C_EXPM1_HI)}
    const uint32_t b = (uint32_t)(ni + 127) << 23;
    float s;
    memcpy(&s, &b, sizeof s);
    return fmaf(s, q, s - 1.0f);
}}
"""


# GELU's erfc(z) = t (a1 + t (a2 + ... + t a5)) e^(-z^2), t = 1 / (1 + p z): Abramowitz-Stegun
# 7.1.26 (absolute error below 1.5e-7). t is taken as (1/p) / (z + 1/p) and the polynomial
# nested as e^x's (w = t a5, then w = w t and w = fma(a, t, w)), so that the C and RVV forms
# (codegen/c.py, kernels/math/vgelu.py) give the same bits.
GELU_P = 0.3275911
GELU_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)   # a1 .. a5
C_GELU_INV_P = flt(1.0 / GELU_P)
C_SQRT_HALF = flt(0.70710678)   # erf's argument scale, z = |x| / sqrt 2
C_GELU_A = tuple(lit(a) for a in GELU_A)


def c_gelu() -> str:
    """The scalar C helper rvk_geluf, in the steps of the RVV form (kernels/math/vgelu.py)."""
    terms = "\n".join(f"    w = w * t;\n    w = fmaf({a}, t, w);"
                      for a in reversed(C_GELU_A[:-1]))
    return f"""
/* GELU, x Phi(x) = max(x, 0) - |x|/2 erfc(|x|/sqrt2), erfc by Abramowitz-Stegun 7.1.26 in the
 * RVV form's steps (rvvkit/codegen/expmath.py), so both give the same bits: erf to within
 * 1.5e-7 absolute, so GELU to within 1e-7 |x| plus a few ulp; libm's erff is a call per
 * element. */
static RVK_UNUSED RVK_HD inline float rvk_geluf(float x) {{
    const float ax = fabsf(x);
    const float a = ax > 10.0f ? 10.0f : ax;   /* erfc(10/sqrt2) < 1e-22: keeps inf * 0 out */
    const float z = a * {C_SQRT_HALF};
    const float t = {C_GELU_INV_P} / (z + {C_GELU_INV_P});
    float w = t * {C_GELU_A[-1]};
{terms}
    const float q = w * rvk_expf(-z * z);
    return fmaf(-(0.5f * a), q, x > 0.0f ? x : 0.0f);
}}
"""
