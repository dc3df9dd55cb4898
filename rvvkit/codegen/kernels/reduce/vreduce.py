"""RVV statements reducing one row of floats to a scalar, shared by the reductions
(reductions.py), softmax and LRN (norm.py) and global pooling (pool.py): the max or the sum
(reduce_rvv), and the sum of exponentials with the vector exp of math/vmath.py (vexp_sum)."""
from __future__ import annotations

from ...rvv import all_lanes, is_nan, keep_numbers, vbool, vle, vop, vsetvl, vsetvlmax, vsplat, vt


def reduce_rvv(kind: str, ptr: str, n: str, init: str, L: int = 8, nan: bool = False) -> str:
    """Statements leaving in `red` the max or sum of ptr[0..n): whole VLMAX chunks accumulate
    in a vector (every element defined), the reduction then takes the remainder's elements.
    `nan` (max): a NaN element makes `red` NaN; vfmax/vfredmax alone drop NaNs (IEEE maxNum),
    which softmax can afford (e^(NaN - m) is NaN anyway) and max pooling cannot. The NaN lanes
    of the whole chunks leave the mask `ok` (all vm lanes defined), the remainder's are tested
    on their own (a mask's lanes past vl are agnostic)."""
    acc, red = ("vfmax_vv", "vfredmax") if kind == "max" else ("vfadd_vv", "vfredusum")
    track = nan and kind == "max"
    b = 32 // L
    if track:
        decl = f"{vbool(L)} ok = {all_lanes(L, 'vm')};\nint tail_nan = 0;\n"
        step = f"""for (; i + vm <= (size_t)({n}); i += vm) {{
    const {vt(L)} t = {vle(L, f'{ptr} + i', 'vm')};
    {keep_numbers(L, 'ok', 't', 'vm')}
    vacc = {vop(acc, L)}(vacc, t, vm);
}}"""
        tail = (f"const {vt(L)} t = {vle(L, f'{ptr} + i')};\n"
                f"    tail_nan = __riscv_vfirst_m_b{b}({is_nan(L, 't')}, vl) >= 0;\n"
                f"    r1 = __riscv_{red}_vs_f32m{L}_f32m1(t, r1, vl);")
        fin = (f"float red = __riscv_vfmv_f_s_f32m1_f32(r1);\n"
               f"if (tail_nan || __riscv_vcpop_m_b{b}(ok, vm) != vm) red = NAN;")
    else:
        decl = ""
        step = f"""for (; i + vm <= (size_t)({n}); i += vm)
    vacc = {vop(acc, L)}(vacc, {vle(L, f'{ptr} + i', 'vm')}, vm);"""
        tail = f"r1 = __riscv_{red}_vs_f32m{L}_f32m1({vle(L, f'{ptr} + i')}, r1, vl);"
        fin = "const float red = __riscv_vfmv_f_s_f32m1_f32(r1);"
    return f"""const size_t vm = {vsetvlmax(L)};
{vt(L)} vacc = {vsplat(L, init, 'vm')};
{decl}size_t i = 0;
{step}
vfloat32m1_t r1 = __riscv_vfmv_v_f_f32m1({init}, 1);
r1 = __riscv_{red}_vs_f32m{L}_f32m1(vacc, r1, vm);
if (i < (size_t)({n})) {{
    const size_t vl = {vsetvl(L, f'(size_t)({n}) - i')};
    {tail}
}}
{fin}"""


def vexp_sum(out: str, ptr: str, n: int, m: str, store: str = "") -> str:
    """RVV statements declaring float `out` = sum of e^(ptr[k] - m) over [0, n), with the
    vector exp of kernels/math/vmath.py (LMUL 4: its temporaries need the registers); `store`: a
    pointer that also receives each e^(ptr[k] - m). Needs `exp_support(4)`."""
    e = (f"rvk_vexp_f32m4(__riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4({ptr} + k, vl), {m}, "
         "vl), vl)")
    st = f"\n        __riscv_vse32_v_f32m4({store} + k, e, vl);" if store else ""
    return f"""float {out};
{{
    const size_t vm = __riscv_vsetvlmax_e32m4();
    vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vm);
    size_t k = 0;
    for (; k + vm <= (size_t){n}; k += vm) {{
        const size_t vl = vm;
        const vfloat32m4_t e = {e};{st}
        acc = __riscv_vfadd_vv_f32m4(acc, e, vl);
    }}
    vfloat32m1_t r1 = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    r1 = __riscv_vfredusum_vs_f32m4_f32m1(acc, r1, vm);
    if (k < (size_t){n}) {{
        const size_t vl = __riscv_vsetvl_e32m4((size_t){n} - k);
        const vfloat32m4_t e = {e};{st}
        r1 = __riscv_vfredusum_vs_f32m4_f32m1(e, r1, vl);
    }}
    {out} = __riscv_vfmv_f_s_f32m1_f32(r1);
}}"""
