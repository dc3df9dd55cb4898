"""CUDA generators of pooling, LRN and softmax. Windowed kernels (pool, LRN) run one thread per
output; row reductions (global pooling, softmax rows) run one block per row with a tree
reduction in shared memory between __syncthreads() (no warp shuffles: the CPU emulator has
none, and a barrier-only reduction is correct at any block size)."""
from __future__ import annotations

import math

from ..cfmt import flt
from ..kernel import Kernel
from ..kernels.reduce.pool import MAX_INIT, max_step, pool_terms
from .registry import CudaKernel, generator
from .elementwise import NAME, gparams, index_type, launch, named, per_element, unused

MAX_ROW_BLOCKS = 65535   # rows beyond this are taken by a block-stride loop


def _block_threads(n: int) -> int:
    """Threads of a row block: the power of two covering the row, within one warp..256."""
    t = 32
    while t < n and t < 256:
        t *= 2
    return t


def _tree(threads: int, combine: str, out: str) -> str:
    """Reduces red[0..threads) into `out` (a new const every thread reads) with `combine`
    (an expression of `a` and `b`). The closing barrier keeps red[0] from being overwritten
    by a next phase before every thread has read it."""
    return f"""red[threadIdx.x] = acc;
__syncthreads();
for (int h = {threads // 2}; h > 0; h >>= 1) {{
    if ((int)threadIdx.x < h) {{
        const float a = red[threadIdx.x], b = red[threadIdx.x + h];
        red[threadIdx.x] = {combine};
    }}
    __syncthreads();
}}
const float {out} = red[0];
__syncthreads();"""


MAX = "b > a ? b : a"   # softmax's max: NaN may drop here, e^(NaN - m) brings it back
MAX_NAN = "(b > a || b != b) ? b : a"   # max pooling's: a NaN on either side wins (pool.py)
SUM = "a + b"


def _rows(hint: str, kernel: Kernel, rows: int, threads: int, extent: int, body: str
          ) -> CudaKernel:
    """One block per row r in [0, rows) running `body` (which sees `r`, type I, and the
    shared array red[threads])."""
    if rows <= 0:
        return CudaKernel("    " + unused(kernel))
    inner = "\n".join("        " + line for line in body.splitlines())
    template = f"""__global__ void {NAME}({gparams(kernel)}) {{
    __shared__ float red[{threads}];
    typedef {index_type(extent, rows)} I;
    for (I r = (I)blockIdx.x; r < {rows}; r += (I)gridDim.x) {{
{inner}
    }}
}}"""
    name, text = named(hint, template)
    return CudaKernel(launch(name, min(rows, MAX_ROW_BLOCKS), threads, kernel), {name: text})


@generator("pool")
def pool(spec: dict, kernel: Kernel) -> CudaKernel:
    """Max or average pooling over NCHW, each output's window computed as the C kernel does
    (same tap order, same divisor: with count_include_pad the window clipped to the padded
    input, else the number of taps inside the input)."""
    x, y = kernel.params
    kind = spec["kind"]
    n, c, h, w = spec["x_shape"]
    ho, wo = spec["y_shape"][2:]
    kh, kw = spec["kernel"]
    sh, sw = spec["strides"]
    dh, dw = spec["dilations"]
    pt, pl = spec["pads"][:2]
    init, update, finish = pool_terms(kind, h, w, kh, kw, spec["pads"],
                                      bool(spec.get("count_include_pad")), (dh, dw))
    count = "I cnt = 0;\n" if "cnt" in update else ""
    # with count_include_pad the taps are counted but the divisor is the clipped window
    uncounted = "(void)cnt;\n" if "cnt" in update and "cnt" not in finish else ""
    stmts = f"""const I ow = i % {wo};
const I oh = (i / {wo}) % {ho};
const I nc = i / {ho * wo};
const float *__restrict__ xp = {x.name} + nc * {h * w};
const I h0 = oh * {sh} - {pt};
const I w0 = ow * {sw} - {pl};
float acc = {init};
{count}for (I a = 0; a < {kh}; ++a) {{
    const I hh = h0 + a * {dh};
    if (hh < 0 || hh >= {h}) continue;
    for (I b = 0; b < {kw}; ++b) {{
        const I ww = w0 + b * {dw};
        if (ww < 0 || ww >= {w}) continue;
        const float v = xp[hh * {w} + ww];
        {update}
    }}
}}
{uncounted}{y.name}[i] = {finish};"""
    return per_element(f"{kind}pool", kernel, n * c * ho * wo, stmts, [n * c * h * w])


