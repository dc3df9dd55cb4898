"""IEEE binary16 (ONNX float16) <-> float32 in C, for every dialect: the one place that knows
the format. Kernels hold float16 tensors as their bits (rvk_half, a uint16_t): C and C++ have
no portable half type, and RVV's half conversions need Zvfh/Zvfhmin, which QEMU 7.2 and most
boards lack. Both helpers are integer code with one rounding rule (to nearest, ties to even,
as ONNX Cast and numpy's astype round), so every executor gives the same bits; they are "hd_"
helpers, defined once per unit and shared with the CUDA dialect. An RVV vector form of the
widening (exact, so it agrees with rvk_h2f) serves kernels that read float16 in bulk."""
from __future__ import annotations

from .rvv import GUARD

H2F = """\
static RVK_UNUSED RVK_HD inline float rvk_h2f(rvk_half h) {
    /* half's exponent and mantissa placed in float's fields, then scaled by 2^112: the
     * rebias for normals, and the exact value of subnormals (m * 2^-24); infinity and NaN
     * get float's all-ones exponent instead */
    const uint32_t em = (uint32_t)(h & 0x7fffu);
    const uint32_t scale_bits = 0x77800000u;    /* 2^112 */
    uint32_t bits = em << 13;
    float f, scale;
    memcpy(&f, &bits, sizeof f);
    memcpy(&scale, &scale_bits, sizeof scale);
    f = f * scale;
    memcpy(&bits, &f, sizeof bits);
    bits = em >= 0x7c00u ? 0x7f800000u | (em << 13) : bits;
    bits |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &bits, sizeof f);
    return f;
}"""

F2H = """\
static RVK_UNUSED RVK_HD inline rvk_half rvk_f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)                      /* NaN: stays a (quiet) NaN */
        return (rvk_half)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u)                     /* >= 65520 rounds past 65504: infinity */
        return (rvk_half)(sign | 0x7c00u);
    if (a < 0x38800000u) {                    /* below 2^-14: a subnormal half, or zero */
        const uint32_t e = a >> 23;
        if (e < 102u)                         /* below 2^-25: rounds to zero */
            return (rvk_half)sign;
        const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;   /* 14..24 */
        const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        return (rvk_half)(sign | (q + (rem > half || (rem == half && (q & 1u)))));
    }
    uint32_t r = a - 0x38000000u;             /* exponent rebias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);           /* to nearest even; a carry bumps the exponent */
    return (rvk_half)(sign | (r >> 13));
}"""

# support-helper entries (kernel.support keys), named as the C functions
TO_FLOAT = {"hd_rvk_h2f": H2F}
FROM_FLOAT = {"hd_rvk_f2h": F2H}

# RVV (f32m4): finite float16 patterns in u32 lanes -> float32 without Zvfh, as rvk_h2f does:
# exponent and mantissa moved into float's fields and scaled by 2^112 (the rebias for normals,
# the exact value of zero and subnormals), then the sign
TO_FLOAT_RVV = {"rvk_h2f_v": GUARD + """
static inline vfloat32m4_t rvk_h2f_v(vuint32m4_t h, size_t vl) {
    const vuint32m4_t sign =
        __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(h, 0x8000u, vl), 16, vl);
    const vfloat32m4_t mag = __riscv_vreinterpret_v_u32m4_f32m4(
        __riscv_vsll_vx_u32m4(__riscv_vand_vx_u32m4(h, 0x7fffu, vl), 13, vl));
    const vuint32m4_t wide = __riscv_vreinterpret_v_f32m4_u32m4(
        __riscv_vfmul_vf_f32m4(mag, 5.192296858534828e33f, vl));   /* 2^112 */
    return __riscv_vreinterpret_v_u32m4_f32m4(__riscv_vor_vv_u32m4(wide, sign, vl));
}
#endif"""}
