"""CUDA generators of the GEMM family: Conv (implicit GEMM, or direct when depthwise), Gemm and
MatMul. Each turns its kernel spec into a `tiles.Problem` (operand loads as C expressions over
the very buffers and packed-weight layouts the C lowering uses) and instantiates one of the
templates of tiles.py; see rvvkit/codegen/kernels/{conv,gemm}.py for the semantics.

Conv: per group g (z), OUT[m][q] = sum_k W[m][k] X'[k][q] with k = (c, r, s) and the batch
folded into the columns (q = image * Ho*Wo + position), so small images still fill tiles. X'
(im2col) is never stored: the B-tile loader computes each element from x, zero in the padding.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...ops.activations import cuda_act_expr as act_expr
from ..cfmt import flt
from ..kernel import Kernel
from ..kernels.gemm.packed import matmul_dims
from ...errors import ModelError
from .registry import CudaKernel, generator
from .tiles import (NT, SKINNY_P, UNROLL_NAME, UNROLL_TEXT, Operand, Problem, cdiv,
                    choose_tile, named, skinny, tiled)


# the float16 copy of a conv's weights that a `--precision auto` kernel carries beside the
# float32 ones (kernels/conv/half.py): the GPU computes in float32 and never reads it
HALF_COPY = "wh"


def _params(kernel: Kernel) -> str:
    return ", ".join(("const float *__restrict__ " if p.const else "float *__restrict__ ")
                     + p.name for p in kernel.params if p.name != HALF_COPY)


def _args(kernel: Kernel) -> str:
    return ", ".join(p.name for p in kernel.params if p.name != HALF_COPY)


def _instantiate(pr: Problem, kernel: Kernel, small_rows_ok: bool) -> CudaKernel:
    if pr.p * pr.q * pr.nz == 0:
        return _nothing(kernel)
    if small_rows_ok and pr.p <= SKINNY_P:
        name, text, launch = skinny(pr)
    else:
        name, text, launch = tiled(pr, choose_tile(pr.p, pr.q))
    return CudaKernel(f"    {launch}\n", {UNROLL_NAME: UNROLL_TEXT, name: text})


def _packed(ptr: str, kdim: int, pw: int):
    """Operand of a matrix packed by pack_panels: element (i, k) at packed_index(i, k)."""
    return Operand(
        fast_k=False,
        pre=lambda i: f"const float *__restrict__ {ptr}p = {ptr} + ({i} / {pw}) * {kdim * pw}"
                      f" + {i} % {pw};",
        val=lambda i, k: f"{ptr}p[{k} * {pw}]")


def _mul(v: str, f: int) -> str:
    return v if f == 1 else f"{v} * {f}"


def _nothing(kernel: Kernel) -> CudaKernel:
    """An empty output: a launch of 0 blocks is an error on a GPU, so launch nothing."""
    used = " ".join(f"(void){p.name};" for p in kernel.params)
    return CudaKernel(f"    {used}  /* empty output: nothing to compute */\n")


# ------------------------------------------------------------------------------------ conv

@generator("conv")
def conv(spec: dict, kernel: Kernel) -> CudaKernel:
    if spec["half_rows"] is not None and spec["w_panel"] is None:
        raise ModelError("a conv built with --precision fp16 has only float16 weights, which "
                         "the CUDA kernels do not read: build with --precision auto for CUDA")
    if spec["w_panel"] is None:
        return _depthwise(spec, kernel)
    n, cin, h, w = spec["x_shape"]
    m, cg, kh, kw = spec["w_shape"]
    _, _, ho, wo = spec["y_shape"]
    group, pw = spec["group"], spec["w_panel"]
    (sh, sw), (pt, pl, _, _), (dh, dw) = spec["strides"], spec["pads"], spec["dilations"]
    mg, hw, k = m // group, ho * wo, cg * kh * kw
    wgrp = cdiv(mg, pw) * pw * k                      # packed weight floats per group
    pointwise = (kh, kw) == (1, 1) and (sh, sw) == (1, 1) and (pt, pl) == (0, 0)

    def zpre(z: str) -> str:
        return (f"const float *__restrict__ wg = w + (long long){z} * {wgrp};\n"
                f"const int cz = {z} * {cg}, mz = {z} * {mg};")

    def xpre(q: str) -> str:
        # the column's image and output position, fixed per thread across k-slices
        head = (f"const int bimg = {q} / {hw}, bpos = {q} % {hw};\n"
                f"const float *__restrict__ bx = x + ((long long)bimg * {cin} + cz) * {h * w}")
        if pointwise:
            return head + " + bpos;"
        return head + (f";\nconst int bih = bpos / {wo} * {sh} - {pt}, "
                       f"biw = bpos % {wo} * {sw} - {pl};")

    def xval(q: str, kk: str) -> str:
        if pointwise:
            return f"bx[{kk} * {hw}]"
        taps = kh * kw
        c = f"{kk} / {taps}" if taps > 1 else kk
        r = _mul(f"{kk} % {taps} / {kw}" if kw > 1 else f"{kk} % {taps}", dh) if kh > 1 else ""
        s = _mul(f"{kk} % {kw}", dw) if kw > 1 else ""
        ih = f"(bih + {r})" if r else "bih"
        iw = f"(biw + {s})" if s else "biw"
        # unsigned compare: one test for 0 <= i < n
        return (f"((unsigned){ih} < {h}u && (unsigned){iw} < {w}u ? "
                f"bx[{_mul(c, h * w)} + {ih} * {w} + {iw}] : 0.0f)")

    bias, res, act = spec["bias"], spec["residual"], spec["act"]

    def store(p: str, q: str, v: str) -> str:     # y = act(acc + b[m] + r): r before act
        adds = (f" + b[mz + {p}]" if bias else "") + (" + r[yi]" if res else "")
        return (f"const long long yi = yq + (long long)(mz + {p}) * {hw};\n"
                f"const float o = {v}{adds};\n"
                f"y[yi] = {act_expr(act, 'o')};")

    pr = Problem(
        tag="conv", params=_params(kernel), args=_args(kernel),
        p=mg, q=n * hw, k=k, nz=group, zpre=zpre,
        a=_packed("wg", k, pw), b=Operand(fast_k=False, pre=xpre, val=xval),
        ep_col=lambda q: f"const long long yq = (long long)({q} / {hw}) * {m * hw} + {q} % {hw};",
        ep_store=store)
    out = _instantiate(pr, kernel, small_rows_ok=False)
    if any(p.name == HALF_COPY for p in kernel.params):
        out.body = f"    (void){HALF_COPY};\n{out.body}"
    return out


def _depthwise(spec: dict, kernel: Kernel) -> CudaKernel:
    """Direct depthwise conv: a block covers up to 256 positions of one (image, channel) plane,
    the channel's kh*kw weights staged in shared memory, one thread per output."""
    n, c, h, w = spec["x_shape"]
    _, _, kh, kw = spec["w_shape"]
    _, _, ho, wo = spec["y_shape"]
    (sh, sw), (pt, pl, _, _), (dh, dw) = spec["strides"], spec["pads"], spec["dilations"]
    hw, taps = ho * wo, kh * kw
    if n * c * hw == 0:
        return _nothing(kernel)
    threads = min(NT, cdiv(hw, 32) * 32)
    per_plane = cdiv(hw, threads)
    adds = (" + b[ch]" if spec["bias"] else "") + (" + r[yi]" if spec["residual"] else "")
    text = f"""__global__ void @NAME@({_params(kernel)}) {{
  __shared__ float wt[{taps}];
  const int plane = blockIdx.x / {per_plane};
  const int pos = blockIdx.x % {per_plane} * {threads} + (int)threadIdx.x;
  const int ch = plane % {c};
  for (int t = threadIdx.x; t < {taps}; t += {threads}) wt[t] = w[ch * {taps} + t];
  __syncthreads();
  if (pos >= {hw}) return;
  const float *__restrict__ xp = x + (long long)plane * {h * w};
  const int ih0 = pos / {wo} * {sh} - {pt}, iw0 = pos % {wo} * {sw} - {pl};
  float acc = 0.0f;
  RVK_UNROLL
  for (int kr = 0; kr < {kh}; ++kr) {{
    const int ih = ih0 + kr * {dh};
    if ((unsigned)ih >= {h}u) continue;
    RVK_UNROLL
    for (int ks = 0; ks < {kw}; ++ks) {{
      const int iw = iw0 + ks * {dw};
      if ((unsigned)iw < {w}u) acc = fmaf(wt[kr * {kw} + ks], xp[ih * {w} + iw], acc);
    }}
  }}
  const long long yi = (long long)plane * {hw} + pos;
  const float o = acc{adds};
  y[yi] = {act_expr(spec["act"], "o")};
}}
"""
    name, text = named("dwconv", f"{c}x{h}x{w}_{kh}x{kw}", text)
    blocks = n * c * per_plane
    launch = f"    RVK_LAUNCH({name}, dim3({blocks}), dim3({threads}), ({_args(kernel)}));\n"
    return CudaKernel(launch, {UNROLL_NAME: UNROLL_TEXT, name: text})


