"""CUDA generators of reductions and normalisations.

Float reductions over contiguous rows, LayerNorm/RMSNorm rows and GroupNorm groups run one
block per row with the shared-memory tree of pool.py (barriers only, which the CPU emulator
accepts); other reductions (strided, integer) and the line kernels (ArgMax, TopK, Hardmax,
LpNormalization) run one thread per output or line; CumSum and MeanVarianceNormalization run
one thread per line or kept position as well."""
from __future__ import annotations

import math

from ..cfmt import flt
from ..kernel import Kernel
from ..kernels.reduce import reductions as rk
from ..kernels.reduce.normalize import MVN_EPS
from ..kernels.reduce.lines import line_body
from .elementwise import per_element
from .pool import MAX, SUM, _block_threads, _rows, _tree
from .registry import CudaKernel, generator
from ...dtypes import TABLE

MIN = "b < a ? b : a"
COMBINE = {"ReduceMax": MAX, "ReduceMin": MIN, "ReduceProd": "a * b"}



def _row_reduce(spec: dict, kernel: Kernel, f: rk.Form, outer: int, r: int, unused: str
                ) -> CudaKernel:
    fn, (x, *_, y) = spec["fn"], kernel.params
    threads = _block_threads(r)
    pre = ""
    if fn == "ReduceLogSumExp":   # a max tree first (the C kernel's first pass)
        pre = f"""float acc = -INFINITY;
for (I k = (I)threadIdx.x; k < {r}; k += {threads}) acc = xp[k] > acc ? xp[k] : acc;
{_tree(threads, MAX, "mx")}
float m = mx;
{rk.LSE_FINITE}
acc = 0.0f;"""
    else:
        pre = f"float acc = {f.init};"
    step = rk._sub(f.step, a="acc")
    body = f"""{unused}const float *__restrict__ xp = {x.name} + r * {r};
{pre}
for (I k = (I)threadIdx.x; k < {r}; k += {threads}) {{
    const float v = xp[k];
    acc = {step};
}}
{_tree(threads, COMBINE.get(fn, SUM), "a")}
if (threadIdx.x == 0) {y.name}[r] = {f.out("xp[0]")};"""
    return _rows(fn.lower(), kernel, outer, threads, outer * r, body)


def _kept_base(kept) -> str:
    """The input offset of output i, from its coordinates over the kept (size, stride) groups
    (row-major, so the output index runs over them in order)."""
    terms, below = [], 1
    for j, (s, st) in reversed(list(enumerate(kept))):
        q = "i" if below == 1 else f"(i / {below})"
        c = q if j == 0 else f"({q} % {s})"     # the outermost coordinate needs no wrap
        terms.append(c if st == 1 else f"{c} * {st}")
        below *= s
    return " + ".join(reversed(terms)) or "0"


@generator("reduce")
def reduce(spec: dict, kernel: Kernel) -> CudaKernel:
    """Float rows: a block each. Otherwise one thread per output: its kept coordinates give
    the base, the reduced groups are walked as nested loops (as the C kernel's general form)."""
    fn, dtype, shape, axes = spec["fn"], spec["dtype"], spec["x_shape"], spec["axes"]
    groups = rk.layout(shape, axes)
    f = rk._terms(fn, dtype, math.prod(int(shape[d]) for d in axes))
    x, y = kernel.params[0], kernel.params[-1]
    lay = rk.ori(groups)
    unused = "(void)axes;\n" if len(kernel.params) == 3 else ""
    # a block per row pays off for long rows; short ones are a thread's loop
    if lay is not None and lay[2] == 1 and dtype == "float32" and lay[1] >= 64:
        return _row_reduce(spec, kernel, f, lay[0], lay[1], unused)
    ty = TABLE[dtype].ctype
    kept = [(s, st) for s, st, red in groups if not red]
    red = [(s, st) for s, st, red in groups if red]
    base = _kept_base(kept)
    loops = "".join(f"for (I r{j} = 0; r{j} < {s}; ++r{j})\n" for j, (s, _) in enumerate(red))
    off = " + ".join(f"r{j} * {st}" for j, (_, st) in enumerate(red)) or "0"
    pre = f"float m = -INFINITY;\n{loops}    m = xb[{off}] > m ? xb[{off}] : m;\n" \
        f"{rk.LSE_FINITE}\n" \
        if fn == "ReduceLogSumExp" else ""
    stmts = f"""{unused}const {ty} *__restrict__ xb = {x.name} + {base};
{pre}{ty} a = {f.init};
{loops}{{
    const {ty} v = xb[{off}];
    a = {f.step};
}}
{y.name}[i] = {f.out("xb[0]")};"""
    return per_element(fn.lower(), kernel, max(1, math.prod(s for s, _ in kept)), stmts,
                       [math.prod(shape)])


@generator("lines")
def lines(spec: dict, kernel: Kernel) -> CudaKernel:
    """One thread per line, running the C kernel's line body."""
    count, body = line_body(spec)
    unused = "(void)k;\n" if any(p.name == "k" for p in kernel.params) else ""
    body = body.replace("__restrict ", "__restrict__ ")
    return per_element(spec["fn"].lower(), kernel, count,
                       f"{unused}const long ln = (long)i;\n{body}", [math.prod(spec["rows"])])


