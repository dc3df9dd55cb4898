"""CUDA generator of the Winograd F(4x4, 3x3) conv (C lowering: kernels/conv/winograd.py): the
same three stages on the same buffers, reading the same packed U_e weights.

  1. input transform: a thread per (image, channel, tile) builds its 6x6 tile from x (zero
     outside) and writes V_e[c][t] into the scratch (consecutive threads, consecutive t);
  2. the 36 GEMMs OUT_e = U_e . V_e as one batched GEMM of the tile templates (z = e);
  3. output transform: a thread per (image, output channel, tile) reads its 36 sums and writes
     its 4x4 block of y (bias, residual, activation; clipped at the borders).
The transforms are the programs of kernels/conv/winograd_transforms.py, written out as scalar
code."""
from __future__ import annotations

from ...ops.activations import cuda_act_expr as act_expr
from ...errors import ModelError
from ..kernel import Kernel
from ..kernels.conv import winograd_transforms as wg
from ..kernels.conv.winograd import geometry
from .gemm import _nothing, _packed
from .registry import CudaKernel, generator
from .tiles import NT, UNROLL_NAME, UNROLL_TEXT, Operand, Problem, cdiv, choose_tile, named, tiled


def _input(g, total: int) -> str:
    lines = []
    for i in range(wg.TILE):
        for j in range(wg.TILE):
            lines.append(f"const int ih{i}{j} = ih0 + {i}, iw{i}{j} = iw0 + {j};")
            lines.append(f"d[{i * 6 + j}] = (unsigned)ih{i}{j} < {g.h}u && (unsigned)iw{i}{j} < "
                         f"{g.w}u ? xc[ih{i}{j} * {g.w} + iw{i}{j}] : 0.0f;")
    for i in range(wg.TILE):      # rows: d B
        lines += ["{"] + wg.c_lines(wg.IN_PROG, "f", lambda j, i=i: f"d[{i * 6 + j}]",
                                    lambda j, v, i=i: f"r[{i * 6 + j}] = {v};") + ["}"]
    ct = g.c * g.t
    for j in range(wg.TILE):      # columns: B^T (d B)
        lines += ["{"] + wg.c_lines(
            wg.IN_PROG, "f", lambda i, j=j: f"r[{i * 6 + j}]",
            lambda i, v, j=j: f"vc[(long long){(i * 6 + j) * ct}] = {v};") + ["}"]
    body = "\n  ".join(lines)
    return f"""__global__ void @NAME@(const float *__restrict__ x, float *__restrict__ v) {{
  const long long id = (long long)blockIdx.x * {NT} + threadIdx.x;
  if (id >= {total}LL) return;
  const int t = (int)(id % {g.tt});
  const long long u = id / {g.tt};                /* image * C + channel */
  const int c = (int)(u % {g.c}), img = (int)(u / {g.c});
  const int ih0 = t / {g.tw} * 4 - {g.pt}, iw0 = t % {g.tw} * 4 - {g.pl};
  const float *__restrict__ xc = x + u * {g.h * g.w};
  float *__restrict__ vc = v + (long long)c * {g.t} + (long long)img * {g.tt} + t;
  float d[36], r[36];
  {body}
}}
"""


