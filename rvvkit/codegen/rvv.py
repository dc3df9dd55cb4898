"""RVV 1.0 intrinsic fragments shared by the kernel emitters.

Every kernel keeps its portable C as the `#else` branch of `#if defined(__riscv_v_intrinsic)`,
so what an x86 (or GCC 12 riscv64) compiler sees is exactly the portable code. The vector
branch is VLEN-agnostic: loops are strip-mined with `__riscv_vsetvl_e32m<L>` and never read a
register element past `vl` (tail/mask-agnostic elements may be anything, QEMU's
`rvv_ta_all_1s` makes them all ones).

Only intrinsics that exist with the same name and operands in both the 0.11/0.12 APIs (clang 16
and GCC 13: __riscv_v_intrinsic 11000; GCC 14: 12000) and the 1.0 API (clang 19+, zig: 1000000) are
used, each checked with both compilers: the `__riscv_`-prefixed, non-policy, unmasked forms of
vsetvl/vsetvlmax, vle32/vse32/vlse32/vsse32, vfmv_v_f, vfmv_f_s, vfmul_vf, vfmacc_vf/vv,
vfmadd_vf, vfadd/vfsub/vfmul/vfdiv/vfmax/vfmin (vv, vf), vfrsub_vf, vfrdiv_vf, vfsqrt_v and
vfredusum/vfredmax into an m1 result. Where the APIs differ we stay away: segment loads/stores
(0.11 writes through pointer arguments, 1.0 returns tuple types such as vfloat32m1x2_t), the
rounding-mode `_rm` variants (1.0 only) and vmerge/vfmerge (their mask operand moved).

Masks serve NaN: vfmax/vfmin (and vfredmax/vfredmin) return the other operand for a NaN one
(IEEE maxNum), where onnxruntime's Relu, Clip, Max, ReduceMax... return the NaN. The shared
mask forms: compares into a mask (vmfeq/vmfne/vmflt .vv/.vf, _b<32/LMUL>), vmset_m, vcpop_m,
vfirst_m and the masked, mask-undisturbed `_mu` operations (mask, masked-off source, operands,
vl), compares included; the helpers below spell them.

Compiler quirk (clang 16): the vsetvl intrinsic yields a "ta, mu" vtype while unmasked
operations want "ta, ma", and its vsetvli insertion then re-issues a vsetvli inside loops that
follow; the GEMM micro-kernel, whose k loops follow the strip's vl, therefore computes
vl = min(n - j0, vsetvlmax) in scalar code.
"""
from __future__ import annotations

from .cfmt import indent

GUARD = "#if defined(__riscv_v_intrinsic)"
# the float16 forms (codegen/precision.py): intrinsics and Zvfh, the vector half-precision
# arithmetic (Zvfh implies Zfh's scalar _Float16 loads the kernels use)
FP16_GUARD = "#if defined(__riscv_v_intrinsic) && defined(__riscv_zvfh)"

# Support key of the header: every kernel that uses the macros or intrinsics lists it first in
# its support dict, so the emitter writes it once, before any helper that needs it.
HEADER_KEY = "0_rvk_rvv_header"


def _copy_rows_arm(L: int, src, strided: bool) -> str:
    """One LMUL's arm of the row copies: row r from src(r), row 0 before the loop."""
    def copy(r: str, dst: str) -> str:
        vle = f"__riscv_vle32_v_f32m{L}({src(r)}, vl)"
        if strided:
            vle = f"es == 1 ? {vle} : __riscv_vlse32_v_f32m{L}({src(r)}, bytes, vl)"
        return (f"{{\n    const vfloat32m{L}_t v = {vle};\n"
                f"    __riscv_vse32_v_f32m{L}({dst}, v, vl);\n}}")
    return f"""if (n <= {L} * v1) {{
        const size_t vl = n;
{indent(copy("0", "d"), 2)}
        for (size_t r = 1; r < rows; ++r) {indent(copy("r", "d + r * ds"), 2).lstrip()}
    }}"""


def _copy_rows(name: str, src_params: str, src, strided: bool) -> str:
    arms = " else ".join(_copy_rows_arm(L, src, strided) for L in (1, 2, 4))
    if strided:
        longer = f"""else if (es == 1) {{
        for (size_t r = 0; r < rows; ++r)
            rvk_vcopy(d + r * ds, {src("r")}, n);
    }} else {{
        for (size_t r = 0; r < rows; ++r)
            rvk_vcopy_strided(d + r * ds, {src("r")}, es, n);
    }}"""
    else:
        longer = f"""else {{
        for (size_t r = 0; r < rows; ++r)
            rvk_vcopy(d + r * ds, {src("r")}, n);
    }}"""
    bytes_ = "\n    const ptrdiff_t bytes = es * (ptrdiff_t)sizeof(float);" if strided else ""
    return f"""__attribute__((unused)) static inline void {name}(float *__restrict d, ptrdiff_t ds,
    const float *__restrict s, {src_params}, size_t n, size_t rows) {{
    const size_t v1 = __riscv_vsetvlmax_e32m1();{bytes_}
    if (rows == 0 || n == 0)
        return;
    {arms} {longer}
}}
"""


