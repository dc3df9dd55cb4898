"""Vector math for the RVV paths: e^x, e^x - 1 and log on f32 register groups, as static
helpers that activation rows list as their RVV support (rvvkit/ops/activations.py
`rvv_support`), so sigmoid, tanh, exp, ELU, softplus and friends stay in registers instead of
calling scalar expf.

Method (e^x: the steps of codegen/expmath.py, which the C and x86 forms share, so all give the
same bits): x = n ln2 + r with n = round(x / ln2) (vfcvt rounds to nearest even under the
default rounding mode) and |r| <= ln2 / 2, ln2 split in two parts so r is exact to a few ulp;
e^r - 1 = r + r^2 P(r) with P of degree 5 (the classic single-precision expf polynomial, ~1 ulp
on that range; nested in one chain of vfmul and vfmacc.vf); 2^n is built in the exponent field
through an int32 reinterpretation. Only intrinsics the 0.11 and 1.0 APIs share are used
(integer vadd/vsub/vsra/vsll .vx/.vv, vfcvt between i32 and f32 with the dynamic rounding mode
(QEMU 7.2 aborts on the .rtz forms), vreinterpret i32 -> f32, vfnmsac/vfmacc). Out-of-range
inputs are clamped first with the masked clamp of rvv.py, which leaves a NaN lane NaN
(vfmin/vfmax alone would make it a bound, and e^NaN a number): the NaN then flows through the
polynomial, so sigmoid, tanh, softmax... of NaN are NaN as in onnxruntime.
"""
from __future__ import annotations

from typing import Dict

from ... import expmath
from ...rvv import GUARD, vclamp


# e^x's constants, shared with the C and x86 forms (codegen/expmath.py)
LN2_HI, LN2_LO, POLY = expmath.C_LN2_HI, expmath.C_LN2_LO, expmath.C_POLY


def _reduce(m: int, lo: str, hi: str) -> str:
    """Statements leaving n (int), r and q = e^r - 1 for x clamped to [lo, hi]."""
    f, i, log2e = f"f32m{m}", f"i32m{m}", expmath.C_LOG2E
    # e^r - 1 = r (1 + r P(r)) nested as C's fmaf and multiplies (expmath.py): one dependent
    # chain, no constant in a register group
    terms = "\n".join(f"    w = __riscv_vfmul_vv_{f}(w, r, vl);\n"
                      f"    w = __riscv_vfmacc_vf_{f}(w, {c}, r, vl);" for c in POLY[1:])
    return f"""    x = {vclamp(m, "x", lo, hi)};
    const vint32m{m}_t n = __riscv_vfcvt_x_f_v_{i}(__riscv_vfmul_vf_{f}(x, {log2e}, vl), vl);
    const vfloat32m{m}_t nf = __riscv_vfcvt_f_x_v_{f}(n, vl);
    vfloat32m{m}_t r = __riscv_vfnmsac_vf_{f}(x, {LN2_HI}, nf, vl);
    r = __riscv_vfnmsac_vf_{f}(r, {LN2_LO}, nf, vl);
    vfloat32m{m}_t w = __riscv_vfmul_vf_{f}(r, {POLY[0]}, vl);
{terms}
    const vfloat32m{m}_t q = __riscv_vfmacc_vv_{f}(r, r, w, vl);"""


def _pow2(m: int, n: str) -> str:
    """2^n as floats, for int32 n in [-126, 127]."""
    i = f"i32m{m}"
    return (f"__riscv_vreinterpret_v_{i}_f32m{m}(__riscv_vsll_vx_{i}("
            f"__riscv_vadd_vx_{i}({n}, 127, vl), 23, vl))")


def exp_name(m: int) -> str:
    return f"rvk_vexp_f32m{m}"


def expm1_name(m: int) -> str:
    return f"rvk_vexpm1_f32m{m}"


