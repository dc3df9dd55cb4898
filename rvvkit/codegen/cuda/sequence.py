"""CUDA forms of the kernel kinds of the sequence, 3-D and transposed-convolution families,
all parallel:
  * attention: one thread per query row, with a streaming ("online") softmax that rescales the
    running output whenever the running maximum grows, so a row needs no scratch (the mode-3
    qk output takes a second pass); KV-cache outputs are copied by the same threads, one
    element each, while rows read past and new keys from their inputs;
  * conv_transpose: one thread per output element gathers the input elements whose taps reach
    it (reading the weight packed or not, as the C form stores it);
  * conv_nd, pool_nd (3-D): one thread per output element, direct;
  * einsum (general form): one thread per output element, the C kernel's statements;
  * rnn: one block per (direction, batch row), its threads sharing the gate rows of each time
    step (the C kernel's step, phase by phase, a barrier before each phase), the states in
    shared memory; a hidden size too large for shared memory runs the C body on one thread
    (serial.py).
Einsum forms that are batched matrix products use the GEMM's "matmul_t" (cuda/gemm.py)."""
from __future__ import annotations

import math
import re

from ...ops.activations import cuda_act_expr
from ..cfmt import flt, indent
from ..kernel import Kernel
from ..loops import loop, strides_of
# imported for their declare_spec calls (the kinds' spec keys)
from ..kernels.llm import attention  # noqa: F401
from ..kernels.conv import conv3d, transpose as conv_transpose
from ..kernels.math import einsum
from ..kernels.rnn import layers as rnn
from ..kernels.reduce import pool
from ..kernels.rnn import gates as rnn_gates, rows as rnn_rows
from .elementwise import gparams, named, per_element
from .registry import CudaKernel, generator
from .serial import serial

RNN_THREADS = 128
RNN_SHARED_FLOATS = 11 * 1024   # the states and gates of one row in shared memory (44 KiB)


def _kv_row(c: attention.Attn, src: str, past: str, size: int, j: str) -> str:
    """Pointer to key/value row `j` of head hh (batch b) read from its source, the past cache
    for j < past, else the new K/V in the input layout (never from present_k/present_v, which
    other threads of the same launch are writing)."""
    _, _, hk, _, total, _, _ = c.dims
    new = total - c.past
    cur = attention.at(src, c.rank, hk, new, size, "hh", f"({j} - {c.past})" if c.past else j)
    if not c.past:
        return cur
    return f"({j} < {c.past} ? {past} + ((b * {hk} + hh) * {c.past} + {j}) * {size} : {cur})"


def _present(c: attention.Attn, out: str, src: str, past: str, size: int) -> str:
    """Statements of thread i writing element i of present_k or present_v, if in range."""
    _, _, hk, _, total, _, _ = c.dims
    return f"""if ((long long)i < {c.dims[0] * hk * total * size}) {{
    const long long e = (long long)i % {size};
    const long long t = (long long)i / {size} % {total};
    const long long b = (long long)i / {size * total * hk};
    const long long hh = (long long)i / {size * total} % {hk};
    {out}[i] = ({_kv_row(c, src, past, size, "t")})[e];
}}"""


def _attn(spec: dict) -> attention.Attn:
    """The attention kernel's configuration, read key by key (as tests/unit checks)."""
    return attention.Attn(
        dims=spec["dims"], rank=spec["rank"], scale=spec["scale"], softcap=spec["softcap"],
        is_causal=spec["is_causal"], mask_shape=spec["mask_shape"],
        mask_dtype=spec["mask_dtype"], past=spec["past"], present=spec["present"],
        window=spec["window"], nonpad=spec["nonpad"], qk_mode=spec["qk_mode"])