# A plane's rows (a depthwise conv's input into its padded plane, its output back; the k-rows
# of an im2col panel) copied with one LMUL choice: per row, rvk_vcopy's choice and call cost
# more scalar instructions than the row's load and store at 14 floats.
_COPY_ROWS = """/* rows x n floats to d (row stride ds) from s (rvk_vcopy_rows: row stride ss,
 * element stride es; rvk_vcopy_rows_at: row r at s + off[r]), rvk_vcopy's LMUL chosen once
 * for every row. vl = n (it fits the group), not vsetvl, and row 0 before the loop: else
 * clang 16 re-issues the vtype inside the row loop. */
""" + _copy_rows("rvk_vcopy_rows", "ptrdiff_t ss, ptrdiff_t es", lambda r: f"s + {r} * ss"
                 if r != "0" else "s", True) + \
    _copy_rows("rvk_vcopy_rows_at", "const int *__restrict off", lambda r: f"s + off[{r}]", False)

HEADER = """#if defined(__riscv_v_intrinsic)
#include <riscv_vector.h>
/* Vector copy/zero of whole floats (glibc's memcpy/memset are scalar on riscv64). A run that
 * fits one register group takes the smallest LMUL that holds it: the rows these copy are often
 * a few floats (a 7-wide plane row), and an m8 access costs a core eight register writes. */
__attribute__((unused)) static inline void rvk_vcopy(float *__restrict d,
                                                     const float *__restrict s, size_t n) {
    const size_t v1 = __riscv_vsetvlmax_e32m1();
    if (n <= v1) {
        const size_t vl = __riscv_vsetvl_e32m1(n);
        __riscv_vse32_v_f32m1(d, __riscv_vle32_v_f32m1(s, vl), vl);
    } else if (n <= 2 * v1) {
        const size_t vl = __riscv_vsetvl_e32m2(n);
        __riscv_vse32_v_f32m2(d, __riscv_vle32_v_f32m2(s, vl), vl);
    } else if (n <= 4 * v1) {
        const size_t vl = __riscv_vsetvl_e32m4(n);
        __riscv_vse32_v_f32m4(d, __riscv_vle32_v_f32m4(s, vl), vl);
    } else {
        for (size_t i = 0; i < n;) {
            const size_t vl = __riscv_vsetvl_e32m8(n - i);
            __riscv_vse32_v_f32m8(d + i, __riscv_vle32_v_f32m8(s + i, vl), vl);
            i += vl;
        }
    }
}
/* d[0..n) = s[0, stride, 2*stride, ...): the same fitting, by strided loads. */
__attribute__((unused)) static inline void rvk_vcopy_strided(float *__restrict d,
    const float *__restrict s, ptrdiff_t stride, size_t n) {
    const size_t v1 = __riscv_vsetvlmax_e32m1();
    const ptrdiff_t bytes = stride * (ptrdiff_t)sizeof(float);
    if (n <= v1) {
        const size_t vl = __riscv_vsetvl_e32m1(n);
        __riscv_vse32_v_f32m1(d, __riscv_vlse32_v_f32m1(s, bytes, vl), vl);
    } else if (n <= 2 * v1) {
        const size_t vl = __riscv_vsetvl_e32m2(n);
        __riscv_vse32_v_f32m2(d, __riscv_vlse32_v_f32m2(s, bytes, vl), vl);
    } else if (n <= 4 * v1) {
        const size_t vl = __riscv_vsetvl_e32m4(n);
        __riscv_vse32_v_f32m4(d, __riscv_vlse32_v_f32m4(s, bytes, vl), vl);
    } else {
        for (size_t i = 0; i < n;) {
            const size_t vl = __riscv_vsetvl_e32m8(n - i);
            __riscv_vse32_v_f32m8(d + i, __riscv_vlse32_v_f32m8(s + i * stride, bytes, vl), vl);
            i += vl;
        }
    }
}
__attribute__((unused)) static inline void rvk_vzero(float *__restrict d, size_t n) {
    const size_t v1 = __riscv_vsetvlmax_e32m1();
    if (n <= v1) {
        const size_t vl = __riscv_vsetvl_e32m1(n);
        __riscv_vse32_v_f32m1(d, __riscv_vfmv_v_f_f32m1(0.0f, vl), vl);
        return;
    }
    const vfloat32m8_t z = __riscv_vfmv_v_f_f32m8(0.0f, __riscv_vsetvlmax_e32m8());
    for (size_t i = 0; i < n;) {
        const size_t vl = __riscv_vsetvl_e32m8(n - i);
        __riscv_vse32_v_f32m8(d + i, z, vl);
        i += vl;
    }
}
""" + _COPY_ROWS + """\
#define RVK_MEMCPY(d, s, nbytes) rvk_vcopy((d), (s), (size_t)(nbytes) / sizeof(float))
#define RVK_MEMZERO(d, nbytes) rvk_vzero((d), (size_t)(nbytes) / sizeof(float))
#else
#define RVK_MEMCPY(d, s, nbytes) memcpy(d, s, nbytes)
#define RVK_MEMZERO(d, nbytes) memset(d, 0, nbytes)
#endif
"""


