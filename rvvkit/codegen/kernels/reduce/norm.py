"""LRN and softmax kernels.

Under RVV intrinsics (see rvv.py): softmax uses the vector max/sum row reductions of
vreduce.py and the vector exp of math/vmath.py; LRN sums squares in registers. LRN's portable and
RVV forms both raise to -beta with square roots for beta in {0.5, 0.75, 1} (other betas keep
the scalar powf), and split its planes across threads."""
from __future__ import annotations

import math
from typing import Sequence

from ... import x86
from ...cfmt import flt, indent
from ...lanes import lane_reduce
from ...kernel import Kernel, Lowered, Param, make_spec
from ...parallel import parts_loop
from ...loops import loop
from ..math.vmath import exp_support
from . import softmax_x86
from .vreduce import reduce_rvv, vexp_sum
from ...rvv import guarded, header, vle, vop, vse, vsetvl, vsplat, vt

XY = (Param("x"), Param("y", const=False))


def _strip(var: str, n, body: str, L: int = 8) -> str:
    """A loop over var in [0, n) strip-mined by vsetvl: `body` sees var and vl."""
    return f"""for (size_t {var} = 0; {var} < {n};) {{
    const size_t vl = {vsetvl(L, f'{n} - {var}')};
{indent(body)}
    {var} += vl;
}}"""


# t^beta for the betas models use (AlexNet, GoogLeNet, ZFNet: 0.75) by square roots, which
# vectorise on every target: (portable C, RVV statements before it, RVV expression). Other
# betas keep libm's powf (a call per element) and have no RVV form.
_SQRT_T = "const vfloat32m8_t s = __riscv_vfsqrt_v_f32m8(t, vl);\n"
LRN_POW = {
    0.75: ("(sqrtf(t) * sqrtf(sqrtf(t)))", _SQRT_T,
           "__riscv_vfmul_vv_f32m8(s, __riscv_vfsqrt_v_f32m8(s, vl), vl)"),
    0.5: ("sqrtf(t)", _SQRT_T, "s"),
    1.0: ("t", "", "t"),
}


def lrn(x_shape, size: int, alpha: float, beta: float, bias: float) -> Lowered:
    """LRN, one part per (image, channel) plane: the window's sum of squares, then
    x / (bias + alpha / size * sum)^beta. Parts write disjoint planes and each sums its window
    in one fixed order, so outputs are the same for every thread count."""
    n, c = x_shape[:2]
    inner = math.prod(x_shape[2:])
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    head = f"""const long b = u / {c}, ch = u % {c};
const long j0 = ch - {lo} < 0 ? 0 : ch - {lo};
const long j1 = ch + {hi} > {c - 1} ? {c - 1} : ch + {hi};
const float *__restrict xc = x + u * {inner};
float *__restrict yc = y + u * {inner};"""
    pw = LRN_POW.get(float(beta))
    out = f"xc[i] / {pw[0]}" if pw else f"xc[i] * powf(t, {flt(-beta)})"
    code = f"""{head}
for (long i = 0; i < {inner}; ++i) ws[i] = 0.0f;
for (long j = j0; j <= j1; ++j) {{
    const float *__restrict xp = x + (b * {c} + j) * {inner};
    for (long i = 0; i < {inner}; ++i) ws[i] += xp[i] * xp[i];
}}
for (long i = 0; i < {inner}; ++i) {{
    const float t = {flt(bias)} + {flt(alpha / size)} * ws[i];
    yc[i] = {out};
}}"""
    parts, split = parts_loop("u", n * c, code, flat=True)
    spec = make_spec("lrn", x_shape=x_shape, size=size, alpha=alpha, beta=beta, bias=bias)
    split = split(n * c * inner * (size + 8))
    if pw is None:
        return Lowered(Kernel("lrn", XY, indent(parts), workspace=inner, spec=spec, split=split))
    # RVV: the window's sums of squares stay in registers
    L = 8
    strip = _strip("i", inner, f"""{vt(L)} acc = {vsplat(L, '0.0f')};
for (long j = j0; j <= j1; ++j) {{
    const {vt(L)} v = {vle(L, f'x + (b * {c} + j) * {inner} + i')};
    acc = {vop('vfmacc_vv', L)}(acc, v, v, vl);
}}
const {vt(L)} t = {vop('vfadd_vf', L)}(
    {vop('vfmul_vf', L)}(acc, {flt(alpha / size)}, vl), {flt(bias)}, vl);
{pw[1]}{vse(L, 'yc + i', vop('vfdiv_vv', L) + f"({vle(L, 'xc + i')}, {pw[2]}, vl)")}""")
    rvv = "(void)ws;\n" + parts_loop("u", n * c, f"{head}\n{strip}", flat=True)[0]
    return Lowered(Kernel("lrn", XY, guarded(indent(rvv), indent(parts)), workspace=inner,
                          support=header(), spec=spec, split=split))