# ------------------------------------------------------------------------------- gemm/matmul

def _b_operand(ptr: str, k: int, n: int, panel: Optional[int]) -> Operand:
    if panel is not None:
        return _packed(ptr, k, panel)
    return Operand(fast_k=False, val=lambda j, kk: f"{ptr}[(long long)({kk}) * {n} + {j}]")


@generator("gemm")
def gemm(spec: dict, kernel: Kernel) -> CudaKernel:
    """Y[M,N] = act(alpha * A @ B + beta * C); params a, b, [c], y."""
    m, n, k = spec["M"], spec["N"], spec["K"]
    alpha, beta, mode = spec["alpha"], spec["beta"], spec["c_mode"]
    if mode not in (None, "scalar", "row", "col", "full"):
        raise ModelError(f"internal: gemm c_mode {mode!r}")
    scaled = (lambda v: v) if alpha == 1.0 else (lambda v: f"{flt(alpha)} * {v}")
    if mode is not None:
        idx = {"scalar": "0", "row": "{p}", "col": "{q}", "full": "yi"}[mode]
        scale = "" if beta == 1.0 else f"{flt(beta)} * "
        add = lambda p, q: f" + {scale}c[{idx.format(p=p, q=q)}]"     # noqa: E731
    else:
        add = lambda p, q: ""                                          # noqa: E731
    act = spec["act"]
    pr = Problem(
        tag="gemm", params=_params(kernel), args=_args(kernel), p=m, q=n, k=k, nz=1,
        zpre=lambda z: "",
        a=Operand(fast_k=True, val=lambda i, kk: f"a[(long long)({i}) * {k} + {kk}]"),
        b=_b_operand("b", k, n, spec["b_panel"]),
        ep_col=lambda q: "",
        ep_store=lambda p, q, v: (f"const long long yi = (long long){p} * {n} + {q};\n"
                                  f"const float o = {scaled(v)}{add(p, q)};\n"
                                  f"y[yi] = {act_expr(act, 'o')};"))
    return _instantiate(pr, kernel, small_rows_ok=True)