def header() -> dict:
    """A support dict holding just the header (merge it in first)."""
    return {HEADER_KEY: HEADER}


def vt(lmul: int) -> str:
    """The C type of an f32 vector register group."""
    return f"vfloat32m{lmul}_t"


def vop(op: str, lmul: int) -> str:
    """Intrinsic name of f32 operation `op` at LMUL, e.g. vop('vfadd_vv', 4)."""
    return f"__riscv_{op}_f32m{lmul}"


def vsetvl(lmul: int, avl: str) -> str:
    return f"__riscv_vsetvl_e32m{lmul}({avl})"


def vsetvlmax(lmul: int) -> str:
    return f"__riscv_vsetvlmax_e32m{lmul}()"


def vle(lmul: int, ptr: str, vl: str = "vl") -> str:
    return f"__riscv_vle32_v_f32m{lmul}({ptr}, {vl})"


def vlse(lmul: int, ptr: str, stride_floats, vl: str = "vl") -> str:
    """Strided load; the stride is given in floats (the intrinsic takes bytes)."""
    return f"__riscv_vlse32_v_f32m{lmul}({ptr}, (ptrdiff_t)({stride_floats}) * 4, {vl})"


def vse(lmul: int, ptr: str, val: str, vl: str = "vl") -> str:
    return f"__riscv_vse32_v_f32m{lmul}({ptr}, {val}, {vl});"


def vsse(lmul: int, ptr: str, stride_floats, val: str, vl: str = "vl") -> str:
    return f"__riscv_vsse32_v_f32m{lmul}({ptr}, (ptrdiff_t)({stride_floats}) * 4, {val}, {vl});"


def vsplat(lmul: int, scalar: str, vl: str = "vl") -> str:
    return f"__riscv_vfmv_v_f_f32m{lmul}({scalar}, {vl})"


def vbool(lmul: int) -> str:
    """The mask type that goes with f32 vectors at LMUL."""
    return f"vbool{32 // lmul}_t"


def not_nan(lmul: int, v: str, vl: str = "vl") -> str:
    """Mask of the lanes of `v` that are numbers (v == v)."""
    return f"__riscv_vmfeq_vv_f32m{lmul}_b{32 // lmul}({v}, {v}, {vl})"


def is_nan(lmul: int, v: str, vl: str = "vl") -> str:
    """Mask of the NaN lanes of `v` (v != v)."""
    return f"__riscv_vmfne_vv_f32m{lmul}_b{32 // lmul}({v}, {v}, {vl})"


def vclamp(lmul: int, v: str, lo: str, hi: str, vl: str = "vl") -> str:
    """min(max(v, lo), hi) with NaN lanes left NaN (vfmin/vfmax alone turn a NaN into a
    bound): the masked operations take masked-off lanes from `v`, and the vfmax result is NaN
    exactly where `v` is, so one compare serves both. `v` is repeated: pass a variable. The
    vfmin takes its masked-off lanes from the vfmax result (the same NaNs), not from `v`:
    with `v` it must keep `v` alive beside the result, a register copy per use (clang 16);
    the repeated vfmax is computed once."""
    m = not_nan(lmul, v, vl)
    mx = f"{vop('vfmax_vf', lmul)}_mu({m}, {v}, {v}, {lo}, {vl})"
    return f"{vop('vfmin_vf', lmul)}_mu({m}, {mx}, {mx}, {hi}, {vl})"


def all_lanes(lmul: int, vl: str = "vl") -> str:
    """An all-set mask for f32 vectors at LMUL."""
    return f"__riscv_vmset_m_b{32 // lmul}({vl})"


def keep_numbers(lmul: int, mask: str, v: str, vl: str = "vl") -> str:
    """Statement: `mask` &= the lanes where `v` is a number, in one masked compare (cleared
    lanes are masked off and stay 0). With `nan_unless`, makes a vfmax fold propagate NaN."""
    b = 32 // lmul
    return f"{mask} = __riscv_vmfeq_vv_f32m{lmul}_b{b}_mu({mask}, {mask}, {v}, {v}, {vl});"


def nan_unless(lmul: int, mask: str, v: str, vl: str = "vl") -> str:
    """`v` on the lanes of `mask` (times 1: -0.0 stays), NaN on the others."""
    return f"{vop('vfmul_vf', lmul)}_mu({mask}, {vsplat(lmul, 'NAN', vl)}, {v}, 1.0f, {vl})"


def guarded(rvv: str, portable: str) -> str:
    """`rvv` under the intrinsics guard, `portable` (unchanged) otherwise. Both are statement
    blocks; the directives sit on their own lines."""
    return f"{GUARD}\n{rvv.rstrip()}\n#else\n{portable.rstrip()}\n#endif\n"
