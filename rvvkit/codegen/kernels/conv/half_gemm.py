"""The float16 GEMM of the float16 conv forms (half.py, and Winograd's 36 GEMMs): OUT[m][cols]
= W[m][k] . X[k][cols] with float16 weights and a float16 operand `xh` (k rows of `cols`) into
float32 sums, in one of two forms:

  staged      (block > 0, the convolutions) products summed in float16 (`vfmacc.vf` at SEW 16,
              LMUL 2 or 4) for `block` steps, each such sum then added to float32 sums kept in
              the output (half_staged.py);
  widened     (block 0, Winograd, whose transforms amplify a float16 sum's error) every product
              widened into float32 accumulators at LMUL 4 (`vfwmacc.vf`), R <= 7 rows;

and in one of two orientations:

  normal      vectors along cols (output positions), R panel rows of weights as scalars; the
              weights are stored as panels [m / R][k][R] (zero padded);
  transposed  vectors along m (output channels), R columns of X as scalars; the weights are
              stored [k][m]. For few columns (a 7x7 map, Winograd's 16 tiles of a 13x13 map),
              where a strip along cols would leave most lanes empty.

A kernel is built for any VLEN; the orientation, LMUL and rows are chosen for the build's VLEN
(--vlen), else for 256 (the K1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...cfmt import indent
from ...loops import cdiv
from ...rvv import FP16_GUARD
from ..gemm.rvv_lmul import target_vlen
from . import half_staged

MAX_ROWS = 7                # widened: float32 accumulators (4 registers) + the operand (2)
BLOCK = half_staged.STAGE   # staged: products summed in float16 before the float32 sums
HALF_MAX = 65504.0          # the largest finite float16
DEFAULT_VLEN = 256


def rows_for(n: int) -> int:
    """Rows per panel of the widened form for n rows: the fewest padded rows, then the most
    rows per panel."""
    return min(range(4, MAX_ROWS + 1), key=lambda r: (cdiv(n, r) * r, -r))


def _clamped(w2: np.ndarray) -> np.ndarray:
    """A weight beyond float16's range is clamped to +-65504, not made infinite."""
    return np.clip(np.asarray(w2, np.float32), -HALF_MAX, HALF_MAX)


