"""The float16 GEMM of the float16 conv forms (half.py, and Winograd's 36 GEMMs): OUT[m][cols]
= W[m][k] . X[k][cols] with float16 weights and a float16 operand `xh` (k rows of `cols`) into
float32 accumulators (LMUL 4), the products at LMUL 2 either summed in blocks of 8 in float16
(`vfmacc.vf` at SEW 16, each block added by `vfwadd.wv`: the convolutions) or widened one by
one (`vfwmacc.vf`: Winograd, whose transforms amplify a float16 sum's error), in one of two
orientations:

  normal      vectors along cols (output positions), R panel rows of weights as scalars; the
              weights are stored as panels [m / R][k][R] (zero padded);
  transposed  vectors along m (output channels), R columns of X as scalars; the weights are
              stored [k][m]. For few columns (a 7x7 map, Winograd's 16 tiles of a 13x13 map),
              where a strip along cols would leave most lanes empty.

Registers: R accumulators of 4 (and, in blocks, R float16 sums of 2) plus the vector operand's
2: R <= 7 (5) of 32. A kernel is built for any VLEN; the orientation is chosen for the build's
VLEN (--vlen), else for 256 (the K1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...cfmt import indent
from ...loops import cdiv
from ...rvv import FP16_GUARD
from ..gemm.rvv_lmul import target_vlen

MAX_ROWS = 7                # float32 accumulators (4 registers) + the operand (2): 7 x 4 + 2
MAX_ROWS_BLOCKED = 4        # + a float16 partial sum (2) per row: 4 x 6 + 2, room for the next operand
BLOCK = 8                   # products summed in float16 before each widening add
HALF_MAX = 65504.0          # the largest finite float16
DEFAULT_VLEN = 256


def rows_for(n: int, block: int = 0) -> int:
    """Rows per panel for n rows: the fewest padded rows, then the most rows per panel."""
    top = MAX_ROWS_BLOCKED if block else MAX_ROWS
    return min(range(4, top + 1), key=lambda r: (cdiv(n, r) * r, -r))


def _clamped(w2: np.ndarray) -> np.ndarray:
    """A weight beyond float16's range is clamped to +-65504, not made infinite."""
    return np.clip(np.asarray(w2, np.float32), -HALF_MAX, HALF_MAX)


@dataclass(frozen=True)
class HalfGemm:
    """block 0: every product widened into the float32 sums (`vfwmacc.vf`); block B: B
    products summed in float16 (`vfmacc.vf` at SEW 16, half the FP pipe's time per product on
    an X60, whose widening multiply-add costs as much as a float32 one) and each such partial
    sum added to the float32 sums (`vfwadd.wv`)."""
    m: int
    k: int
    cols: int
    trans: bool
    block: int = 0

    @property
    def rows(self) -> int:
        return rows_for(self.cols if self.trans else self.m, self.block)

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
        """The k loop: widening every product (block 0: `first` is the peeled step 0), or
        in blocks of float16 partial sums."""
        if self.block:
            return _blocked(self.k, self.block, vec, vstride, sc, sstride, self.rows, reg)
        return (f"vfloat16m2_t {reg} = __riscv_vle16_v_f16m2({vec}, vl);\n{first}\n"
                + _k_steps(self.k, vec, vstride, sc, sstride, reg, step))


def _blocked(k: int, block: int, vec: str, vstride: int, sc: str, sstride: int, r: int,
             reg: str) -> str:
    """C: the k loop in blocks of `block` products summed in float16 (h<i>), each block's sums
    then widened into the float32 sums c<i> (the first block by conversion); full blocks loop,
    the last short block is unrolled after them."""
    def one_block(n: int, first: bool) -> str:
        lines = []
        for u in range(n):
            lines.append(f"{reg} = __riscv_vle16_v_f16m2({vec} + {u * vstride}, vl);")
            for i in range(r):
                s = f"{sc}[{u * sstride + i}]"
                lines.append(f"h{i} = __riscv_vfmul_vf_f16m2({reg}, {s}, vl);" if u == 0 else
                             f"h{i} = __riscv_vfmacc_vf_f16m2(h{i}, {s}, {reg}, vl);")
        for i in range(r):
            lines.append(f"c{i} = __riscv_vfwcvt_f_f_v_f32m4(h{i}, vl);" if first else
                         f"c{i} = __riscv_vfwadd_wv_f32m4(c{i}, h{i}, vl);")
        return "\n".join(lines)
    bump = f"{vec} += {block * vstride};\n{sc} += {block * sstride};"
    full, tail = divmod(k, block)
    out = [f"vfloat16m2_t {reg}, " + ", ".join(f"h{i}" for i in range(r)) + ";",
           "vfloat32m4_t " + ", ".join(f"c{i}" for i in range(r)) + ";"]
    if full:
        out += [one_block(block, True), bump]
        if full > 1:
            end = f"{sc} + (ptrdiff_t){(full - 1) * block * sstride}"
            out.append(f"""for (const _Float16 *const end = {end}; {sc} != end;) {{
{indent(one_block(block, False))}
{indent(bump)}
}}""")
    if tail:
        out.append(one_block(tail, not full))
    return "\n".join(out)


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
    """The orientation that leaves fewer lanes and rows empty at the build's VLEN, the
    transposed one only by a margin: its outputs are stored strided, row by row (measured at
    VLEN 256: squeezenet's last layer, 8 % fewer empty lanes, gains 10 %; resnet50's 28x28
    layers, 2 % fewer, lose)."""
    lanes = _vlen() * 2 // 16
    rn, rt = rows_for(m, block), rows_for(cols, block)
    normal = cdiv(m, rn) * rn * cdiv(cols, lanes) * lanes
    trans = cdiv(cols, rt) * rt * cdiv(m, lanes) * lanes
    return HalfGemm(m, k, cols, trans < 0.95 * normal, block)


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
{indent(convert_run("xh", "xn", str(g.k * g.cols), g.k * g.cols))}
    const size_t vmax = __riscv_vsetvlmax_e16m2();
{indent(g.loops(store))}
}}
#endif
"""