@generator("global_pool")
def global_pool(spec: dict, kernel: Kernel) -> CudaKernel:
    """Max or mean of each (n, c) plane, one block per plane."""
    x, y = kernel.params
    kind, shape = spec["kind"], spec["x_shape"]
    rows, inner = shape[0] * shape[1], math.prod(shape[2:])
    threads = _block_threads(inner)
    if kind == "max":
        init, upd, combine, fin = MAX_INIT, max_step("v"), MAX_NAN, "m"
    else:
        init, upd, combine, fin = "0.0f", "acc += v;", SUM, f"m * {flt(1.0 / inner)}"
    body = f"""const float *__restrict__ xp = {x.name} + r * {inner};
float acc = {init};
for (I k = (I)threadIdx.x; k < {inner}; k += {threads}) {{
    const float v = xp[k];
    {upd}
}}
{_tree(threads, combine, "m")}
if (threadIdx.x == 0) {y.name}[r] = {fin};"""
    return _rows(f"global{kind}pool", kernel, rows, threads, rows * inner, body)


@generator("lrn")
def lrn(spec: dict, kernel: Kernel) -> CudaKernel:
    """ONNX LRN: y = x * (bias + alpha/size * sum of squares over the channel window)^-beta,
    window [c - (size-1)//2, c + size-1 - (size-1)//2] clipped to the channels. The C kernel's
    scratch (`ws`) is not needed: each thread sums its own window."""
    x, y = kernel.params[:2]
    shape, size = spec["x_shape"], spec["size"]
    n, c = shape[:2]
    inner = math.prod(shape[2:])
    lo = (size - 1) // 2
    hi = size - 1 - lo
    stmts = f"""const I ch = (i / {inner}) % {c};
const I base = i - ch * {inner};
const I j0 = ch - {lo} < 0 ? 0 : ch - {lo};
const I j1 = ch + {hi} > {c - 1} ? {c - 1} : ch + {hi};
float acc = 0.0f;
for (I j = j0; j <= j1; ++j) {{
    const float v = {x.name}[base + j * {inner}];
    acc += v * v;
}}
{y.name}[i] = {x.name}[i] * powf({flt(spec['bias'])} + {flt(spec['alpha'] / size)} * acc, \
{flt(-spec['beta'])});"""
    return per_element("lrn", kernel, n * c * inner, stmts)


@generator("softmax")
def softmax(spec: dict, kernel: Kernel) -> CudaKernel:
    """(Log)softmax over `axis` (coerce: over all axes from `axis` on), one block per row of
    n elements with stride `inner`: max, then sum of exp(x - max), then the outputs."""
    x, y = kernel.params
    shape, axis = spec["shape"], spec["axis"]
    outer = math.prod(shape[:axis])
    if spec["coerce"]:
        n, inner = math.prod(shape[axis:]), 1
    else:
        n, inner = shape[axis], math.prod(shape[axis + 1:])
    threads = _block_threads(n)
    if inner == 1:
        base = f"r * {n}"
    else:
        base = f"(r / {inner}) * {n * inner} + r % {inner}"
    step = "" if inner == 1 else f" * {inner}"
    out = "v - m - logf(s)" if spec.get("log") else "expf(v - m) * q"
    recip = "" if spec.get("log") else "const float q = 1.0f / s;\n"
    body = f"""const I base = {base};
const float *__restrict__ xp = {x.name} + base;
float *__restrict__ yp = {y.name} + base;
float acc = -INFINITY;
for (I k = (I)threadIdx.x; k < {n}; k += {threads}) {{
    const float v = xp[k{step}];
    acc = v > acc ? v : acc;
}}
{_tree(threads, MAX, "m")}
acc = 0.0f;
for (I k = (I)threadIdx.x; k < {n}; k += {threads}) acc += expf(xp[k{step}] - m);
{_tree(threads, SUM, "s")}
{recip}for (I k = (I)threadIdx.x; k < {n}; k += {threads}) {{
    const float v = xp[k{step}];
    yp[k{step}] = {out};
}}"""
    hint = "logsoftmax" if spec.get("log") else "softmax"
    return _rows(hint, kernel, outer * inner, threads, outer * n * inner, body)
