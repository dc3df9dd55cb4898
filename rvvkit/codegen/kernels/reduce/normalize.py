"""Normalisation kernels: LayerNormalization / RMSNormalization rows (kind "rownorm"),
GroupNormalization / InstanceNormalization (kind "groupnorm"), MeanVarianceNormalization over
any axes (kind "mvn").

Statistics are two-pass in float (mean, then the mean of squared deviations), which matches
onnxruntime closely without Welford's divisions; the portable sums run in lanes (lanes.py).
Under RVV the row sums accumulate whole LMUL-8 registers and end in one vfredusum; the output
pass is strip-mined."""
from __future__ import annotations

from ...cfmt import flt, indent
from ...lanes import lane_reduce
from ...loops import loop
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...parallel import parts_loop
from ...rvv import guarded, header, vle, vse, vsetvl, vsetvlmax, vsplat, vt
from .reductions import layout, over_reduced

declare_spec("rownorm", ("rms", "rows", "n", "eps", "bias", "stats"))
declare_spec("groupnorm", ("x_shape", "groups", "eps", "per_channel"))
declare_spec("mvn", ("x_shape", "axes"))

L = 8
MVN_EPS = 1e-9


def vsum(out: str, ptr: str, n: int, what: str = "x", mu: str = "mu") -> str:
    """RVV statements declaring float `out` = sum over ptr[0..n) of x, x*x ("sq"),
    (x - mu)^2 ("dev") or |x| ("abs"): whole registers accumulate, then one m1 reduction each
    of the accumulator and of the (mapped) remainder."""
    dev = {"dev": f"v = __riscv_vfsub_vf_f32m8(v, {mu}, vl);",
           "abs": "v = __riscv_vfmax_vv_f32m8(v, __riscv_vfrsub_vf_f32m8(v, 0.0f, vl), vl);"
           }.get(what, "")
    dev = indent(dev, 2) + "\n" if dev else ""
    what = "x" if what == "abs" else what
    acc = "__riscv_vfadd_vv_f32m8(acc, v, vl)" if what == "x" else \
        "__riscv_vfmacc_vv_f32m8(acc, v, v, vl)"
    tail = "v" if what == "x" else "__riscv_vfmul_vv_f32m8(v, v, vl)"
    return f"""float {out};
{{
    const size_t vm = {vsetvlmax(L)};
    {vt(L)} acc = {vsplat(L, '0.0f', 'vm')};
    size_t k = 0;
    for (; k + vm <= (size_t){n}; k += vm) {{
        const size_t vl = vm;
        {vt(L)} v = {vle(L, f'{ptr} + k')};
{dev}        acc = {acc};
    }}
    vfloat32m1_t r1 = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    r1 = __riscv_vfredusum_vs_f32m8_f32m1(acc, r1, vm);
    if (k < (size_t){n}) {{
        const size_t vl = {vsetvl(L, f'(size_t){n} - k')};
        {vt(L)} v = {vle(L, f'{ptr} + k')};
{dev}        r1 = __riscv_vfredusum_vs_f32m8_f32m1({tail}, r1, vl);
    }}
    {out} = __riscv_vfmv_f_s_f32m1_f32(r1);
}}"""


def _stats(n: int, rms: bool, eps: float, vector: bool) -> str:
    """Statements declaring mu (0 for RMS) and rs = 1/sqrt(variance + eps) of row xp[0..n)."""
    inv = flt(1.0 / n)
    if rms:
        q = vsum("q", "xp", n, "sq") if vector else lane_reduce("q", n, "xp[{k}] * xp[{k}]")
        return f"{q}\nconst float mu = 0.0f;\n(void)mu;\n" \
               f"const float rs = 1.0f / sqrtf(q * {inv} + {flt(eps)});"
    if vector:
        s, q = vsum("s", "xp", n), vsum("q", "xp", n, "dev")
    else:
        s = lane_reduce("s", n, "xp[{k}]")
        q = lane_reduce("q", n, "(xp[{k}] - mu) * (xp[{k}] - mu)")
    return f"""{s}
const float mu = s * {inv};
{q}
const float rs = 1.0f / sqrtf(q * {inv} + {flt(eps)});"""


