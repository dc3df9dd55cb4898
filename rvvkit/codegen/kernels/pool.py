"""Pooling, LRN and softmax kernels.

Under RVV intrinsics (see rvv.py): 2-D pooling is vectorised along the output width over the
columns whose window lies inside the input (unit-stride loads for stride 1, strided loads
otherwise; the few border columns keep the scalar code), global pooling and softmax use vector
max/sum reductions (expf stays scalar libm), LRN sums squares in registers and raises to -beta
with square roots for beta in {0.5, 0.75, 1} (other betas keep the scalar powf)."""
from __future__ import annotations

import math
from typing import Sequence

from ..cfmt import flt
from ..kernel import Kernel, Lowered, Param, specified
from ..rvv import guarded, header, vle, vlse, vop, vse, vsetvl, vsetvlmax, vsplat, vt

XY = (Param("x"), Param("y", const=False))


def pool_terms(kind: str, h: int, w: int, kh: int, kw: int, pads, count_include_pad: bool):
    """(init, update, finish) of one output's window, shared by the C and CUDA kernels: `update`
    folds tap value `v` into `acc` (and counts taps in `cnt` for averages), `finish` is the
    output, reading the window origin (h0, w0). Average divisors follow ONNX: the window
    clipped to the padded input when padding counts, else the number of real input elements."""
    if kind == "max":
        return "-INFINITY", "acc = v > acc ? v : acc;", "acc"
    _, _, pb, pr = pads
    if count_include_pad:
        finish = (f"acc / (float)(((h0 + {kh} < {h + pb} ? h0 + {kh} : {h + pb}) - h0)"
                  f" * ((w0 + {kw} < {w + pr} ? w0 + {kw} : {w + pr}) - w0))")
    else:
        finish = "acc / (float)cnt"
    return "0.0f", "acc += v; ++cnt;", finish


@specified("pool")
def pool2d(kind: str, x_shape, y_shape, kernel, strides, pads, dilations,
           count_include_pad: bool = False) -> Lowered:
    """Max or average pooling over NCHW (divisors: see pool_terms)."""
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    pt, pl = pads[:2]
    init, update, finish = pool_terms(kind, h, w, kh, kw, pads, count_include_pad)
    count_decl = "long cnt = 0;" if kind != "max" else ""
    count_use = "(void)cnt;" if kind != "max" and count_include_pad else ""
    # One output's window, bounds-checked per tap: the whole portable kernel, and the border
    # columns of the RVV one.
    window = f"""const long w0 = ow * {sw} - {pl};
                float acc = {init};
                {count_decl}
                for (long i = 0; i < {kh}; ++i) {{
                    const long hh = h0 + i * {dh};
                    if (hh < 0 || hh >= {h}) continue;
                    for (long j = 0; j < {kw}; ++j) {{
                        const long ww = w0 + j * {dw};
                        if (ww < 0 || ww >= {w}) continue;
                        const float v = xp[hh * {w} + ww];
                        {update}
                    }}
                }}
                {count_use}
                yp[oh * {wo} + ow] = {finish};"""
    rvv = _pool2d_rvv(kind, x_shape, y_shape, kernel, strides, pads, dilations,
                      count_include_pad, init, window)
    code = f"""    for (long nc = 0; nc < {n * c}; ++nc) {{
        const float *__restrict xp = x + nc * {h * w};
        float *__restrict yp = y + nc * {ho * wo};
        for (long oh = 0; oh < {ho}; ++oh) {{
            const long h0 = oh * {sh} - {pt};
            for (long ow = 0; ow < {wo}; ++ow) {{
                {window}
            }}
        }}
    }}"""
    if rvv is None:
        return Lowered(Kernel(f"{kind}pool", XY, code))
    return Lowered(Kernel(f"{kind}pool", XY, guarded(rvv, code), support=header()))


