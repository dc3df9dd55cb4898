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

from .cfmt import flt

LO, HI = -104.0, 89.0            # e^-104 is below the smallest subnormal, e^89 above FLT_MAX
LOG2E = 1.44269504               # 1 / ln 2
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4   # ln 2 = HI + LO; HI has 9 bits, n HI exact
# e^r - 1 - r = r^2 (c0 r^5 + ... + c5) on |r| <= ln2/2, highest degree first (~1 ulp)
POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
        5.0000001201e-1)

# the same as C literals (the shortest decimal of each float32 value)
C_LO, C_HI, C_LOG2E, C_LN2_HI, C_LN2_LO = (flt(v) for v in (LO, HI, LOG2E, LN2_HI, LN2_LO))
C_POLY = tuple(flt(c) for c in POLY)


def c_expf() -> str:
    """The scalar C helper rvk_expf (RVK_HD: __host__ __device__ in the CUDA unit)."""
    terms = "\n".join(f"    w = w * r;\n    w = fmaf({c}, r, w);" for c in C_POLY[1:])
    return f"""/* e^x by the steps of rvvkit/codegen/expmath.py, shared with the x86 and RVV
 * forms so each gives the same bits: n = rint(x / ln2), r = x - n ln2 in two fused steps,
 * e^r - 1 by a degree-7 polynomial in fused steps (<= 2 ulp; tests/host/test_prelude_math.py),
 * times 2^n as two normal factors (inf above, subnormals below, as expf). Call-free, so loops
 * around it vectorise (libm's expf is a call per element). NaN in, NaN out. */
static RVK_UNUSED RVK_HD inline float rvk_expf(float x) {{
    x = x > {C_HI} ? {C_HI} : x;
    x = x < {C_LO} ? {C_LO} : x;
    const float n = rintf(x * {C_LOG2E});
    float r = fmaf(-n, {C_LN2_HI}, x);
    r = fmaf(-n, {C_LN2_LO}, r);
    float w = r * {C_POLY[0]};
{terms}
    const float y = fmaf(r, w, r) + 1.0f;
    const float t = n + 12582912.0f;        /* 1.5 * 2^23: n in t's low bits, exactly */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const int32_t ni = (int32_t)(bits - 0x4B400000u);
    const int32_t n1 = ni >> 1;             /* floor(n / 2): arithmetic shift, as vsra */
    const uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(ni - n1 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return y * s1 * s2;
}}
"""
