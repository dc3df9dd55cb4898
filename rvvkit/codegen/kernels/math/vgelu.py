"""Vector GELU (erf form) for the RVV paths of the `gelu` activation row
(rvvkit/ops/activations.py), built on the vector exp of kernels/math/vmath.py.

x Phi(x) = max(x, 0) - |x|/2 erfc(|x|/sqrt 2) for either sign of x, so no sign masks are
needed; erfc(z) = t (a1 + t (a2 + ... + t a5)) e^(-z^2) with t = 1 / (1 + p z) is the
Abramowitz-Stegun 7.1.26 approximation (absolute error below 1.5e-7), which bounds the GELU
error by 1e-7 |x|."""
from __future__ import annotations

from typing import Dict

from ... import expmath
from ...rvv import GUARD, vclamp
from .vmath import exp_name, exp_support


def gelu_name(m: int) -> str:
    return f"rvk_vgelu_f32m{m}"


def gelu_support(m: int) -> Dict[str, str]:
    """The steps of codegen/expmath.py's C helper rvk_geluf, one intrinsic each, so both give
    the same bits: |x| capped at 10 (a NaN stays NaN), t = (1/p) / (z + 1/p), the polynomial
    nested in vfmul and vfmacc.vf, and max(x, 0) - (|x|/2) q in one vfnmsac."""
    f = f"f32m{m}"
    v = f"vfloat32m{m}_t"
    inv_p = expmath.C_GELU_INV_P
    terms = "\n".join(f"    w = __riscv_vfmul_vv_{f}(w, t, vl);\n"
                      f"    w = __riscv_vfmacc_vf_{f}(w, {c}, t, vl);"
                      for c in reversed(expmath.C_GELU_A[:-1]))
    text = f"""{GUARD}
/* GELU, x Phi(x), on a vector: max(x, 0) - |x|/2 erfc(|x|/sqrt2) (kernels/math/vgelu.py). */
__attribute__((unused)) static inline {v} {gelu_name(m)}({v} x, size_t vl) {{
    {v} a = __riscv_vfmax_vv_{f}(x, __riscv_vfmul_vf_{f}(x, -1.0f, vl), vl);
    a = {vclamp(m, "a", "0.0f", "10.0f")};
    const {v} z = __riscv_vfmul_vf_{f}(a, {expmath.C_SQRT_HALF}, vl);
    const {v} t = __riscv_vfrdiv_vf_{f}(__riscv_vfadd_vf_{f}(z, {inv_p}, vl), {inv_p}, vl);
    {v} w = __riscv_vfmul_vf_{f}(t, {expmath.C_GELU_A[-1]}, vl);
{terms}
    const {v} nz2 = __riscv_vfmul_vf_{f}(__riscv_vfmul_vv_{f}(z, z, vl), -1.0f, vl);
    const {v} q = __riscv_vfmul_vv_{f}(w, {exp_name(m)}(nz2, vl), vl);
    return __riscv_vfnmsac_vv_{f}(__riscv_vfmax_vf_{f}(x, 0.0f, vl),
                                  __riscv_vfmul_vf_{f}(a, 0.5f, vl), q, vl);
}}
#endif"""
    return {**exp_support(m), f"2_{gelu_name(m)}": text}