def _pool2d_rvv(kind, x_shape, y_shape, kernel, strides, pads, dilations, cip, init, scalar):
    """RVV pooling: per output row, the interior columns [olo, ohi) (every tap inside the
    input) are strips of vl outputs; each valid window row adds kw vector loads (stride sw);
    the border columns run the scalar per-output code. None when there is no interior."""
    n, c, h, w = x_shape
    ho, wo = y_shape[2:]
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, _ = pads
    olo = -(-pl // sw)
    ohi = min(wo, (w - 1 - (kw - 1) * dw + pl) // sw + 1)
    if ohi <= olo:
        return None
    L = 4   # m8 spills: clang hoists the loads of the unrolled window columns
    vred = vop("vfmax_vv" if kind == "max" else "vfadd_vv", L)
    load = (vle(L, "r + j * " + str(dw)) if sw == 1 else
            vlse(L, "r + j * " + str(dw), sw))
    if kind == "max":
        fin = ""
    elif cip:   # interior: the window's width inside the padded input is kw
        fin = (f"acc = {vop('vfdiv_vf', L)}(acc, (float)(((h0 + {kh} < {h + pb} ? h0 + {kh} : "
               f"{h + pb}) - h0) * {kw}), vl);")
    else:
        fin = f"acc = {vop('vfdiv_vf', L)}(acc, (float)(rows * {kw}), vl);"
    count_rows = "" if kind == "max" or cip else "++rows;"
    rows_decl = "" if kind == "max" or cip else "long rows = 0;"
    return f"""    for (long nc = 0; nc < {n * c}; ++nc) {{
        const float *__restrict xp = x + nc * {h * w};
        float *__restrict yp = y + nc * {ho * wo};
        for (long oh = 0; oh < {ho}; ++oh) {{
            const long h0 = oh * {sh} - {pt};
            for (long ow = 0; ow < {olo}; ++ow) {{
                {scalar}
            }}
            for (size_t o = {olo}; o < {ohi};) {{
                const size_t vl = {vsetvl(L, f'{ohi} - o')};
                {vt(L)} acc = {vsplat(L, init)};
                {rows_decl}
                for (long i = 0; i < {kh}; ++i) {{
                    const long hh = h0 + i * {dh};
                    if (hh < 0 || hh >= {h}) continue;
                    const float *__restrict r = xp + hh * {w} + (long)o * {sw} - {pl};
                    {count_rows}
                    for (long j = 0; j < {kw}; ++j)
                        acc = {vred}(acc, {load}, vl);
                }}
                {fin}
                {vse(L, f'yp + oh * {wo} + o', 'acc')}
                o += vl;
            }}
            for (long ow = {ohi}; ow < {wo}; ++ow) {{
                {scalar}
            }}
        }}
    }}"""


def _reduce(kind: str, ptr: str, n: str, init: str, L: int = 8) -> str:
    """Statements leaving in `red` the max or sum of ptr[0..n): whole VLMAX chunks accumulate
    in a vector (every element defined), the reduction then takes the remainder's elements."""
    acc, red = ("vfmax_vv", "vfredmax") if kind == "max" else ("vfadd_vv", "vfredusum")
    return f"""const size_t vm = {vsetvlmax(L)};
{vt(L)} vacc = {vsplat(L, init, 'vm')};
size_t i = 0;
for (; i + vm <= (size_t)({n}); i += vm)
  vacc = {vop(acc, L)}(vacc, {vle(L, f'{ptr} + i', 'vm')}, vm);
vfloat32m1_t r1 = __riscv_vfmv_v_f_f32m1({init}, 1);
r1 = __riscv_{red}_vs_f32m{L}_f32m1(vacc, r1, vm);
if (i < (size_t)({n})) {{
  const size_t vl = {vsetvl(L, f'(size_t)({n}) - i')};
  r1 = __riscv_{red}_vs_f32m{L}_f32m1({vle(L, f'{ptr} + i')}, r1, vl);
}}
const float red = __riscv_vfmv_f_s_f32m1_f32(r1);"""


def _pad(text: str, pad: str) -> str:
    return "\n".join(pad + line for line in text.splitlines())


@specified("global_pool")
def global_pool(kind: str, x_shape) -> Lowered:
    nc, inner = x_shape[0] * x_shape[1], math.prod(x_shape[2:])
    if kind == "max":
        init, upd, fin = "-INFINITY", "acc = xp[i] > acc ? xp[i] : acc;", "acc"
    else:
        init, upd, fin = "0.0f", "acc += xp[i];", f"acc * {flt(1.0 / inner)}"
    code = f"""    for (long nc = 0; nc < {nc}; ++nc) {{
        const float *__restrict xp = x + nc * {inner};
        float acc = {init};
        for (long i = 0; i < {inner}; ++i) {{
            {upd}
        }}
        y[nc] = {fin};
    }}"""
    vfin = "red" if kind == "max" else f"red * {flt(1.0 / inner)}"
    rvv = f"""    for (long nc = 0; nc < {nc}; ++nc) {{
        const float *__restrict xp = x + nc * {inner};
{_pad(_reduce(kind, "xp", str(inner), "-INFINITY" if kind == "max" else "0.0f"), " " * 8)}
        y[nc] = {vfin};
    }}"""
    return Lowered(Kernel(f"global{kind}pool", XY, guarded(rvv, code), support=header()))


@specified("lrn")
def lrn(x_shape, size: int, alpha: float, beta: float, bias: float) -> Lowered:
    n, c = x_shape[:2]
    inner = math.prod(x_shape[2:])
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    code = f"""    for (long b = 0; b < {n}; ++b) {{
        for (long ch = 0; ch < {c}; ++ch) {{
            const long j0 = ch - {lo} < 0 ? 0 : ch - {lo};
            const long j1 = ch + {hi} > {c - 1} ? {c - 1} : ch + {hi};
            for (long i = 0; i < {inner}; ++i) ws[i] = 0.0f;
            for (long j = j0; j <= j1; ++j) {{
                const float *__restrict xp = x + (b * {c} + j) * {inner};
                for (long i = 0; i < {inner}; ++i) ws[i] += xp[i] * xp[i];
            }}
            const float *__restrict xc = x + (b * {c} + ch) * {inner};
            float *__restrict yc = y + (b * {c} + ch) * {inner};
            for (long i = 0; i < {inner}; ++i)
                yc[i] = xc[i] * powf({flt(bias)} + {flt(alpha / size)} * ws[i], {flt(-beta)});
        }}
    }}"""
    # RVV: window sums of squares in registers; t^-beta by square roots for the usual betas
    # (AlexNet/GoogLeNet use 0.75) instead of a scalar powf per element
    L = 8
    pw = {0.75: "__riscv_vfmul_vv_f32m8(s, __riscv_vfsqrt_v_f32m8(s, vl), vl)",
          0.5: "s", 1.0: "t"}.get(float(beta))
    if pw is None:
        return Lowered(Kernel("lrn", XY, code, workspace=inner))
    sq = "" if float(beta) == 1.0 else f"const {vt(L)} s = __riscv_vfsqrt_v_f32m8(t, vl);"
    rvv = f"""    (void)ws;
    for (long b = 0; b < {n}; ++b) {{
        for (long ch = 0; ch < {c}; ++ch) {{
            const long j0 = ch - {lo} < 0 ? 0 : ch - {lo};
            const long j1 = ch + {hi} > {c - 1} ? {c - 1} : ch + {hi};
            const float *__restrict xc = x + (b * {c} + ch) * {inner};
            float *__restrict yc = y + (b * {c} + ch) * {inner};
            for (size_t i = 0; i < {inner};) {{
                const size_t vl = {vsetvl(L, f'{inner} - i')};
                {vt(L)} acc = {vsplat(L, '0.0f')};
                for (long j = j0; j <= j1; ++j) {{
                    const {vt(L)} v = {vle(L, f'x + (b * {c} + j) * {inner} + i')};
                    acc = {vop('vfmacc_vv', L)}(acc, v, v, vl);
                }}
                const {vt(L)} t = {vop('vfadd_vf', L)}(
                    {vop('vfmul_vf', L)}(acc, {flt(alpha / size)}, vl), {flt(bias)}, vl);
                {sq}
                {vse(L, 'yc + i', vop('vfdiv_vv', L) + f"({vle(L, 'xc + i')}, {pw}, vl)")}
                i += vl;
            }}
        }}
    }}"""
    return Lowered(Kernel("lrn", XY, guarded(rvv, code), workspace=inner, support=header()))


@specified("softmax")
def softmax(shape: Sequence[int], axis: int, coerce: bool, log: bool = False) -> Lowered:
    """Softmax over one axis (or, pre-opset-13, over all axes from `axis` on)."""
    outer = math.prod(shape[:axis])
    if coerce:
        n, inner = math.prod(shape[axis:]), 1
    else:
        n, inner = shape[axis], math.prod(shape[axis + 1:])
    out = "v - m - logf(s)" if log else "expf(v - m) * r"
    code = f"""    for (long o = 0; o < {outer}; ++o) {{
        for (long i = 0; i < {inner}; ++i) {{
            const float *__restrict xp = x + o * {n * inner} + i;
            float *__restrict yp = y + o * {n * inner} + i;
            float m = -INFINITY, s = 0.0f;
            for (long k = 0; k < {n}; ++k) m = xp[k * {inner}] > m ? xp[k * {inner}] : m;
            for (long k = 0; k < {n}; ++k) s += expf(xp[k * {inner}] - m);
            const float r = 1.0f / s;
            (void)r;
            for (long k = 0; k < {n}; ++k) {{
                const float v = xp[k * {inner}];
                yp[k * {inner}] = {out};
            }}
        }}
    }}"""
    name = "logsoftmax" if log else "softmax"
    if inner != 1:
        return Lowered(Kernel(name, XY, code))
    L = 8
    if log:
        rest = f"""float s = 0.0f;
for (long k = 0; k < {n}; ++k) s += expf(xp[k] - m);
const float ls = logf(s);
for (size_t k = 0; k < {n};) {{
  const size_t vl = {vsetvl(L, f'{n} - k')};
  {vt(L)} v = {vop('vfsub_vf', L)}({vle(L, 'xp + k')}, m, vl);
  {vse(L, 'yp + k', vop('vfsub_vf', L) + '(v, ls, vl)')}
  k += vl;
}}"""
    else:
        rest = f"""float s = 0.0f;
for (long k = 0; k < {n}; ++k) {{
  const float e = expf(xp[k] - m);
  yp[k] = e;
  s += e;
}}
const float r = 1.0f / s;
for (size_t k = 0; k < {n};) {{
  const size_t vl = {vsetvl(L, f'{n} - k')};
  {vse(L, 'yp + k', vop('vfmul_vf', L) + '(' + vle(L, 'yp + k') + ', r, vl)')}
  k += vl;
}}"""
    rvv = f"""    for (long o = 0; o < {outer}; ++o) {{
        const float *__restrict xp = x + o * {n};
        float *__restrict yp = y + o * {n};
{_pad(_reduce("max", "xp", str(n), "-INFINITY"), " " * 8)}
        const float m = red;
{_pad(rest, " " * 8)}
    }}"""
    return Lowered(Kernel(name, XY, guarded(rvv, code), support=header()))