def exp_support(m: int) -> Dict[str, str]:
    """e^x over the whole float range: n in [-150, 128] is applied as two factors 2^(n/2) and
    2^(n - n/2), each a normal float, so large x overflows to inf and small x reaches the
    subnormals and zero as expf does."""
    f, i = f"f32m{m}", f"i32m{m}"
    text = f"""{GUARD}
/* e^x on a vector: range reduction, polynomial, 2^n in two factors (kernels/math/vmath.py). */
__attribute__((unused)) static inline vfloat32m{m}_t {exp_name(m)}(vfloat32m{m}_t x, size_t vl) {{
{_reduce(m, expmath.C_LO, expmath.C_HI)}
    const vint32m{m}_t n1 = __riscv_vsra_vx_{i}(n, 1, vl);
    const vint32m{m}_t n2 = __riscv_vsub_vv_{i}(n, n1, vl);
    const vfloat32m{m}_t y = __riscv_vfadd_vf_{f}(q, 1.0f, vl);
    const vfloat32m{m}_t y1 = __riscv_vfmul_vv_{f}(y, {_pow2(m, "n1")}, vl);
    return __riscv_vfmul_vv_{f}(y1, {_pow2(m, "n2")}, vl);
}}
#endif"""
    return {f"1_rvk_vexp_{m}": text}


def expm1_support(m: int) -> Dict[str, str]:
    """e^x - 1 = 2^n q + (2^n - 1), exact where it matters (n = 0 near x = 0, no cancellation);
    x is clamped to [-87, 88] (e^x - 1 is -1 to float precision below, 88 keeps 2^n finite)."""
    f = f"f32m{m}"
    text = f"""{GUARD}
/* e^x - 1 on a vector, accurate near 0 (kernels/math/vmath.py). */
__attribute__((unused)) static inline vfloat32m{m}_t {expm1_name(m)}(vfloat32m{m}_t x, size_t vl) {{
{_reduce(m, expmath.C_EXPM1_LO, expmath.C_EXPM1_HI)}
    const vfloat32m{m}_t s = {_pow2(m, "n")};
    return __riscv_vfmacc_vv_{f}(__riscv_vfsub_vf_{f}(s, 1.0f, vl), s, q, vl);
}}
#endif"""
    return {f"1_rvk_vexpm1_{m}": text}


def _helper(name: str, m: int, doc: str, body: str, needs: Dict[str, str]) -> Dict[str, str]:
    """A helper `name`(x, vl) at LMUL m whose statements `body` end in a return, after the
    helpers it calls."""
    text = f"""{GUARD}
/* {doc} (kernels/math/vmath.py) */
__attribute__((unused)) static inline vfloat32m{m}_t {name}(vfloat32m{m}_t x, size_t vl) {{
{body}
}}
#endif"""
    return {**needs, f"2_{name}": text}


def tanh_support(m: int) -> Dict[str, str]:
    f = f"f32m{m}"
    body = f"""    /* e / (e + 2) with e = e^(2x) - 1; |x| > 9 gives +-1 in float */
    x = {vclamp(m, "x", "-9.0f", "9.0f")};
    const vfloat32m{m}_t e = {expm1_name(m)}(__riscv_vfadd_vv_{f}(x, x, vl), vl);
    return __riscv_vfdiv_vv_{f}(e, __riscv_vfadd_vf_{f}(e, 2.0f, vl), vl);"""
    return _helper(f"rvk_vtanh_f32m{m}", m, "tanh on a vector", body, expm1_support(m))


def mish_support(m: int) -> Dict[str, str]:
    f = f"f32m{m}"
    body = f"""    /* x tanh(log(1 + e^x)) = x n / (n + 2), n = e^x (e^x + 2); beyond 20 it is x */
    const vfloat32m{m}_t e = {exp_name(m)}(__riscv_vfmin_vf_{f}(x, 20.0f, vl), vl);
    const vfloat32m{m}_t n = __riscv_vfmul_vv_{f}(e, __riscv_vfadd_vf_{f}(e, 2.0f, vl), vl);
    const vfloat32m{m}_t t = __riscv_vfdiv_vv_{f}(n, __riscv_vfadd_vf_{f}(n, 2.0f, vl), vl);
    return __riscv_vfmul_vv_{f}(x, t, vl);"""
    return _helper(f"rvk_vmish_f32m{m}", m, "mish on a vector", body, exp_support(m))