@generator("attention")
def _attention(spec: dict, kernel: Kernel) -> CudaKernel:
    """Threads [0, rows) each run one query row; with present outputs, threads also copy one
    element of present_k and of present_v."""
    c = _attn(spec)
    b_, hq, hk, sq, total, d, dv = c.dims
    reps = hq // hk
    rows = b_ * hq * sq
    stages = attention.score_stages(c, "qr")
    qkr = (f"float *__restrict__ qkr = {attention.qk_row(c, 'qr')};"
           if c.qk_mode >= 0 else "")
    probs = ""
    if c.qk_mode == 3:   # the probabilities, from the final maximum and sum
        probs = f"""for (long long j = 0; j < {total}; ++j) {{
    const float *__restrict__ kj = {_kv_row(c, "k", "past_k", d, "j")};
    float s = 0.0f;
    for (int t = 0; t < {d}; ++t) s += qi[t] * kj[t];
    s *= {flt(c.scale)};
{indent(stages)}
    qkr[j] = (l > 0.0f && s != -INFINITY) ? expf(s - mx) / l : 0.0f;
}}"""
    row = f"""if ((long long)i < {rows}) {{
    const long long b = (long long)i / {hq * sq};
    const long long h = (long long)i / {sq} % {hq};
    const long long qr = (long long)i % {sq};
    const long long hh = h / {reps};
{indent(attention.offset_decl(c, "long long"))}
    const float *__restrict__ qi = {attention.at("q", c.rank, hq, sq, d, "h", "qr")};
    float *__restrict__ yi = {attention.at("y", c.rank, hq, sq, dv, "h", "qr")};
    {qkr}
    float mx = -INFINITY;
    float l = 0.0f;
    for (int t = 0; t < {dv}; ++t) yi[t] = 0.0f;
    for (long long j = 0; j < {total}; ++j) {{
        const float *__restrict__ kj = {_kv_row(c, "k", "past_k", d, "j")};
        const float *__restrict__ vj = {_kv_row(c, "v", "past_v", dv, "j")};
        float s = 0.0f;
        for (int t = 0; t < {d}; ++t) s += qi[t] * kj[t];
        s *= {flt(c.scale)};
{indent(stages, 2)}
        if (s == -INFINITY) continue;
        if (s > mx) {{   /* rescale what was summed under the old maximum */
            const float f = expf(mx - s);
            l *= f;
            for (int t = 0; t < {dv}; ++t) yi[t] *= f;
            mx = s;
        }}
        const float p = expf(s - mx);
        l += p;
        for (int t = 0; t < {dv}; ++t) yi[t] += p * vj[t];
    }}
    if (l > 0.0f) {{
        const float inv = 1.0f / l;
        for (int t = 0; t < {dv}; ++t) yi[t] *= inv;
    }}
{indent(probs)}
}}"""
    parts = [row]
    n = rows
    if c.present:
        parts += [_present(c, "present_k", "k", "past_k", d),
                  _present(c, "present_v", "v", "past_v", dv)]
        n = max(rows, b_ * hk * total * max(d, dv))
    stmts = "\n".join(ln for ln in "\n".join(parts).splitlines() if ln.strip())
    return per_element("attention", kernel, n, stmts)


