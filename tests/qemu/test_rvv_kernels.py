"""RVV intrinsic kernels, cross-compiled for riscv64 and run under qemu-user at every VLEN.

Each kernel family is one translation unit (tests/kernel_harness.py: kernels k0, k1, ... with
their support merged as the emitter does) plus a tiny `main` that reads one float buffer from a
file, calls every kernel on pointers into it and writes the buffer back. The buffer holds every
call's inputs (weights already transformed), its output and workspace (both NaN-filled: reading
unwritten memory shows), with sentinel guards between arrays (a write out of bounds shows).

The executable is built with clang-16 (`__riscv_v_intrinsic` = 11000, the 0.11 API) and run at
VLEN 128, 256, 512, 1024 and with tail/mask-agnostic elements set to all ones; a zig cc build
(clang with the 1.0 API) of the same sources must be warning-clean and give the same results.
The assembly proves the intrinsic paths are the ones compiled in. A whole model built by
`rvvkit.build` is driven through `rvvkit_run` by a small main and compared with onnxruntime.
"""
from __future__ import annotations

import functools
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import conv_ref
from kernel_harness import C_HDR, call_arrays, translation_unit

from rvvkit.ops.activations import Act
from rvvkit.codegen.kernels import elementwise as ew
from rvvkit.codegen.kernels import layout, pool
from rvvkit.codegen.kernels.conv import conv2d
from rvvkit.codegen.kernels.gemm import gemm, matmul
from rvvkit.codegen.kernels.gemm_rvv import uk_plan
from rvvkit.jit.targets import riscv

RISCV = riscv()

SYSROOT = Path(RISCV.sysroot)
QEMU = shutil.which("qemu-riscv64")
CLANG = shutil.which("clang-16")
pytestmark = [pytest.mark.qemu, pytest.mark.skipif(
    QEMU is None or CLANG is None or shutil.which("ld.lld-16") is None or not SYSROOT.is_dir(),
    reason="needs qemu-riscv64, clang-16 + lld-16 and the riscv64 sysroot (scripts/setup.sh)")]

WARN = ["-Wall", "-Wextra", "-Werror"]
CLANG_RVV = [CLANG or "clang-16", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-O2",
             "-fuse-ld=lld", "-std=c11"]
# zig's clang 19+ (RVV intrinsics API 1.0); linked against glibc, run with the Debian sysroot
ZIG_RVV = [sys.executable, "-m", "ziglang", "cc", "--target=riscv64-linux-gnu",
           "-mcpu=baseline_rv64+v", "-O2", "-std=c11"]
CPUS = {f"vlen{v}": RISCV.cpu_string(v) for v in RISCV.vlens}
CPUS["vlen256_ta_ma_ones"] = RISCV.cpu_string(256, tail_ones=True)
CPUS["vlen128_ta_ma_ones"] = RISCV.cpu_string(128, tail_ones=True)

GUARD_VALUE = np.float32(-12345.5)
GUARD = 16        # floats of sentinel between arrays (and 64-byte alignment of each array)

RELU, CLIP = Act("relu"), Act("clip", (-0.5, 0.75))
LEAKY, LEAKY2 = Act("leaky_relu", (0.1,)), Act("leaky_relu", (1.5,))
SIGMOID = Act("sigmoid")


def _zig_available() -> str:
    """'' when `python -m ziglang` works, else why not."""
    try:
        proc = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"ziglang not runnable: {e}"
    return "" if proc.returncode == 0 else "ziglang not installed (pip install ziglang)"