def softmax_row_rvv(x: str, y: str, n: int, masked: str = "") -> str:
    """RVV statements: the softmax of row `x` (n floats) into `y`, which may be the same
    pointer (each element is read before it is written). `masked`: statements run when the
    row's maximum m is -inf, before anything is written. Needs `exp_support(4)` and the RVV
    header."""
    L = 8
    scale = vse(L, f"{y} + k", f"{vop('vfmul_vf', L)}({vle(L, f'{y} + k')}, r, vl)")
    return f"""{reduce_rvv("max", x, str(n), "-INFINITY")}
const float m = red;
{masked}{vexp_sum("s", x, n, "m", store=y)}
const float r = 1.0f / s;
{_strip("k", n, scale)}"""


def _lane_row(n: int, log: bool) -> str:
    """A contiguous row's portable softmax, its max and sum in vectorisable lanes (lanes.py):
    one running sum made a 1500-long attention row cost ~1.7 ns per element on x86. Softmax
    (not LogSoftmax) takes softmax_x86.py's row on x86."""
    last = (f"const float ls = logf(s);\nfor (long k = 0; k < {n}; ++k) yp[k] = xp[k] - m - ls;"
            if log else f"const float r = 1.0f / s;\nfor (long k = 0; k < {n}; ++k) yp[k] *= r;")
    portable = f"""const float *__restrict xp = x + o * {n};
float *__restrict yp = y + o * {n};
{lane_reduce("m", n, "xp[{k}]", init="-INFINITY", step="{acc} = {v} > {acc} ? {v} : {acc};")}
{lane_reduce("s", n, "rvk_expf(xp[{k}] - m)", stmt="" if log else "yp[{k}] = v;")}
{last}"""
    if log:
        return portable
    return x86.guarded(softmax_x86.row(f"x + o * {n}", f"y + o * {n}", n, masked_zeros=False),
                       portable)


def _strided_row(n: int, inner: int, log: bool) -> str:
    """A row of n elements `inner` apart, portable. The exponentials go to y first (a loop of
    call-free rvk_expf that compilers vectorise; libm's expf is a call per element), then are
    summed and scaled."""
    last = (f"const float ls = logf(s);\n"
            f"for (long k = 0; k < {n}; ++k) yp[k * {inner}] = xp[k * {inner}] - m - ls;"
            if log else f"const float r = 1.0f / s;\n"
            f"for (long k = 0; k < {n}; ++k) yp[k * {inner}] *= r;")
    return f"""const float *__restrict xp = x + o * {n * inner} + i;
float *__restrict yp = y + o * {n * inner} + i;
float m = -INFINITY, s = 0.0f;
for (long k = 0; k < {n}; ++k) m = xp[k * {inner}] > m ? xp[k * {inner}] : m;
for (long k = 0; k < {n}; ++k) yp[k * {inner}] = rvk_expf(xp[k * {inner}] - m);
for (long k = 0; k < {n}; ++k) s += yp[k * {inner}];
{last}"""


def softmax(shape: Sequence[int], axis: int, coerce: bool, log: bool = False) -> Lowered:
    """Softmax over one axis (or, pre-opset-13, over all axes from `axis` on)."""
    outer = math.prod(shape[:axis])
    if coerce:
        n, inner = math.prod(shape[axis:]), 1
    else:
        n, inner = shape[axis], math.prod(shape[axis + 1:])
    row = _lane_row(n, log) if inner == 1 else _strided_row(n, inner, log)
    rows, split = parts_loop("o", outer, loop("i", 0, inner, row, "long", flat=True), flat=True)
    code = indent(rows)
    name = "logsoftmax" if log else "softmax"
    spec = make_spec("softmax", shape=shape, axis=axis, coerce=coerce, log=log)
    split = split(outer * n * inner * 8)
    if inner != 1:
        return Lowered(Kernel(name, XY, code, spec=spec, split=split))
    L = 8
    body = f"""const float *__restrict xp = x + o * {n};
float *__restrict yp = y + o * {n};
"""
    if log:   # the vector exp of math/vmath.py (kernels/reduce/vreduce.py vexp_sum)
        body += f"""{reduce_rvv("max", "xp", str(n), "-INFINITY")}
const float m = red;
{vexp_sum("s", "xp", n, "m")}
const float ls = logf(s);
{_strip("k", n, f'''{vt(L)} v = {vop('vfsub_vf', L)}({vle(L, 'xp + k')}, m, vl);
{vse(L, 'yp + k', vop('vfsub_vf', L) + '(v, ls, vl)')}''')}"""
    else:
        body += softmax_row_rvv("xp", "yp", n)
    rvv = indent(parts_loop("o", outer, body, flat=True)[0])
    rows = {} if log else softmax_x86.support()
    return Lowered(Kernel(name, XY, guarded(rvv, code),
                          support={**header(), **exp_support(4), **rows}, spec=spec, split=split))