@generator("conv_transpose")
def _conv_transpose(spec: dict, kernel: Kernel) -> CudaKernel:
    xs, ws_, ys = spec["x_shape"], spec["w_shape"], spec["y_shape"]
    group, st, pads, dil = spec["group"], spec["strides"], spec["pads"], spec["dilations"]
    nd = len(xs) - 2
    cin, mg, m = xs[1], ws_[1], ys[1]
    cg, kv, xv, yv = cin // group, math.prod(ws_[2:]), math.prod(xs[2:]), math.prod(ys[2:])
    ost, xst, kst = strides_of(ys[2:]), strides_of(xs[2:]), strides_of(ws_[2:])
    pos = [f"const long long o{d} = (long long)i / {ost[d]} % {ys[2 + d]};" for d in range(nd)]
    xo = " + ".join(f"i{d} * {xst[d]}" for d in range(nd))
    ko = " + ".join(f"k{d} * {kst[d]}" for d in range(nd))
    widx = (conv_transpose.packed_w_index(ws_, group, spec["w_panel"], "c", "mo", "kk")
            if spec["w_panel"] else f"(c * {mg} + mo) * {kv} + kk")
    inner = f"const long long kk = {ko};\nacc += x[xc + {xo}] * w[{widx}];"
    for d in reversed(range(nd)):   # the taps k<d> of output o<d> that an input i<d> reaches
        inner = f"""for (long long k{d} = 0; k{d} < {ws_[2 + d]}; ++k{d}) {{
    const long long t{d} = o{d} + {pads[d]} - k{d} * {dil[d]};
    if (t{d} < 0 || t{d} % {st[d]} != 0) continue;
    const long long i{d} = t{d} / {st[d]};
    if (i{d} >= {xs[2 + d]}) continue;
{indent(inner)}
}}"""
    stmts = f"""const long long n = (long long)i / {m * yv};
const long long mm = (long long)i / {yv} % {m};
const long long g = mm / {mg};
const long long mo = mm % {mg};
{chr(10).join(pos)}
float acc = {"b[mm]" if spec["bias"] else "0.0f"};
for (long long c = g * {cg}; c < (g + 1) * {cg}; ++c) {{
    const long long xc = (n * {cin} + c) * {xv};
{indent(inner)}
}}
y[i] = acc;"""
    return per_element("convtranspose", kernel, xs[0] * m * yv, stmts)


@generator("einsum")
def _einsum(spec: dict, kernel: Kernel) -> CudaKernel:
    """One thread per output element, the C kernel's per-element statements."""
    dims = dict(spec["dims"])
    stmts = einsum.per_output(spec["terms"], spec["out_term"], spec["in_shapes"],
                              spec["out_shape"], dims)
    return per_element("einsum", kernel, math.prod(spec["out_shape"]),
                       f"const long o = (long)i;\n{stmts}")


def _window(nd: int, xs, kernel, strides, pads, dil, inner: str, taps: bool) -> str:
    """Loops over the taps k<d> of output position o<d> inside the input (p<d>), around
    `inner`, which sees xo (flat input offset) and, with `taps`, kk (flat tap). (nvcc warns
    of a variable never used even through a void cast: declare only what is read.)"""
    kst, xst = strides_of(kernel), strides_of(xs)
    kk = " + ".join(f"k{d} * {kst[d]}" for d in range(nd))
    xo = " + ".join(f"p{d} * {xst[d]}" for d in range(nd))
    text = (f"const long long kk = {kk};\n" if taps else "") + \
        f"const long long xo = {xo};\n{inner}"
    for d in reversed(range(nd)):
        text = f"""for (long long k{d} = 0; k{d} < {kernel[d]}; ++k{d}) {{
    const long long p{d} = o{d} * {strides[d]} - {pads[d]} + k{d} * {dil[d]};
    if (p{d} < 0 || p{d} >= {xs[d]}) continue;
{indent(text)}
}}"""
    return text


def _positions(nd: int, ys) -> str:
    ost = strides_of(ys)
    return "\n".join(f"const long long o{d} = (long long)i / {ost[d]} % {ys[d]};"
                     for d in range(nd))