def _stats(threads: int, n: int, rms: bool, eps: float) -> str:
    """Block statements declaring mu and rs of row xp[0..n) (as normalize._stats)."""
    inv = flt(1.0 / n)
    if rms:
        return f"""float acc = 0.0f;
for (I k = (I)threadIdx.x; k < {n}; k += {threads}) acc += xp[k] * xp[k];
{_tree(threads, SUM, "q")}
const float mu = 0.0f;
const float rs = 1.0f / sqrtf(q * {inv} + {flt(eps)});"""
    return f"""float acc = 0.0f;
for (I k = (I)threadIdx.x; k < {n}; k += {threads}) acc += xp[k];
{_tree(threads, SUM, "s")}
const float mu = s * {inv};
acc = 0.0f;
for (I k = (I)threadIdx.x; k < {n}; k += {threads}) {{
    const float d = xp[k] - mu;
    acc += d * d;
}}
{_tree(threads, SUM, "q")}
const float rs = 1.0f / sqrtf(q * {inv} + {flt(eps)});"""


@generator("rownorm")
def rownorm(spec: dict, kernel: Kernel) -> CudaKernel:
    """LayerNorm / RMSNorm: a block per row."""
    n, rows, rms = spec["n"], spec["rows"], spec["rms"]
    threads = _block_threads(n)
    b = " + bias[k]" if spec["bias"] else ""
    st = "\nif (threadIdx.x == 0) {\n    mean[r] = mu;\n    inv_std_dev[r] = rs;\n}" \
        if spec["stats"] else ""
    body = f"""const float *__restrict__ xp = x + r * {n};
float *__restrict__ yp = y + r * {n};
{_stats(threads, n, rms, spec["eps"])}
for (I k = (I)threadIdx.x; k < {n}; k += {threads})
    yp[k] = (xp[k] - mu) * rs * scale[k]{b};{st}"""
    return _rows("rmsnorm" if rms else "layernorm", kernel, rows, threads, rows * n, body)


@generator("groupnorm")
def groupnorm(spec: dict, kernel: Kernel) -> CudaKernel:
    """Group/Instance normalisation: a block per (n, group)."""
    shape, groups = spec["x_shape"], spec["groups"]
    n, c = shape[:2]
    sp = math.prod(shape[2:])
    cg = c // groups
    row = cg * sp
    threads = _block_threads(row)
    ch = f"g * {cg} + k / {sp}" if spec["per_channel"] else "g"
    body = f"""const I g = r % {groups};
const float *__restrict__ xp = x + r * {row};
float *__restrict__ yp = y + r * {row};
{_stats(threads, row, False, spec["eps"])}
for (I k = (I)threadIdx.x; k < {row}; k += {threads}) {{
    const float a = rs * scale[{ch}];
    yp[k] = xp[k] * a + (bias[{ch}] - mu * a);
}}"""
    return _rows("groupnorm", kernel, n * groups, threads, n * c * sp, body)


@generator("cumsum")
def cumsum(spec: dict, kernel: Kernel) -> CudaKernel:
    """One thread per line of the axis, scanning it in order (reverse: backwards)."""
    outer, n, inner = spec["rows"]
    ty = TABLE[spec["dtype"]].ctype
    k = f"({n - 1} - j)" if spec["reverse"] else "j"
    step = f"yp[k * {inner}] = acc;\n        acc += xp[k * {inner}];" if spec["exclusive"] \
        else f"acc += xp[k * {inner}];\n        yp[k * {inner}] = acc;"
    stmts = f"""(void)axis;
const I base = (i / {inner}) * {n * inner} + i % {inner};
const {ty} *__restrict__ xp = x + base;
{ty} *__restrict__ yp = y + base;
{ty} acc = 0;
for (I j = 0; j < {n}; ++j) {{
    const I k = {k};
    {step}
}}"""
    return per_element("cumsum", kernel, outer * inner, stmts, [outer * n * inner])


@generator("mvn")
def mvn(spec: dict, kernel: Kernel) -> CudaKernel:
    """One thread per kept position: statistics over the reduced groups, then its outputs."""
    shape, axes = spec["x_shape"], spec["axes"]
    groups = rk.layout(shape, axes)
    kept = [(s, st) for s, st, red in groups if not red]
    red = [(s, st) for s, st, red in groups if red]
    off = " + ".join(f"r{j} * {st}" for j, (_, st) in enumerate(red)) or "0"
    inv = flt(1.0 / math.prod(int(shape[d]) for d in axes))
    stmts = f"""const I base = {_kept_base(kept)};
const float *__restrict__ xb = x + base;
float *__restrict__ yb = y + base;
float s = 0.0f, q = 0.0f;
{rk.over_reduced(red, f"const float v = xb[{off}];{chr(10)}s += v;{chr(10)}q += v * v;")}
const float mu = s * {inv};
const float var = q * {inv} - mu * mu;
const float rs = 1.0f / (sqrtf(var > 0.0f ? var : 0.0f) + {flt(MVN_EPS)});
{rk.over_reduced(red, f"yb[{off}] = (xb[{off}] - mu) * rs;")}"""
    return per_element("mvn", kernel, max(1, math.prod(s for s, _ in kept)), stmts,
                       [math.prod(shape)])
