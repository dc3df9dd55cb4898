"""Vector GELU (erf form) for the RVV paths of the `gelu` activation row
(rvvkit/ops/activations.py), built on the vector exp of kernels/math/vmath.py.

x Phi(x) = max(x, 0) - |x|/2 erfc(|x|/sqrt 2) for either sign of x, so no sign masks are
needed; erfc(z) = t (a1 + t (a2 + ... + t a5)) e^(-z^2) with t = 1 / (1 + p z) is the
Abramowitz-Stegun 7.1.26 approximation (absolute error below 1.5e-7), which bounds the GELU
error by 1e-7 |x|."""
from __future__ import annotations

from typing import Dict

from ...rvv import GUARD
from .vmath import exp_name, exp_support

P = "0.3275911f"
A = ("0.254829592f", "-0.284496736f", "1.421413741f", "-1.453152027f", "1.061405429f")


def gelu_name(m: int) -> str:
    return f"rvk_vgelu_f32m{m}"


def gelu_support(m: int) -> Dict[str, str]:
    f = f"f32m{m}"
    v = f"vfloat32m{m}_t"
    horner = "\n".join(
        f"    p = __riscv_vfadd_vf_{f}(__riscv_vfmul_vv_{f}(p, t, vl), {c}, vl);"
        for c in reversed(A[:-1]))
    text = f"""{GUARD}
/* GELU, x Phi(x), on a vector: max(x, 0) - |x|/2 erfc(|x|/sqrt2) (kernels/math/vgelu.py). */
__attribute__((unused)) static inline {v} {gelu_name(m)}({v} x, size_t vl) {{
    const {v} a = __riscv_vfmax_vv_{f}(x, __riscv_vfmul_vf_{f}(x, -1.0f, vl), vl);
    const {v} z = __riscv_vfmul_vf_{f}(a, 0.70710678f, vl);
    const {v} t = __riscv_vfrdiv_vf_{f}(
        __riscv_vfadd_vf_{f}(__riscv_vfmul_vf_{f}(z, {P}, vl), 1.0f, vl), 1.0f, vl);
    {v} p = __riscv_vfmv_v_f_{f}({A[-1]}, vl);
{horner}
    const {v} nz2 = __riscv_vfmul_vf_{f}(__riscv_vfmul_vv_{f}(z, z, vl), -1.0f, vl);
    const {v} e = {exp_name(m)}(nz2, vl);
    const {v} q = __riscv_vfmul_vv_{f}(__riscv_vfmul_vv_{f}(p, t, vl), e, vl);
    return __riscv_vfsub_vv_{f}(__riscv_vfmax_vf_{f}(x, 0.0f, vl),
                                __riscv_vfmul_vv_{f}(__riscv_vfmul_vf_{f}(a, 0.5f, vl), q, vl), vl);
}}
#endif"""
    return {**exp_support(m), f"2_{gelu_name(m)}": text}
