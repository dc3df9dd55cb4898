"""CUDA forms of the kernel kinds of the sequence, 3-D and transposed-convolution families.
Attention is parallel: one thread per query row, with a streaming ("online") softmax that
rescales the running output whenever the running maximum grows, so a row needs no scratch.
ConvTranspose is parallel: one thread per output element gathers the input elements whose
taps reach it (reading the weight packed or not, as the C form stores it). The other kinds run their C bodies on one GPU thread (serial.py): correct everywhere, slow on
big tensors. (Einsum forms that are batched matrix products use "matmul_t", cuda/gemm.py.)"""
from __future__ import annotations

import math

from ..cfmt import indent
from ..kernel import Kernel
from ..loops import strides_of
# imported for their declare_spec calls (the kinds' spec keys)
from ..kernels import attention, conv3d, conv_transpose, einsum, rnn  # noqa: F401
from .elementwise import per_element
from .registry import CudaKernel, generator
from .serial import serial_generator

serial_generator("conv_nd", "pool_nd", "rnn")


@generator("attention")
def _attention(spec: dict, kernel: Kernel) -> CudaKernel:
    dims, rank = spec["dims"], spec["rank"]
    b_, hq, hk, sq, skv, d, dv = dims
    reps = hq // hk
    score, masks = attention.score_terms(dims, spec["scale"], spec["softcap"],
                                         spec["is_causal"], spec["mask_shape"],
                                         spec["mask_dtype"], row="qr")
    at = attention.at
    stmts = f"""const long long b = (long long)i / {hq * sq};
const long long h = (long long)i / {sq} % {hq};
const long long qr = (long long)i % {sq};
const float *__restrict__ qi = {at("q", rank, hq, sq, d, "h", "qr")};
float *__restrict__ yi = {at("y", rank, hq, sq, dv, "h", "qr")};
float mx = -INFINITY;
float l = 0.0f;
for (int t = 0; t < {dv}; ++t) yi[t] = 0.0f;
for (long long j = 0; j < {skv}; ++j) {{
    const float *__restrict__ kj = {at("k", rank, hk, skv, d, f"(h / {reps})", "j")};
    const float *__restrict__ vj = {at("v", rank, hk, skv, dv, f"(h / {reps})", "j")};
    float sc = 0.0f;
    for (int t = 0; t < {d}; ++t) sc += qi[t] * kj[t];
    float s = {score};
{indent(masks)}
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
}}"""
    return per_element("attention", kernel, b_ * hq * sq, stmts)


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
