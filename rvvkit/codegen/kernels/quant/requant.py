"""The requantisation epilogue of the quantized kernels (qconv.py, qconv_dw.py, qmatmul.py and
the CUDA unit's forms): the int32 sum to an int8/uint8 value as onnxruntime rounds it, for one
value (rvk_requant) and one output row (rvk_requant_row), and the kernel parameters it reads."""
from __future__ import annotations

from typing import Dict, List, Tuple

from ...kernel import Param

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