@generator("conv_nd")
def _conv_nd(spec: dict, kernel: Kernel) -> CudaKernel:
    xs, ws_, ys = spec["x_shape"], spec["w_shape"], spec["y_shape"]
    nd, group = len(xs) - 2, spec["group"]
    cin, m, cg = xs[1], ws_[0], ws_[1]
    mg, kv, xv, yv = m // group, math.prod(ws_[2:]), math.prod(xs[2:]), math.prod(ys[2:])
    pw = spec["w_panel"]
    if pw:   # packed per group as conv's GEMM weight: row mo, column c * taps + kk
        wgrp = -(-mg // pw) * pw * cg * kv
        widx = (f"g * {wgrp} + (mo / {pw}) * {cg * kv * pw} + (c * {kv} + kk) * {pw} + "
                f"mo % {pw}")
    else:
        widx = f"(mm * {cg} + c) * {kv} + kk"
    inner = f"acc += x[xc + xo] * w[{widx}];"
    window = _window(nd, xs[2:], ws_[2:], spec["strides"], spec["pads"], spec["dilations"],
                     inner, True)
    res = "acc += r[i];\n" if spec["residual"] else ""
    channels = loop("c", 0, cg, f"const long long xc = (n * {cin} + g * {cg} + c) * {xv};\n"
                    + window, "long long")
    stmts = f"""const long long n = (long long)i / {m * yv};
const long long mm = (long long)i / {yv} % {m};
const long long g = mm / {mg};
{f"const long long mo = mm % {mg};" if pw else ""}
{_positions(nd, ys[2:])}
float acc = {"b[mm]" if spec["bias"] else "0.0f"};
{channels}
{res}y[i] = {cuda_act_expr(spec["act"], "acc")};"""
    return per_element("conv_nd", kernel, xs[0] * m * yv, stmts)


@generator("pool_nd")
def _pool_nd(spec: dict, kernel: Kernel) -> CudaKernel:
    xs, ys, kernel_shape = spec["x_shape"], spec["y_shape"], spec["kernel"]
    nd, pads = len(xs) - 2, spec["pads"]
    xv, yv = math.prod(xs[2:]), math.prod(ys[2:])
    count = spec["kind"] != "max" and not spec["count_include_pad"]
    if spec["kind"] == "max":
        init, upd, fin = pool.MAX_INIT, pool.max_step("v"), "acc"   # NaN rule: pool.py
    else:
        init, upd, fin = "0.0f", "acc += v;" + ("\n++cnt;" if count else ""), "acc / (float)cnt"
        if spec["count_include_pad"]:   # the window's taps inside the padded input (pool_nd)
            fin = "acc / (float)(" + " * ".join(
                pool.padded_extent(f"(o{d} * {spec['strides'][d]} - {pads[d]})",
                                   kernel_shape[d], xs[2 + d] + pads[nd + d],
                                   spec["dilations"][d]) for d in range(nd)) + ")"
    window = _window(nd, xs[2:], kernel_shape, spec["strides"], pads, spec["dilations"],
                     f"const float v = x[xc + xo];\n{upd}", False)
    stmts = f"""const long long xc = (long long)i / {yv} * {xv};
{_positions(nd, ys[2:])}
float acc = {init};
{"int cnt = 0;" if count else ""}
{window}
y[i] = {fin};"""
    return per_element("pool_nd", kernel, xs[0] * xs[1] * yv, stmts)


def _rnn_phases(step: str, nt: int) -> str:
    """The C step's top-level loops over j spread over the block's threads, a barrier before
    each (a phase reads what the previous one wrote for other j)."""
    return re.sub(r"^for \(long j = (\S+); j < (\S+); \+\+j\)",
                  lambda mo: f"__syncthreads();\nfor (long j = {mo.group(1)} + tid; "
                             f"j < {mo.group(2)}; j += {nt})", step, flags=re.M)


@generator("rnn")
def _rnn(spec: dict, kernel: Kernel) -> CudaKernel:
    op, seq, batch, inp, hid = (spec[k] for k in ("cell", "seq", "batch", "input", "hidden"))
    ndirs, layout, acts, clip, lbr = (spec[k] for k in ("ndirs", "layout", "acts", "clip",
                                                        "lbr"))
    ng = rnn_gates.GATES[op]
    if (ng + 3) * hid > RNN_SHARED_FLOATS:
        return serial(spec, kernel)
    has = dict(zip(rnn_gates.INPUTS, spec["inputs"]))
    has_y, has_yh, has_yc = spec["outputs"]
    nt = RNN_THREADS
    st = rnn_gates.state_index(layout, batch, ndirs, hid)
    xt = f"x + (t * {batch} + bb) * {inp}" if layout == 0 else f"x + (bb * {seq} + t) * {inp}"
    yrow = (f"y + ((tt * {ndirs} + d) * {batch} + bb) * {hid}" if layout == 0
            else f"y + ((bb * {seq} + tt) * {ndirs} + d) * {hid}")
    steps = [_rnn_phases(rnn_rows.step(op, hid, inp, acts[d], has["b"], has["p"], clip, lbr,
                                      spec["packed"]), nt)
             for d in range(ndirs)]
    body = steps[0] if ndirs == 1 or steps[0] == steps[1] else \
        f"if (d == 0) {{\n{indent(steps[0])}\n}} else {{\n{indent(steps[1])}\n}}"
    back = "1" if spec["reverse"] else ("d == 1" if ndirs == 2 else "0")
    length = f"sl[bb] < 0 ? 0 : (sl[bb] > {seq} ? {seq} : sl[bb])" if has["sl"] else str(seq)
    shared = [f"__shared__ float gates[{ng * hid}];", f"__shared__ float h[{hid}];"]
    shared += [f"__shared__ float c[{hid}];"] if op == "LSTM" else []
    shared += [f"__shared__ float tmp[{hid}];"] if op == "GRU" and not lbr else []
    init = [f"for (long j = tid; j < {hid}; j += {nt}) h[j] = "
            + (f"h0[{st} + j];" if has["h0"] else "0.0f;")]
    if op == "LSTM":
        init.append(f"for (long j = tid; j < {hid}; j += {nt}) c[j] = "
                    + (f"c0[{st} + j];" if has["c0"] else "0.0f;"))
    ptrs = [f"const float *__restrict__ wd = w + d * {ng * hid * inp};",
            f"const float *__restrict__ rd = r + d * {ng * hid * hid};"]
    ptrs += [f"const float *__restrict__ bd = b + d * {2 * ng * hid};"] if has["b"] else []
    ptrs += [f"const float *__restrict__ pd = p + d * {3 * hid};"] if has["p"] else []
    out = []
    if has_y:   # rows past the sequence length are zeros
        out.append(f"for (long tt = len; tt < {seq}; ++tt) {{\n    float *__restrict__ yt = "
                   f"{yrow};\n    for (long j = tid; j < {hid}; j += {nt}) yt[j] = 0.0f;\n}}")
    out += [f"for (long j = tid; j < {hid}; j += {nt}) yh[{st} + j] = h[j];"] if has_yh else []
    out += [f"for (long j = tid; j < {hid}; j += {nt}) yc[{st} + j] = c[j];"] if has_yc else []
    ywrite = (f"__syncthreads();\n{{\n    const long tt = t;\n    float *__restrict__ yt = "
              f"{yrow};\n    for (long j = tid; j < {hid}; j += {nt}) yt[j] = h[j];\n}}"
              if has_y else "")
    text = f"""__global__ void @NAME@({gparams(kernel)}) {{
{indent(chr(10).join(shared))}
    const long tid = threadIdx.x;
    const long d = blockIdx.x / {batch};
    const long bb = blockIdx.x % {batch};
{indent(chr(10).join(ptrs))}
    const long len = {length};
{indent(chr(10).join(init))}
    for (long s = 0; s < len; ++s) {{
        const long t = ({back}) ? len - 1 - s : s;
        const float *__restrict__ xt = {xt};
{indent(body, 2)}
{indent(ywrite, 2)}
    }}
    __syncthreads();
{indent(chr(10).join(out))}
}}"""
    text = text.replace("__restrict ", "__restrict__ ")
    name, text = named(f"{op.lower()}", text)
    support = {} if spec["packed"] else dict(rnn_rows.DOT)
    support[name] = text
    return CudaKernel(f"    RVK_LAUNCH({name}, dim3({ndirs * batch}), dim3({nt}), "
                      f"({', '.join(p.name for p in kernel.params)}));", support)
