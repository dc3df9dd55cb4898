"""The float16 GEMM of the float16 conv forms (half.py, and Winograd's 36 GEMMs): OUT[m][cols]
= W[m][k] . X[k][cols] with float16 weights and a float16 operand `xh` (k rows of `cols`), float32
accumulators (LMUL 4) fed by `vfwmacc.vf` (LMUL 2 operands), in one of two orientations:

  normal      vectors along cols (output positions), R panel rows of weights as scalars; the
              weights are stored as panels [m / R][k][R] (zero padded);
  transposed  vectors along m (output channels), R columns of X as scalars; the weights are
              stored [k][m]. For few columns (a 7x7 map, Winograd's 16 tiles of a 13x13 map),
              where a strip along cols would leave most lanes empty.

Registers: R accumulators of 4 plus the vector operand's 2: R <= 7 of 32. A kernel is built
for any VLEN; the orientation is chosen for the build's VLEN (--vlen), else for 256 (the K1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...cfmt import indent
from ...loops import cdiv
from ..gemm.rvv_lmul import target_vlen

FP16_GUARD = "#if defined(__riscv_v_intrinsic) && defined(__riscv_zvfh)"
MAX_ROWS = 7
HALF_MAX = 65504.0          # the largest finite float16
DEFAULT_VLEN = 256


def rows_for(n: int) -> int:
    """Rows per panel for n rows: the fewest padded rows, then the most rows per panel."""
    return min(range(4, MAX_ROWS + 1), key=lambda r: (cdiv(n, r) * r, -r))


def _clamped(w2: np.ndarray) -> np.ndarray:
    """A weight beyond float16's range is clamped to +-65504, not made infinite."""
    return np.clip(np.asarray(w2, np.float32), -HALF_MAX, HALF_MAX)


@dataclass(frozen=True)
class HalfGemm:
    m: int
    k: int
    cols: int
    trans: bool

    @property
    def rows(self) -> int:
        return rows_for(self.cols if self.trans else self.m)

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

    def loops(self, store: Callable[[int], str]) -> str:
        """C over `wp` (weights), `xh` (operand) and `vmax` (VLMAX at e16m2); store(i) finishes
        accumulator c<i>: normal, output channel m0 + i over positions [j, j + vl);
        transposed, position t0 + i over channels [m0, m0 + vl)."""
        return (self._trans if self.trans else self._normal)(store)

    def _rows(self, store, first_idx: str, total: int) -> str:
        r = self.rows
        out = []
        for i in range(r):
            st = store(i)
            full = i < total % r or total % r == 0
            out.append(st if full else f"if ({first_idx} + {i} < {total}) {st}")
        return "\n".join(out)

    def _normal(self, store) -> str:
        m, k, cols, r = self.m, self.k, self.cols, self.rows
        first = "\n".join(f"vfloat32m4_t c{i} = __riscv_vfwmul_vf_f32m4(xv, wm[{i}], vl);"
                          for i in range(r))
        step = "\n".join(f"c{i} = __riscv_vfwmacc_vf_f32m4(c{i}, wk[{i}], xv, vl);"
                         for i in range(r))
        return f"""for (int m0 = 0; m0 < {m}; m0 += {r}) {{
    const _Float16 *__restrict wm = wp + (ptrdiff_t)m0 * {k};
    for (size_t j = 0, vl; j < {cols}; j += vl) {{
        /* vl in scalar code: clang 16's vsetvl intrinsic would re-issue vsetvli in the k loop */
        vl = {cols} - j < vmax ? {cols} - j : vmax;
        const _Float16 *__restrict xk = xh + j;
        vfloat16m2_t xv = __riscv_vle16_v_f16m2(xk, vl);
{indent(first, 2)}
        for (const _Float16 *__restrict wk = wm + {r}; wk != wm + {k * r}; wk += {r}) {{
            xk += {cols};
            xv = __riscv_vle16_v_f16m2(xk, vl);
{indent(step, 3)}
        }}
{indent(self._rows(store, "m0", m), 2)}
    }}
}}"""

    def _trans(self, store) -> str:
        m, k, cols, r = self.m, self.k, self.cols, self.rows
        first = "\n".join(f"vfloat32m4_t c{i} = __riscv_vfwmul_vf_f32m4(wv, xk[{i}], vl);"
                          for i in range(r))
        step = "\n".join(f"c{i} = __riscv_vfwmacc_vf_f32m4(c{i}, xk[{i}], wv, vl);"
                         for i in range(r))
        return f"""for (size_t m0 = 0, vl; m0 < {m}; m0 += vl) {{
    vl = {m} - m0 < vmax ? {m} - m0 : vmax;
    for (int t0 = 0; t0 < {cols}; t0 += {r}) {{
        /* the last group may read up to {r - 1} columns past the operand (padded; unused) */
        const _Float16 *__restrict xk = xh + t0;
        const _Float16 *__restrict wk = wp + m0;
        vfloat16m2_t wv = __riscv_vle16_v_f16m2(wk, vl);
{indent(first, 2)}
        for (const _Float16 *const wend = wp + m0 + (ptrdiff_t){k * m}; wk + {m} != wend;) {{
            wk += {m};
            xk += {cols};
            wv = __riscv_vle16_v_f16m2(wk, vl);
{indent(step, 3)}
        }}
{indent(self._rows(store, "t0", cols), 2)}
    }}
}}"""


def plan(m: int, k: int, cols: int) -> HalfGemm:
    """The orientation that leaves fewer lanes and rows empty at the build's VLEN."""
    lanes = (target_vlen() or DEFAULT_VLEN) * 2 // 16
    rn, rt = rows_for(m), rows_for(cols)
    normal = cdiv(m, rn) * rn * cdiv(cols, lanes) * lanes
    trans = cdiv(cols, rt) * rt * cdiv(m, lanes) * lanes
    return HalfGemm(m, k, cols, trans < 0.9 * normal)


def operand_halves(g: HalfGemm) -> int:
    """Halves of the operand buffer: k x cols, plus the transposed form's overread."""
    return g.k * g.cols + (g.rows if g.trans else 0)


def to_half(n_elems: int, src: str = "xn") -> str:
    """C: n_elems floats at `src` to float16 in xh."""
    return f"""for (size_t i = 0, vl; i < {n_elems}; i += vl) {{
    vl = __riscv_vsetvl_e32m8({n_elems} - i);
    __riscv_vse16_v_f16m4(xh + i, __riscv_vfncvt_f_f_w_f16m4(
        __riscv_vle32_v_f32m8({src} + i, vl), vl), vl);
}}"""


def gemm_function(name: str, g: HalfGemm) -> str:
    """A static C function `name(wp, xn, out, xh)`: out[m][cols] = W . X for float16 weights
    `wp` (g's layout) and a float32 X[k][cols], converted first into the float16 scratch xh
    (operand_halves(g)). Defined only where Zvfh is (the callers' calls are under the same
    guard)."""
    def store(i: int) -> str:
        if g.trans:
            return (f"__riscv_vsse32_v_f32m4(out + m0 * {g.cols} + t0 + {i}, {4 * g.cols}, "
                    f"c{i}, vl);")
        return f"__riscv_vse32_v_f32m4(out + (ptrdiff_t)(m0 + {i}) * {g.cols} + j, c{i}, vl);"
    return f"""{FP16_GUARD}
static void {name}(const _Float16 *__restrict wp, const float *__restrict xn,
    float *__restrict out, _Float16 *__restrict xh) {{
{indent(to_half(g.k * g.cols))}
    const size_t vmax = __riscv_vsetvlmax_e16m2();
{indent(g.loops(store))}
}}
#endif
"""