class Family:
    """Calls of lowered kernels on given inputs, as one riscv64 program.

    calls: list of (Lowered, [input arrays], output shape, reference output)."""

    def __init__(self, name: str, calls):
        self.name, self.calls = name, calls
        # buffer layout: [guard][array][guard][array]...
        chunks, self.out_at, stmts = [np.full(GUARD, GUARD_VALUE, np.float32)], [], []
        at = GUARD
        for i, (lo, inputs, out_shape, _) in enumerate(calls):
            arrs = call_arrays(lo, inputs, out_shape)
            offs = []
            for j, a in enumerate(arrs):
                size = -(-a.size // GUARD) * GUARD
                flat = np.full(size + GUARD, GUARD_VALUE, np.float32)
                flat[:a.size] = a.reshape(-1)
                if j == len(inputs):
                    self.out_at.append((at, out_shape))
                offs.append(at)
                chunks.append(flat)
                at += size + GUARD
            stmts.append(f"  k{i}({', '.join(f'buf + {o}' for o in offs)});")
        self.buffer = np.concatenate(chunks)
        main = f"""
int main(int argc, char **argv) {{
  if (argc != 3) return 2;
  float *buf = (float *)malloc({self.buffer.size} * sizeof(float));
  FILE *f = fopen(argv[1], "rb");
  if (!buf || !f || fread(buf, sizeof(float), {self.buffer.size}, f) != {self.buffer.size})
    return 3;
  fclose(f);
{chr(10).join(stmts)}
  f = fopen(argv[2], "wb");
  if (!f || fwrite(buf, sizeof(float), {self.buffer.size}, f) != {self.buffer.size}) return 4;
  fclose(f);
  free(buf);
  return 0;
}}
"""
        self.source = translation_unit(C_HDR, [lo.kernel for lo, _, _, _ in calls]) + main

    def write(self, d: Path) -> Path:
        src = d / f"{self.name}.c"
        src.write_text(self.source)
        self.buffer.tofile(d / f"{self.name}.in")
        return src

    def check(self, out: np.ndarray, rtol=1e-4, atol=1e-4):
        """Compare every output with its reference and check the guards are intact."""
        for i, ((at, shape), (lo, _, _, ref)) in enumerate(zip(self.out_at, self.calls)):
            y = out[at:at + math.prod(shape)].reshape(shape)
            np.testing.assert_allclose(y, ref, rtol=rtol, atol=atol,
                                       err_msg=f"{self.name} call {i} ({lo.kernel.hint})")
        # everything that was a guard before the run must still be one
        was_guard = self.buffer == GUARD_VALUE
        bad = np.flatnonzero(was_guard & (out != GUARD_VALUE))
        assert bad.size == 0, f"{self.name}: writes out of bounds at floats {bad[:8]}"


def compile_rvv(src: Path, exe: Path, cmd=CLANG_RVV, extra=()):
    proc = subprocess.run([*cmd, *WARN, *extra, str(src), "-o", str(exe), "-lm"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), \
        f"{' '.join(cmd)} failed:\n{proc.stderr[:6000]}"
    return exe


def run_qemu(exe: Path, cpu: str, inp: Path, timeout=120) -> np.ndarray:
    out = inp.with_suffix(f".{abs(hash(cpu))}.out")
    proc = subprocess.run([QEMU, "-L", str(SYSROOT), "-cpu", cpu, str(exe), str(inp), str(out)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"qemu ({cpu}) exit {proc.returncode}: {proc.stderr[-2000:]}"
    return np.fromfile(out, np.float32)


# ------------------------------------------------------------------------------- references

def rng_(seed):
    return np.random.default_rng(seed)


def act_ref(act, y):
    return y if act is None else act.apply_numpy(y)


# ------------------------------------------------------------------------------ the families

# (N, C, H, W, M, (kh, kw), group, strides, pads, dilations, bias, residual, act)
CONV = [
    (1, 3, 13, 17, 8, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    (2, 4, 7, 7, 5, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, True, RELU),
    (1, 16, 1, 1, 33, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), False, False, CLIP),
    (1, 6, 17, 13, 4, (5, 3), 2, (2, 3), (2, 0, 1, 1), (1, 1), True, True, None),
    (1, 5, 11, 9, 7, (3, 3), 1, (1, 1), (2, 2, 2, 2), (2, 2), False, True, LEAKY),
    (1, 64, 7, 7, 96, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, True, RELU),
    (1, 32, 14, 14, 64, (1, 1), 1, (2, 2), (0, 0, 0, 0), (1, 1), True, False, None),
    (1, 3, 30, 30, 16, (7, 7), 1, (2, 2), (3, 3, 3, 3), (1, 1), True, False, RELU),
    (1, 600, 3, 3, 20, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    (1, 7, 13, 17, 11, (3, 3), 1, (3, 3), (0, 1, 2, 0), (1, 1), True, True, CLIP),
    (2, 8, 9, 9, 16, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), True, False, LEAKY2),
    (1, 300, 13, 13, 40, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, True, RELU),
    (1, 64, 7, 7, 130, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, False, SIGMOID),
    (1, 32, 28, 28, 48, (3, 3), 1, (2, 2), (1, 1, 1, 1), (1, 1), True, False, RELU),
    (1, 16, 27, 27, 64, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, RELU),
    # depthwise
    (1, 8, 13, 13, 8, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), True, False, RELU),
    (2, 8, 14, 14, 8, (3, 3), 8, (2, 2), (0, 1, 1, 0), (1, 1), True, True, None),
    (1, 8, 70, 70, 8, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), False, False, CLIP),
    (2, 6, 9, 9, 6, (3, 3), 6, (3, 3), (1, 1, 1, 1), (2, 2), True, True, RELU),
    (1, 3, 1, 1, 3, (3, 3), 3, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    (1, 4, 17, 11, 4, (5, 5), 4, (2, 1), (2, 2, 2, 2), (1, 1), False, False, LEAKY),
    (1, 5, 9, 9, 5, (3, 3), 5, (1, 1), (1, 1, 1, 1), (1, 1), True, False, SIGMOID),
]


def _out_hw(h, w, k, st, pd, dl):
    return ((h + pd[0] + pd[2] - dl[0] * (k[0] - 1) - 1) // st[0] + 1,
            (w + pd[1] + pd[3] - dl[1] * (k[1] - 1) - 1) // st[1] + 1)


def conv_calls(cases, seed0=0):
    calls = []
    for i, (n, c, h, w, m, k, g, st, pd, dl, bias, res, act) in enumerate(cases):
        ho, wo = _out_hw(h, w, k, st, pd, dl)
        lo = conv2d((n, c, h, w), (m, c // g) + k, (n, m, ho, wo), group=g, strides=st,
                    pads=pd, dilations=dl, bias=bias, residual=res, act=act)
        r = rng_(seed0 + i)
        scale = np.float32(1.0 / math.sqrt(c // g * k[0] * k[1]))   # outputs of order 1
        x = r.standard_normal((n, c, h, w)).astype(np.float32)
        wt = (r.standard_normal((m, c // g) + k) * scale).astype(np.float32)
        b = r.standard_normal(m).astype(np.float32) if bias else None
        ref = conv_ref(x.astype(np.float64), wt.astype(np.float64), b, g, st, pd, dl)
        ins = [x, wt] + ([b] if bias else [])
        if res:
            rr = r.standard_normal(ref.shape).astype(np.float32)
            ref = ref + rr
            ins.append(rr)
        ref = act_ref(act, ref)
        calls.append((lo, ins, ref.shape, ref))
    return calls


GEMM = [(m, n, k, bc, cm, al, be, act)
        for (m, n, k) in [(1, 7, 5), (5, 13, 17), (1, 300, 700), (64, 3, 100), (33, 1, 9),
                          (7, 65, 1), (100, 100, 800), (14, 129, 40), (3, 200, 64)]
        for bc in (False, True)
        for cm, al, be, act in [(None, 1.0, 1.0, None), ("scalar", 0.5, 2.0, RELU),
                                ("row", 1.0, -1.0, LEAKY), ("col", 1.0, 1.0, CLIP),
                                ("full", -0.25, 0.5, None)]]
MATMUL = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 6)), ((4,), (4, 5)),
          ((2, 3, 4), (2, 4, 2)), ((1, 5, 7), (3, 7, 33)), ((2, 3, 1, 40), (1, 40, 70))]


def gemm_calls():
    calls = []
    for i, (m, n, k, bc, cm, al, be, act) in enumerate(GEMM):
        lo = gemm(m, n, k, b_const=bc, c_mode=cm, alpha=al, beta=be, act=act)
        r = rng_(i)
        a = r.standard_normal((m, k)).astype(np.float32)
        b = (r.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
        ref = al * (a.astype(np.float64) @ b)
        ins = [a, b]
        if cm:
            shape = {"scalar": (1,), "row": (m, 1), "col": (n,), "full": (m, n)}[cm]
            c = r.standard_normal(shape).astype(np.float32)
            ref = ref + be * c
            ins.append(c)
        calls.append((lo, ins, (m, n), act_ref(act, ref)))
    for i, (sa, sb) in enumerate(MATMUL):
        for bc in (False, True):
            r = rng_(100 + i)
            a = r.standard_normal(sa).astype(np.float32)
            b = r.standard_normal(sb).astype(np.float32)
            ref = np.matmul(a.astype(np.float64), b)
            calls.append((matmul(sa, sb, ref.shape, b_const=bc), [a, b], ref.shape, ref))
    return calls


def elementwise_calls():
    calls = []
    cases = [("Add", [(2, 3, 5, 7), (3, 1, 1)], RELU), ("Sub", [(1,), (4, 37)], None),
             ("Div", [(4, 37), (1,)], None), ("Div", [(1,), (2, 67)], CLIP),
             ("Mul", [(3, 1, 5), (1, 4, 1)], LEAKY), ("Sum", [(2, 50), (2, 50), (1, 50)], None),
             ("Sub", [(6, 129), (6, 129)], LEAKY2), ("Add", [(5, 1), (5, 300)], SIGMOID),
             ("Mul", [(1000,), (1000,)], None), ("Add", [(1, 1), (1, 1)], RELU)]
    ops = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
           "Sum": np.add}
    for i, (op, shapes, act) in enumerate(cases):
        r = rng_(200 + i)
        xs = [(r.random(s) + 0.5 if op == "Div" else r.standard_normal(s)).astype(np.float32)
              for s in shapes]
        ref = xs[0].astype(np.float64)
        for x in xs[1:]:
            ref = ops[op](ref, x)
        calls.append((ew.nary(op, shapes, ref.shape, act), xs, ref.shape, act_ref(act, ref)))
    for i, (act, shape) in enumerate([(RELU, (3, 77)), (CLIP, (1000,)), (LEAKY, (5, 7)),
                                      (LEAKY2, (65,)), (Act("tanh"), (33,)), (SIGMOID, (9, 9)),
                                      (Act("clip", (0.0, float("inf"))), (100,))]):
        x = rng_(300 + i).standard_normal(shape).astype(np.float32)
        calls.append((ew.unary(act, shape), [x], shape, act_ref(act, x.astype(np.float64))))
    for i, (shape, perm) in enumerate([((1, 4, 6, 7, 7), (0, 2, 1, 3, 4)), ((2, 3, 5), (0, 2, 1)),
                                       ((3, 70), (1, 0)), ((2, 3, 4, 5), (0, 2, 3, 1)),
                                       ((5, 1, 7), (1, 0, 2))]):
        x = rng_(450 + i).standard_normal(shape).astype(np.float32)
        ref = np.transpose(x, perm)
        calls.append((layout.transpose(shape, perm), [x], ref.shape, ref))
    for i, shapes in enumerate([[(2, 3, 5), (2, 4, 5)], [(1, 7), (1, 70), (1, 1)]]):
        xs = [rng_(470 + i).standard_normal(s).astype(np.float32) for s in shapes]
        ref = np.concatenate(xs, axis=1)
        calls.append((layout.concat(shapes, 1), xs, ref.shape, ref))
    x = rng_(480).standard_normal(333).astype(np.float32)
    calls.append((ew.copy(333), [x], (333,), x))
    for i, (shape, act) in enumerate([((2, 5, 7, 9), RELU), ((1, 16, 1), None),
                                      ((1, 3, 33, 33), CLIP), ((2, 4, 5), SIGMOID)]):
        r = rng_(400 + i)
        x = r.standard_normal(shape).astype(np.float32)
        s = r.standard_normal(shape[1]).astype(np.float32)
        t = r.standard_normal(shape[1]).astype(np.float32)
        bs = (1, shape[1]) + (1,) * (len(shape) - 2)
        ref = x.astype(np.float64) * s.reshape(bs) + t.reshape(bs)
        calls.append((ew.channel_affine(shape, act), [x, s, t], shape, act_ref(act, ref)))
    return calls


def pool_ref(kind, x, k, st, pd, dl, cip):
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = k, st, pd, dl
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, c, ho, wo))
    for oh in range(ho):
        for ow in range(wo):
            h0, w0 = oh * sh - pt, ow * sw - pl
            vals, cnt = [], 0
            for i in range(kh):
                for j in range(kw):
                    hh, ww = h0 + i * dh, w0 + j * dw
                    if 0 <= hh < h and 0 <= ww < w:
                        vals.append(x[:, :, hh, ww])
            vals = np.stack(vals)
            if kind == "max":
                y[:, :, oh, ow] = vals.max(0)
            elif cip:
                he = min(h0 + kh, h + pb) - h0
                we = min(w0 + kw, w + pr) - w0
                y[:, :, oh, ow] = vals.sum(0) / (he * we)
            else:
                y[:, :, oh, ow] = vals.sum(0) / len(vals)
    return y


POOL = [("max", (1, 3, 13, 17), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),
        ("max", (2, 2, 111, 111), (3, 3), (2, 2), (0, 0, 0, 0), (1, 1), False),
        ("max", (1, 4, 9, 10), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
        ("max", (1, 3, 12, 11), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),
        ("max", (1, 2, 14, 70), (3, 2), (1, 3), (1, 0, 2, 1), (2, 1), False),
        ("avg", (1, 3, 13, 17), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),
        ("avg", (1, 3, 13, 17), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True),
        ("avg", (2, 3, 20, 33), (5, 3), (2, 2), (2, 1, 2, 1), (1, 1), True),
        ("avg", (1, 2, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
        ("avg", (1, 2, 7, 40), (3, 3), (3, 2), (0, 2, 1, 0), (1, 1), False),
        ("max", (1, 2, 3, 3), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), False)]


def pool_calls():
    calls = []
    for i, (kind, shape, k, st, pd, dl, cip) in enumerate(POOL):
        x = rng_(500 + i).standard_normal(shape).astype(np.float32)
        ref = pool_ref(kind, x.astype(np.float64), k, st, pd, dl, cip)
        lo = pool.pool2d(kind, shape, ref.shape, k, st, pd, dl, cip)
        calls.append((lo, [x], ref.shape, ref))
    for i, (kind, shape) in enumerate([("avg", (2, 5, 13, 13)), ("max", (1, 7, 7, 7)),
                                       ("avg", (1, 3, 1, 1)), ("max", (1, 2, 33, 65)),
                                       ("avg", (1, 1000, 1, 3))]):
        x = rng_(600 + i).standard_normal(shape).astype(np.float32)
        red = x.astype(np.float64).reshape(shape[0] * shape[1], -1)
        ref = (red.mean(1) if kind == "avg" else red.max(1)).reshape(shape[:2] + (1, 1))
        calls.append((pool.global_pool(kind, shape), [x], ref.shape, ref))
    for i, (shape, size, alpha, beta, bias) in enumerate([
            ((1, 16, 13, 13), 5, 1e-4, 0.75, 1.0), ((2, 7, 3, 45), 3, 0.5, 0.75, 2.0),
            ((1, 6, 5, 5), 4, 0.1, 0.5, 1.5), ((1, 5, 70), 5, 0.2, 1.0, 1.0),
            ((1, 4, 3, 3), 3, 0.3, 0.6, 1.0)]):
        x = rng_(650 + i).standard_normal(shape).astype(np.float32)
        xd = x.astype(np.float64)
        lo_, hi_ = (size - 1) // 2, size - 1 - (size - 1) // 2
        sq = np.zeros_like(xd)
        for ch in range(shape[1]):
            sq[:, ch] = (xd[:, max(0, ch - lo_):min(shape[1] - 1, ch + hi_) + 1] ** 2).sum(1)
        ref = xd * (bias + alpha / size * sq) ** -beta
        calls.append((pool.lrn(shape, size, alpha, beta, bias), [x], shape, ref))
    for i, (shape, axis, coerce, log) in enumerate([((2, 1000), 1, False, False),
                                                    ((3, 7), 1, False, True),
                                                    ((2, 3, 4, 5), 1, False, False),
                                                    ((2, 3, 33), 1, True, False),
                                                    ((1, 1), 1, False, True),
                                                    ((4, 257), -1 + 2, False, True)]):
        x = (3 * rng_(700 + i).standard_normal(shape)).astype(np.float64)
        outer = math.prod(shape[:axis])
        xr = x.reshape(outer, -1) if coerce else x
        ax = 1 if coerce else axis
        e = np.exp(xr - xr.max(ax, keepdims=True))
        ref = (np.log(e / e.sum(ax, keepdims=True)) if log else e / e.sum(ax, keepdims=True))
        calls.append((pool.softmax(shape, axis, coerce, log), [x.astype(np.float32)], shape,
                      ref.reshape(shape)))
    return calls


FAMILIES = {
    "conv": lambda: conv_calls(CONV),
    "gemm": gemm_calls,
    "elementwise": elementwise_calls,
    "pool": pool_calls,
}


@functools.lru_cache(maxsize=None)
def _family(name):
    return Family(name, FAMILIES[name]())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> (Family, executable, input file), all built with clang-16."""
    d = tmp_path_factory.mktemp("rvv")
    out = {}
    for name in FAMILIES:
        fam = _family(name)
        src = fam.write(d)
        out[name] = (fam, compile_rvv(src, d / name), d / f"{name}.in")
    return out


@pytest.mark.parametrize("cpu", sorted(CPUS))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rvv_kernels_match_numpy(built, family, cpu):
    fam, exe, inp = built[family]
    fam.check(run_qemu(exe, CPUS[cpu], inp))


# ------------------------------------------------------------------- zig cc: intrinsics API 1.0

ZIG_WHY = _zig_available()


@pytest.fixture(scope="module")
def zig_built(built, tmp_path_factory):
    if ZIG_WHY:
        pytest.skip(ZIG_WHY)
    d = tmp_path_factory.mktemp("zig")
    out = {}
    for name, (fam, _, inp) in built.items():
        src = fam.write(d)
        out[name] = (fam, compile_rvv(src, d / name, ZIG_RVV), inp)
    return out


@pytest.mark.parametrize("cpu", ["vlen128_ta_ma_ones", "vlen1024"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rvv_kernels_zig_api_1_0(zig_built, family, cpu):
    fam, exe, inp = zig_built[family]
    fam.check(run_qemu(exe, CPUS[cpu], inp))


def test_zig_defines_api_1_0(tmp_path):
    """The zig build really is the 1.0 API (and clang-16 the 0.11 one)."""
    if ZIG_WHY:
        pytest.skip(ZIG_WHY)
    src = tmp_path / "v.c"
    src.write_text("int v = __riscv_v_intrinsic;\n")
    for cmd, lo, hi in ((ZIG_RVV, 1000000, 10 ** 9), (CLANG_RVV, 11000, 11999)):
        proc = subprocess.run([*cmd, "-E", "-P", str(src)], capture_output=True, text=True,
                              check=True)
        value = int(re.search(r"int v = (\d+)", proc.stdout).group(1))
        assert lo <= value <= hi, (cmd[0], value)


@pytest.mark.parametrize("lang", [["-x", "c", "-std=c11"], ["-x", "c++", "-std=c++11"]],
                         ids=["c", "c++"])
def test_zig_compiles_model_sources_clean(lang, tmp_path):
    """A whole generated translation unit (every kernel family of a light model) compiles
    warning-free with the 1.0 API, as C and as C++."""
    if ZIG_WHY:
        pytest.skip(ZIG_WHY)
    import rvvkit
    from rvvkit.zoo import light_model
    src = tmp_path / "shufflenet.c"
    src.write_text(rvvkit.build(light_model("shufflenet")).c_source)
    cmd = [c for c in ZIG_RVV if not c.startswith("-std")]
    proc = subprocess.run([*cmd, *WARN, *lang, "-c", str(src), "-o", str(tmp_path / "m.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr[:4000]


# --------------------------------------------------- the intrinsic paths are what got compiled

def _functions(asm: str):
    """name -> assembly text of each function in clang's -S output."""
    out, cur = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):", line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def assembly(built, tmp_path_factory):
    d = tmp_path_factory.mktemp("asm")
    out = {}
    for name, (fam, _, _) in built.items():
        src = fam.write(d)
        cmd = [c for c in CLANG_RVV if not c.startswith("-fuse-ld")]   # no link: unused
        proc = subprocess.run([*cmd, *WARN, "-S", str(src), "-o", "-"],
                              capture_output=True, text=True, check=True)
        out[name] = _functions(proc.stdout)
    return out


def test_gemm_micro_kernels_use_vfmacc_at_every_lmul(assembly):
    """Every micro-kernel is an RVV kernel: vfmacc.vf with scalar broadcasts of the packed A
    panel, one LMUL variant per VLEN range of its plan, no vector spills."""
    seen = fmacc = 0
    for fam in ("gemm", "conv"):
        for name, text in assembly[fam].items():
            m = re.match(r"rvk_gemm_micro_(\d+)x(\d+)(?:_indirect_([ab]))?$", name)
            if not m:
                continue
            seen += 1
            mr, nr, ind = int(m.group(1)), int(m.group(2)), m.group(3) or ""
            # (clang propagates a constant kb = 1 into a kernel only used with K = 1: vfmul)
            assert re.search(r"vf(macc|mul)\.vf", text) and "flw" in text, name
            fmacc += "vfmacc.vf" in text
            for _, lmul in uk_plan(mr, nr, ind):
                assert re.search(rf"vsetvli\s+\w+, \w+, e32, m{lmul}\b", text), (name, lmul)
            assert not re.search(r"vs\dr\.v|vl\dre", text), f"{name}: vector spills"
    assert seen >= 5 and fmacc >= seen - 2


@pytest.mark.parametrize("family,pattern", [
    ("conv", r"vfmacc\.vf"),                        # depthwise grid + epilogues
    ("elementwise", r"vf(add|sub|rsub|mul|div|rdiv|max|min|madd)\.v[vf]"),
    ("pool", r"vfred(usum|max)\.vs"),
    ("pool", r"vlse32\.v"),
])
def test_kernels_use_intrinsics(assembly, family, pattern):
    text = "\n".join(assembly[family].values())
    assert re.search(pattern, text), f"{family}: no {pattern}"


def test_every_kernel_has_vector_code(assembly):
    """Each exported kernel k<i> executes vector instructions (its own or its helpers'),
    except the scalar fall-backs: element-wise sigmoid/tanh, softmax over a non-last axis,
    LRN with an unusual beta, a one-element output, a pooling window larger than the input."""
    for fam_name, funcs in assembly.items():
        fam = _family(fam_name)
        for i, (lo, _, out_shape, _) in enumerate(fam.calls):
            seen, todo, text = set(), [f"k{i}"], ""
            while todo:                         # the kernel and every helper it calls
                fn = todo.pop()
                if fn in seen or fn not in funcs:
                    continue
                seen.add(fn)
                text += funcs[fn]
                todo += re.findall(r"(?:call|tail)\s+(rvk_\w+)", funcs[fn])
            if re.search(r"\bv(le|se|lse|sse)32\.v|\bvf\w+\.v", text):
                continue
            # the documented scalar fall-backs: they call expf/tanhf/powf, have one element,
            # or are a pooling whose every window crosses the border (no vector interior)
            assert re.search(r"\b(expf|tanhf|powf)\(", lo.kernel.body) or \
                math.prod(out_shape) == 1 or \
                (lo.kernel.hint.endswith("pool") and "__riscv_" not in lo.kernel.body), \
                f"{fam_name} k{i} ({lo.kernel.hint}) has no vector code"


# ---------------------------------------------------------------- a whole model via rvvkit_run

MODEL_MAIN = """
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const long nw = rvvkit_weights_floats(), na = rvvkit_arena_floats();
  float *w = (float *)malloc((size_t)(nw + 1) * sizeof(float));
  float *a = (float *)malloc((size_t)(na + 1) * sizeof(float));
  const float *in[8];
  float *out[8];
  FILE *f = fopen(argv[1], "rb");
  if (!w || !a || !f || fread(w, sizeof(float), (size_t)nw, f) != (size_t)nw) return 3;
  fclose(f);
  f = fopen(argv[2], "rb");
  for (int i = 0; i < rvvkit_num_inputs(); ++i) {
    const long n = rvvkit_input_floats(i);
    float *p = (float *)malloc((size_t)n * sizeof(float));
    if (!p || fread(p, sizeof(float), (size_t)n, f) != (size_t)n) return 4;
    in[i] = p;
  }
  fclose(f);
  for (int i = 0; i < rvvkit_num_outputs(); ++i)
    out[i] = (float *)malloc((size_t)rvvkit_output_floats(i) * sizeof(float));
  for (long i = 0; i < na; ++i) a[i] = NAN;   /* reading an unwritten arena float shows */
  if (rvvkit_run(w, a, in, out) != 0) return 5;
  f = fopen(argv[3], "wb");
  for (int i = 0; i < rvvkit_num_outputs(); ++i)
    if (fwrite(out[i], sizeof(float), (size_t)rvvkit_output_floats(i), f)
        != (size_t)rvvkit_output_floats(i)) return 6;
  fclose(f);
  return 0;
}
"""


def _model():
    """Most kernel families once, through the whole pipeline (fusion, plan, arena)."""
    from onnx import helper
    from conftest import make_model, rand
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("LeakyRelu", ["c1"], ["r1"], alpha=0.2),
        node("Conv", ["r1", "wd", "bd"], ["c2"], group=10, pads=[1, 1, 1, 1]),
        node("Add", ["c2", "r1"], ["s1"]),
        node("BatchNormalization", ["s1", "g", "be", "mu", "var"], ["bn"]),
        node("Clip", ["bn", "lo", "hi"], ["r2"]),
        node("MaxPool", ["r2"], ["p1"], kernel_shape=[3, 3], strides=[2, 2]),
        node("Conv", ["p1", "wp"], ["c3"]),
        node("Sub", ["c3", "half"], ["d1"]),
        node("Div", ["d1", "two"], ["d2"]),
        node("Transpose", ["d2"], ["t"], perm=[0, 1, 3, 2]),
        node("AveragePool", ["t"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("GlobalMaxPool", ["ap"], ["gmp"]),
        node("Flatten", ["ap"], ["f"]),
        node("MatMul", ["f", "fw"], ["mm"]),
        node("LogSoftmax", ["mm"], ["y"], axis=1),
    ]
    inits = {"w1": rand(10, 3, 3, 3, seed=1, scale=0.3), "b1": rand(10, seed=2, scale=0.1),
             "wd": rand(10, 1, 3, 3, seed=3, scale=0.3), "bd": rand(10, seed=4, scale=0.1),
             "g": rand(10, seed=5) + 1.0, "be": rand(10, seed=6),
             "mu": rand(10, seed=7), "var": np.abs(rand(10, seed=8)) + 0.5,
             "lo": np.array(-1.0, np.float32), "hi": np.array(1.5, np.float32),
             "wp": rand(21, 10, 1, 1, seed=9, scale=0.3),
             "half": np.full((21, 1, 1), 0.5, np.float32), "two": np.array(2.0, np.float32),
             "fw": rand(21 * 8 * 8, 37, seed=10, scale=0.05)}
    return make_model(nodes, [("x", (1, 3, 17, 17))], ["y", "gmp"], inits, name="rvv_mixed")


@pytest.mark.parametrize("cpu", ["vlen128", "vlen256_ta_ma_ones", "vlen1024"])
def test_whole_model_through_rvvkit_run(cpu, tmp_path_factory):
    import rvvkit
    from conftest import rand, run_ort
    d = tmp_path_factory.getbasetemp() / "rvv_model"
    exe = d / "model"
    model = _model()
    feeds = {"x": rand(1, 3, 17, 17, seed=12)}
    if not exe.exists():
        d.mkdir(exist_ok=True)
        art = rvvkit.build(model)
        assert "__riscv_vfmacc_vf_f32m" in art.c_source
        src = d / "model.c"
        src.write_text(art.c_source + "#include <stdio.h>\n#include <stdlib.h>\n" + MODEL_MAIN)
        np.asarray(art.weights_array(), np.float32).tofile(d / "w.bin")
        feeds["x"].tofile(d / "x.bin")
        compile_rvv(src, d / "model.tmp")
        (d / "model.tmp").rename(exe)
    out = d / f"{cpu}.out"
    proc = subprocess.run([QEMU, "-L", str(SYSROOT), "-cpu", CPUS[cpu], str(exe),
                           str(d / "w.bin"), str(d / "x.bin"), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    flat = np.fromfile(out, np.float32)
    ref = run_ort(model, feeds)
    at = 0
    for name in ("y", "gmp"):
        want = ref[name]
        got = flat[at:at + want.size].reshape(want.shape)
        at += want.size
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
    assert at == flat.size