def _output(g, total: int, bias: bool, residual: bool, act) -> str:
    mt = g.m * g.t
    lines = []
    for j in range(wg.TILE):      # columns: A^T m
        lines += ["{"] + wg.c_lines(
            wg.OUT_PROG, "f", lambda i, j=j: f"mm[(long long){(i * 6 + j) * mt}]",
            lambda i, v, j=j: f"s[{i * 6 + j}] = {v};") + ["}"]
    adds = (" + b[m]" if bias else "") + (" + r[yi]" if residual else "")
    for i in range(wg.M_OUT):     # rows: (A^T m) A, stored where inside y
        lines += ["{"] + wg.c_lines(
            wg.OUT_PROG, "f", lambda j, i=i: f"s[{i * 6 + j}]",
            lambda j, v, i=i: (f"if (oh + {i} < {g.ho} && ow + {j} < {g.wo}) {{ "
                               f"const long long yi = yp + (oh + {i}) * {g.wo} + ow + {j}; "
                               f"const float o = {v}{adds}; y[yi] = {act_expr(act, 'o')}; }}")
        ) + ["}"]
    body = "\n  ".join(lines)
    params = "const float *__restrict__ mb, " + \
        ("const float *__restrict__ b, " if bias else "") + \
        ("const float *__restrict__ r, " if residual else "") + "float *__restrict__ y"
    return f"""__global__ void @NAME@({params}) {{
  const long long id = (long long)blockIdx.x * {NT} + threadIdx.x;
  if (id >= {total}LL) return;
  const int t = (int)(id % {g.tt});
  const long long u = id / {g.tt};                /* image * M + output channel */
  const int m = (int)(u % {g.m}), img = (int)(u / {g.m});
  const int oh = t / {g.tw} * 4, ow = t % {g.tw} * 4;
  const long long yp = u * {g.ho * g.wo};
  const float *__restrict__ mm = mb + (long long)m * {g.t} + (long long)img * {g.tt} + t;
  float s[36];
  {body}
}}
"""


@generator("conv_winograd")
def conv_winograd(spec: dict, kernel: Kernel) -> CudaKernel:
    half = spec["half_rows"] is not None       # kernels/conv/half.py: float16 U beside or alone
    if half and not any(p.name == "wh" for p in kernel.params):
        raise ModelError("a conv built with --precision fp16 has only float16 weights, which "
                         "the CUDA kernels do not read: build with --precision auto for CUDA")
    xs, ws_, ys = spec["x_shape"], spec["w_shape"], spec["y_shape"]
    g = geometry(xs, ws_, ys, spec["pads"])
    if g.n * g.m * g.ho * g.wo == 0:
        return _nothing(kernel)
    bias, residual = spec["bias"], spec["residual"]
    upw = spec["u_panel"]
    usz = cdiv(g.m, upw) * upw * g.c
    vsz = wg.NE * g.c * g.t
    nin, nout = g.n * g.c * g.tt, g.n * g.m * g.tt
    iname, itext = named("wino_in", f"{g.c}x{g.h}x{g.w}", _input(g, nin))
    oname, otext = named("wino_out", f"{g.m}x{g.ho}x{g.wo}",
                         _output(g, nout, bias, residual, spec["act"]))

    def zpre(z: str) -> str:
        return (f"const float *__restrict__ uz = w + (long long){z} * {usz};\n"
                f"const float *__restrict__ vz = ws + (long long){z} * {g.c * g.t};\n"
                f"float *__restrict__ mz = ws + {vsz}LL + (long long){z} * {g.m * g.t};")

    pr = Problem(
        tag="wino", params="const float *__restrict__ w, float *__restrict__ ws", args="w, ws",
        p=g.m, q=g.t, k=g.c, nz=wg.NE, zpre=zpre, a=_packed("uz", g.c, upw),
        b=Operand(fast_k=False, val=lambda j, kk: f"vz[(long long)({kk}) * {g.t} + {j}]"),
        ep_col=lambda q: "",
        ep_store=lambda p, q, v: f"mz[(long long){p} * {g.t} + {q}] = {v};")
    gname, gtext, glaunch = tiled(pr, choose_tile(pr.p, pr.q))
    oargs = "ws + " + str(vsz) + ("LL, b" if bias else "LL") + (", r" if residual else "") + ", y"
    # a kernel carrying the direct form's weights too (conv.by_target): the GPU takes Winograd
    unused = ("    (void)wd;\n" if spec["direct_panel"] is not None else "") + \
        ("    (void)wh;\n" if half else "")
    launch = (f"{unused}    RVK_LAUNCH({iname}, dim3({cdiv(nin, NT)}), dim3({NT}), (x, ws));\n"
              f"    {glaunch}\n"
              f"    RVK_LAUNCH({oname}, dim3({cdiv(nout, NT)}), dim3({NT}), ({oargs}));\n")
    return CudaKernel(launch, {UNROLL_NAME: UNROLL_TEXT, iname: itext, gname: gtext,
                               oname: otext})