# log(1 + f) - f + f^2 / 2 = f^3 Q(f) on [sqrt(1/2) - 1, sqrt(2) - 1], highest degree first
LOG_POLY = tuple(expmath.lit(c) for c in (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1))


def log_support(m: int) -> Dict[str, str]:
    """log x for positive, normal, finite x only (no special values: callers keep to that):
    x = 2^k m with m in [sqrt(1/2), sqrt(2)) taken from the bits, log m = log1p(m - 1) by a
    polynomial, k ln2 added in two parts."""
    f, i = f"f32m{m}", f"i32m{m}"
    horner = "\n".join(f"    p = __riscv_vfadd_vf_{f}(__riscv_vfmul_vv_{f}(p, t, vl), {c}, vl);"
                       for c in LOG_POLY[1:])
    body = f"""    const vint32m{m}_t bits = __riscv_vreinterpret_v_f32m{m}_{i}(x);
    const vint32m{m}_t off = __riscv_vsub_vx_{i}(bits, 0x3f3504f3, vl);   /* bits of sqrt(1/2) */
    const vint32m{m}_t k = __riscv_vsra_vx_{i}(off, 23, vl);
    const vint32m{m}_t mb = __riscv_vsub_vv_{i}(bits, __riscv_vsll_vx_{i}(k, 23, vl), vl);
    const vfloat32m{m}_t mf = __riscv_vreinterpret_v_{i}_f32m{m}(mb);
    const vfloat32m{m}_t t = __riscv_vfsub_vf_{f}(mf, 1.0f, vl);
    const vfloat32m{m}_t kf = __riscv_vfcvt_f_x_v_{f}(k, vl);
    const vfloat32m{m}_t z = __riscv_vfmul_vv_{f}(t, t, vl);
    vfloat32m{m}_t p = __riscv_vfmv_v_f_{f}({LOG_POLY[0]}, vl);
{horner}
    p = __riscv_vfmul_vv_{f}(__riscv_vfmul_vv_{f}(p, t, vl), z, vl);
    p = __riscv_vfmacc_vf_{f}(p, {LN2_LO}, kf, vl);
    p = __riscv_vfmacc_vf_{f}(p, -0.5f, z, vl);
    return __riscv_vfmacc_vf_{f}(__riscv_vfadd_vv_{f}(t, p, vl), {LN2_HI}, kf, vl);"""
    return _helper(f"rvk_vlog_f32m{m}", m, "log on a vector, positive normal inputs", body, {})


def softplus_support(m: int) -> Dict[str, str]:
    f = f"f32m{m}"
    body = f"""    /* max(x, 0) + log1p(e^-|x|); log1p(t) = log(u) - ((u - 1) - t) / u, u = 1 + t,
       corrects the rounding of u (and gives t where u rounds to 1) */
    const vfloat32m{m}_t nx = __riscv_vfmul_vf_{f}(x, -1.0f, vl);
    const vfloat32m{m}_t t = {exp_name(m)}(__riscv_vfmin_vv_{f}(x, nx, vl), vl);
    const vfloat32m{m}_t u = __riscv_vfadd_vf_{f}(t, 1.0f, vl);
    const vfloat32m{m}_t c = __riscv_vfsub_vv_{f}(__riscv_vfsub_vf_{f}(u, 1.0f, vl), t, vl);
    const vfloat32m{m}_t cu = __riscv_vfdiv_vv_{f}(c, u, vl);
    const vfloat32m{m}_t l = __riscv_vfsub_vv_{f}(rvk_vlog_f32m{m}(u, vl), cu, vl);
    return __riscv_vfadd_vv_{f}(__riscv_vfmax_vf_{f}(x, 0.0f, vl), l, vl);"""
    return _helper(f"rvk_vsoftplus_f32m{m}", m, "softplus on a vector", body,
                   {**exp_support(m), **log_support(m)})