def _batch_offset(z: str, bat, ybat, size: int) -> str:
    """C expression: float offset of the batch matrix of an operand with batch dims `bat`
    (broadcast where 1) for flat output batch index z; matrices `size` floats apart."""
    terms = []
    for d, (nd, ny) in enumerate(zip(bat, ybat)):
        if nd == 1:
            continue
        inner_y = int(np.prod(ybat[d + 1:], dtype=np.int64))
        stride = int(np.prod(bat[d + 1:], dtype=np.int64)) * size
        terms.append(f"(long long)({z} / {inner_y} % {ny}) * {stride}")
    return " + ".join(terms) or "0"


@generator("matmul")
def matmul(spec: dict, kernel: Kernel) -> CudaKernel:
    """numpy.matmul with batch broadcasting; params a, b, y. B batches are b_batch_floats
    apart (packed by b_panel when set)."""
    m, k, n, abat, bbat, ybat = matmul_dims(spec["a_shape"], spec["b_shape"])
    nz = int(np.prod(ybat, dtype=np.int64))
    bsz = spec["b_batch_floats"]

    def zpre(z: str) -> str:
        return (f"const float *__restrict__ az = a + {_batch_offset(z, abat, ybat, m * k)};\n"
                f"const float *__restrict__ bz = b + {_batch_offset(z, bbat, ybat, bsz)};\n"
                f"float *__restrict__ yz = y + (long long){z} * {m * n};")

    pr = Problem(
        tag="mm", params=_params(kernel), args=_args(kernel), p=m, q=n, k=k, nz=nz, zpre=zpre,
        a=Operand(fast_k=True, val=lambda i, kk: f"az[(long long)({i}) * {k} + {kk}]"),
        b=_b_operand("bz", k, n, spec["b_panel"]),
        ep_col=lambda q: "",
        ep_store=lambda p, q, v: f"yz[(long long){p} * {n} + {q}] = {v};")
    return _instantiate(pr, kernel, small_rows_ok=True)


@generator("matmul_t")
def matmul_t(spec: dict, kernel: Kernel) -> CudaKernel:
    """Y[z] = A[z] @ B[z], either operand stored transposed; params a, b, y."""
    nb, m, n, k = spec["nb"], spec["M"], spec["N"], spec["K"]

    def zpre(z: str) -> str:
        return (f"const float *__restrict__ az = a + (long long){z} * {m * k};\n"
                f"const float *__restrict__ bz = b + (long long){z} * {k * n};\n"
                f"float *__restrict__ yz = y + (long long){z} * {m * n};")

    a = Operand(fast_k=False, val=lambda i, kk: f"az[(long long)({kk}) * {m} + {i}]") \
        if spec["a_trans"] else \
        Operand(fast_k=True, val=lambda i, kk: f"az[(long long)({i}) * {k} + {kk}]")
    b = Operand(fast_k=True, val=lambda j, kk: f"bz[(long long)({j}) * {k} + {kk}]") \
        if spec["b_trans"] else \
        Operand(fast_k=False, val=lambda j, kk: f"bz[(long long)({kk}) * {n} + {j}]")
    pr = Problem(
        tag="mmt", params=_params(kernel), args=_args(kernel), p=m, q=n, k=k, nz=nb, zpre=zpre,
        a=a, b=b, ep_col=lambda q: "",
        ep_store=lambda p, q, v: f"yz[(long long){p} * {n} + {q}] = {v};")
    # the split-K template reads A k-contiguously and B along its rows
    return _instantiate(pr, kernel, small_rows_ok=not spec["a_trans"] and not spec["b_trans"])