def rownorm(rms: bool, rows: int, n: int, eps: float, bias: bool, stats: bool) -> Lowered:
    """y = (x - mean) * rs * scale (+ bias) per row of n (RMS: mean 0, rs from the mean
    square); scale and bias hold n values. `stats` also writes mean and rs per row."""
    b = " + bias[k]" if bias else ""
    d = "xp[k]" if rms else "(xp[k] - mu)"
    st = "\nmean[r] = mu;\ninv_std_dev[r] = rs;" if stats else ""
    head = f"""const float *__restrict xp = x + r * {n};
float *__restrict yp = y + r * {n};
"""
    code = head + f"""{_stats(n, rms, eps, False)}
for (long k = 0; k < {n}; ++k) yp[k] = {d} * rs * scale[k]{b};{st}"""
    vx = "v" if rms else "__riscv_vfsub_vf_f32m8(v, mu, vl)"
    vb = f"\nw = __riscv_vfadd_vv_f32m8(w, {vle(L, 'bias + k')}, vl);" if bias else ""
    rvv = head + f"""{_stats(n, rms, eps, True)}
for (size_t k = 0; k < {n};) {{
    const size_t vl = {vsetvl(L, f'{n} - k')};
    const {vt(L)} v = {vle(L, 'xp + k')};
    {vt(L)} w = __riscv_vfmul_vf_f32m8({vx}, rs, vl);
    w = __riscv_vfmul_vv_f32m8(w, {vle(L, 'scale + k')}, vl);{indent(vb)}
    {vse(L, 'yp + k', 'w')}
    k += vl;
}}{st}"""
    params = [Param("x"), Param("scale")] + [Param("bias")] * bias + [Param("y", const=False)]
    if stats:
        params += [Param("mean", const=False), Param("inv_std_dev", const=False)]
    (vrows, split), (crows, _) = parts_loop("r", rows, rvv), parts_loop("r", rows, code)
    body = guarded(vrows, crows)
    spec = make_spec("rownorm", rms=int(rms), rows=rows, n=n, eps=eps, bias=int(bias),
                     stats=int(stats))
    return Lowered(Kernel("rmsnorm" if rms else "layernorm", tuple(params), indent(body),
                          support=header(), spec=spec, split=split(rows * n * 6)))


def _per_row(rows: int, body: str, var: str = "r") -> str:
    return loop(var, 0, rows, body, "long")


def groupnorm(x_shape, groups: int, eps: float, per_channel: bool) -> Lowered:
    """Statistics per (n, group) over its C/G channels and all spatial positions, then
    y = x * a + b per channel with a = rs * scale, b = bias - mu * a."""
    n, c = x_shape[:2]
    sp = 1
    for d in x_shape[2:]:
        sp *= int(d)
    cg = c // groups
    row = cg * sp
    ch = "g * %d + cc" % cg if per_channel else "g"

    def body(vector: bool) -> str:
        if vector:
            ab = f"__riscv_vfadd_vf_f32m8(__riscv_vfmul_vf_f32m8({vle(L, 'xc + k')}, a, vl), b, vl)"
            apply = f"""for (size_t k = 0; k < {sp};) {{
    const size_t vl = {vsetvl(L, f'{sp} - k')};
    {vse(L, 'yc + k', ab)}
    k += vl;
}}"""
        else:
            apply = f"for (long k = 0; k < {sp}; ++k) yc[k] = xc[k] * a + b;"
        per_channel_body = f"""const float a = rs * scale[{ch}];
const float b = bias[{ch}] - mu * a;
const float *__restrict xc = xp + cc * {sp};
float *__restrict yc = yp + cc * {sp};
"""
        return f"""const long g = r % {groups};
const float *__restrict xp = x + r * {row};
float *__restrict yp = y + r * {row};
{_stats(row, False, eps, vector)}
{loop("cc", 0, cg, per_channel_body + apply, "long")}"""
    code = guarded(_per_row(n * groups, body(True)), _per_row(n * groups, body(False)))
    params = (Param("x"), Param("scale"), Param("bias"), Param("y", const=False))
    spec = make_spec("groupnorm", x_shape=tuple(x_shape), groups=groups, eps=eps,
                     per_channel=int(per_channel))
    return Lowered(Kernel("groupnorm", params, indent(code), support=header(), spec=spec))


def mvn(x_shape, axes) -> Lowered:
    """(x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes`: kept groups outside, the
    reduced ones inside, twice (statistics, then outputs)."""
    groups = layout(x_shape, axes)
    kept = [(s, st) for s, st, red in groups if not red]
    red = [(s, st) for s, st, red in groups if red]
    count = 1
    for d in axes:
        count *= int(x_shape[d])
    base = " + ".join(f"k{j} * {st}" for j, (_, st) in enumerate(kept)) or "0"
    off = " + ".join(f"r{j} * {st}" for j, (_, st) in enumerate(red)) or "0"
    inv = flt(1.0 / count)
    body = f"""const float *__restrict xb = x + {base};
float *__restrict yb = y + {base};
float s = 0.0f, q = 0.0f;
{over_reduced(red, f"const float v = xb[{off}];{chr(10)}s += v;{chr(10)}q += v * v;")}
const float mu = s * {inv};
const float var = q * {inv} - mu * mu;
const float rs = 1.0f / (sqrtf(var > 0.0f ? var : 0.0f) + {flt(MVN_EPS)});
{over_reduced(red, f"yb[{off}] = (xb[{off}] - mu) * rs;")}"""
    code = body
    for j, (s, _) in reversed(list(enumerate(kept))):
        code = f"for (long k{j} = 0; k{j} < {s}; ++k{j}) {{\n{indent(code)}\n}}"
    spec = make_spec("mvn", x_shape=tuple(x_shape), axes=tuple(axes))
    return Lowered(Kernel("mvn", (Param("x"), Param("y", const=False)), indent(code),
                          spec=spec))