@dataclass(frozen=True)
class HalfGemm:
    """block 0: the widened form (every product `vfwmacc.vf` into float32 registers, LMUL 2
    operands); block B: the staged form (half_staged.py) at LMUL `lmul` with `r` rows per
    panel (chosen by plan)."""
    m: int
    k: int
    cols: int
    trans: bool
    block: int = 0
    lmul: int = 2
    r: int = 0

    @property
    def rows(self) -> int:
        return self.r or rows_for(self.cols if self.trans else self.m)

    @property
    def stage(self) -> int:
        return self.block

    @property
    def weight_halves(self) -> int:
        return self.k * self.m if self.trans else cdiv(self.m, self.rows) * self.rows * self.k

    def pack(self, w2: np.ndarray) -> np.ndarray:
        """(m, k) float weights -> this orientation's float16 layout (flat)."""
        w2 = _clamped(w2).reshape(self.m, self.k)
        if self.trans:
            return np.ascontiguousarray(w2.T).astype(np.float16).reshape(-1)
        r = self.rows
        wt = np.zeros((cdiv(self.m, r) * r, self.k), np.float32)
        wt[:self.m] = w2
        return np.ascontiguousarray(wt.reshape(-1, r, self.k).transpose(0, 2, 1)
                                    ).astype(np.float16).reshape(-1)

    def loops(self, store: Callable[[int], str], out: str = "out", scratch: str = "") -> str:
        """C over `wp` (weights), `xh` (operand), `vmax` (vmax_decl) and the float output
        `out` [m][cols] (and `scratch`, scratch_floats: the staged transposed form's); store(i)
        finishes accumulator c<i> (vfloat32m<2·lmul>_t): normal, output channel m0 + i over
        positions [j, j + vl); transposed, position t0 + i over channels [m0, m0 + vl)."""
        if self.block:
            return half_staged.loops(self, store, out, scratch)
        return (self._trans if self.trans else self._normal)(store)

    def vmax_decl(self) -> str:
        return (half_staged.vmax_decl(self) if self.block else
                "const size_t vmax = __riscv_vsetvlmax_e16m2();")

    @property
    def scratch_floats(self) -> int:
        return half_staged.scratch_floats(self) if self.block else 0

    @property
    def acc_lmul(self) -> int:
        return 2 * self.lmul

    def _rows(self, store, first_idx: str, total: int) -> str:
        return "\n".join(half_staged.guarded(store(i), i, first_idx, total, self.rows)
                         for i in range(self.rows))

    def _normal(self, store) -> str:
        m, k, cols, r = self.m, self.k, self.cols, self.rows
        first = "\n".join(f"vfloat32m4_t c{i} = __riscv_vfwmul_vf_f32m4(xv, wm[{i}], vl);"
                          for i in range(r))

        def step(at: str) -> str:
            return "\n".join(f"c{i} = __riscv_vfwmacc_vf_f32m4(c{i}, wk[{at}{i}], xv, vl);"
                             for i in range(r))
        return f"""for (int m0 = 0; m0 < {m}; m0 += {r}) {{
    const _Float16 *__restrict wm = wp + (ptrdiff_t)m0 * {k};
    for (size_t j = 0, vl; j < {cols}; j += vl) {{
        /* vl in scalar code: clang 16's vsetvl intrinsic would re-issue vsetvli in the k loop */
        vl = {cols} - j < vmax ? {cols} - j : vmax;
        const _Float16 *__restrict xk = xh + j, *__restrict wk = wm;
{indent(self._k_loop(first, step, "xk", cols, "wk", r, "xv"), 2)}
{indent(self._rows(store, "m0", m), 2)}
    }}
}}"""

    def _trans(self, store) -> str:
        m, cols, r = self.m, self.cols, self.rows
        first = "\n".join(f"vfloat32m4_t c{i} = __riscv_vfwmul_vf_f32m4(wv, xk[{i}], vl);"
                          for i in range(r))

        def step(at: str) -> str:
            return "\n".join(f"c{i} = __riscv_vfwmacc_vf_f32m4(c{i}, xk[{at}{i}], wv, vl);"
                             for i in range(r))
        return f"""for (size_t m0 = 0, vl; m0 < {m}; m0 += vl) {{
    vl = {m} - m0 < vmax ? {m} - m0 : vmax;
    for (int t0 = 0; t0 < {cols}; t0 += {r}) {{
        /* the last group may read up to {r - 1} columns past the operand (padded; unused) */
        const _Float16 *__restrict xk = xh + t0;
        const _Float16 *__restrict wk = wp + m0;
{indent(self._k_loop(first, step, "wk", m, "xk", cols, "wv"), 2)}
{indent(self._rows(store, "t0", cols), 2)}
    }}
}}"""


    def _k_loop(self, first: str, step, vec: str, vstride: int, sc: str, sstride: int,
                reg: str) -> str:
        """The widened form's k loop (`first` is the peeled step 0)."""
        return (f"vfloat16m2_t {reg} = __riscv_vle16_v_f16m2({vec}, vl);\n{first}\n"
                + _k_steps(self.k, vec, vstride, sc, sstride, reg, step))


def _k_steps(k: int, vec: str, vstride: int, sc: str, sstride: int, reg: str, step) -> str:
    """C: steps 1..k-1 of the k loop (step 0 is peeled), two per iteration: the vector operand
    of step u at vec + u * vstride, the scalars at sc[u * sstride + i]; the pointers move once
    per pair (two pointer bumps and a branch per two steps instead of per step)."""
    pairs, odd = divmod(k - 1, 2)

    def one(u: int) -> str:
        return (f"{reg} = __riscv_vle16_v_f16m2({vec} + {u * vstride}, vl);\n"
                + step(f"{u * sstride} + "))
    out = []
    if pairs:
        end = f"{sc} + (ptrdiff_t){2 * pairs * sstride}"
        out.append(f"""for (const _Float16 *const end = {end}; {sc} != end;) {{
{indent(one(1))}
{indent(one(2))}
    {vec} += {2 * vstride};
    {sc} += {2 * sstride};
}}""")
    if odd:
        out.append(one(1))
    return "\n".join(out)


def _vlen() -> int:
    """The VLEN layouts are chosen for: the build's (--vlen), else the K1's."""
    return target_vlen() or DEFAULT_VLEN


def plan(m: int, k: int, cols: int, block: int = BLOCK) -> HalfGemm:
    """The form for a GEMM: widened (block 0) or staged, its orientation, LMUL and rows by
    the fewest instructions at the build's VLEN (empty lanes and padded rows count as work),
    the transposed orientation only by a margin: its results are stored strided (measured
    with the blocks of 8 that preceded the staged form, at VLEN 256: squeezenet's last layer,
    8 % fewer empty lanes, gained 10 %; resnet50's 28x28 layers, 2 % fewer, lost)."""
    if not block:
        lanes = _vlen() * 2 // 16
        rn, rt = rows_for(m), rows_for(cols)
        normal = cdiv(m, rn) * rn * cdiv(cols, lanes) * lanes
        trans = cdiv(cols, rt) * rt * cdiv(m, lanes) * lanes
        return HalfGemm(m, k, cols, trans < 0.95 * normal)

    def cost(g: HalfGemm) -> float:
        vec, sc = (m, cols) if g.trans else (cols, m)
        strips = cdiv(vec, _vlen() * g.lmul // 16)
        return (strips * cdiv(sc, g.r) * half_staged.step_cost(g.r, g.lmul, k, block)
                * (1.05 if g.trans else 1.0))
    forms = [HalfGemm(m, k, cols, trans, block, lmul, r) for trans in (False, True)
             for lmul, top in half_staged.MAX_ROWS.items() for r in range(2, top + 1)]
    return min(forms, key=cost)


def operand_halves(g: HalfGemm) -> int:
    """Halves of the operand buffer: k x cols, plus the transposed form's overread."""
    return g.k * g.cols + (g.rows if g.trans else 0)


_F16_OF = {1: "mf2", 2: "m1", 4: "m2", 8: "m4"}   # float16 LMUL of a float32 LMUL


def convert_run(dst: str, src: str, n: str, longest: int, stride: int = 1) -> str:
    """C: n floats from `src` (every `stride`-th) to float16 at `dst`, strip-mined at the
    smallest LMUL whose register group holds `longest` floats at the build's VLEN (a row of 7
    at LMUL 8 would cost eight registers' work for one register's elements)."""
    per_reg = _vlen() // 32
    L = next((l for l in (1, 2, 4) if l * per_reg >= longest), 8)
    h = _F16_OF[L]
    load = (f"__riscv_vle32_v_f32m{L}({src} + j, vl)" if stride == 1 else
            f"__riscv_vlse32_v_f32m{L}({src} + j * {stride}, {4 * stride}, vl)")
    return f"""for (size_t j = 0, vl; j < (size_t)({n}); j += vl) {{
    vl = __riscv_vsetvl_e32m{L}((size_t)({n}) - j);
    __riscv_vse16_v_f16{h}({dst} + j, __riscv_vfncvt_f_f_w_f16{h}({load}, vl), vl);
}}"""


def operand_floats(g: HalfGemm) -> int:
    """Floats the float16 operand takes (rounded up): where a float scratch after it starts."""
    return cdiv(operand_halves(g), 2)


def scratch_halves(g: HalfGemm) -> int:
    """Halves of scratch gemm_function takes: the operand, then (float-aligned) the staged
    transposed form's float32 sums."""
    return 2 * (operand_floats(g) + g.scratch_floats)


def gemm_function(name: str, g: HalfGemm) -> str:
    """A static C function `name(wp, xn, out, xh)`: out[m][cols] = W . X for float16 weights
    `wp` (g's layout) and a float32 X[k][cols], converted first into the float16 scratch xh
    (scratch_halves(g)). Defined only where Zvfh is (the callers' calls are under the same
    guard)."""
    a = g.acc_lmul

    def store(i: int) -> str:
        if g.trans:
            return (f"__riscv_vsse32_v_f32m{a}(out + m0 * {g.cols} + t0 + {i}, {4 * g.cols}, "
                    f"c{i}, vl);")
        return f"__riscv_vse32_v_f32m{a}(out + (ptrdiff_t)(m0 + {i}) * {g.cols} + j, c{i}, vl);"
    scratch = (f"    float *__restrict acc_ws = (float *)xh + {operand_floats(g)};\n"
               if g.scratch_floats else "")
    return f"""{FP16_GUARD}
static void {name}(const _Float16 *__restrict wp, const float *__restrict xn,
    float *__restrict out, _Float16 *__restrict xh) {{
{indent(convert_run("xh", "xn", str(g.k * g.cols), g.k * g.cols))}
{scratch}    {g.vmax_decl()}
{indent(g.loops(store, "out", "acc_ws"))}
}}
#endif
"""
