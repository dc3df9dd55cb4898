"""CUDA generators of the non-GEMM kernels (codegen/cuda/elementwise.py, pool.py), checked
against numpy.

Every case's C lowering is built (so the spec is exactly what the planner records), its CUDA
launcher and __global__ functions are generated, and all cases go into one translation unit:
run on the CPU through the emulator header (runtime_c/rvk_cuda_emu.h, g++) and compiled with
nvcc with warnings as errors. A few cases are generated with the grid caps lowered so that the
grid-stride and block-stride loops take more than one trip.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from rvvkit.ops.activations import Act
from rvvkit.codegen.cuda import elementwise as cew
from rvvkit.codegen.cuda import pool as cpool
from rvvkit.codegen.kernels import elementwise as ew
from rvvkit.codegen.kernels import layout, pool
from kernel_harness import ORDERS, EmuLib, lower, nvcc_compiles

RELU, CLIP = Act("relu"), Act("clip", (-0.5, 0.75))
LEAKY, SIG, TANH = Act("leaky_relu", (0.1,)), Act("sigmoid"), Act("tanh")


def rnd(*shape, seed=0, lo=None):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(x) + lo if lo is not None else x


# ---------------------------------------------------------------------------------------------
# numpy references


def pool_ref(kind, x, ks, strides, pads, dil, cip, out_hw):
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = ks, strides, pads, dil
    h, w = x.shape[2:]
    y = np.empty(x.shape[:2] + tuple(out_hw), np.float32)
    for oh in range(out_hw[0]):
        for ow in range(out_hw[1]):
            h0, w0 = oh * sh - pt, ow * sw - pl
            rows = [h0 + a * dh for a in range(kh) if 0 <= h0 + a * dh < h]
            cols = [w0 + b * dw for b in range(kw) if 0 <= w0 + b * dw < w]
            win = x[:, :, rows][:, :, :, cols].astype(np.float64)
            if kind == "max":
                y[:, :, oh, ow] = win.max(axis=(2, 3))
            else:   # ONNX: padded positions count, positions beyond the pads never do
                div = ((min(h0 + kh, h + pb) - h0) * (min(w0 + kw, w + pr) - w0) if cip
                       else len(rows) * len(cols))
                y[:, :, oh, ow] = win.sum(axis=(2, 3)) / div
    return y


def out_len(n, k, s, p0, p1, d, ceil):
    span = n + p0 + p1 - d * (k - 1) - 1
    return (-(-span // s) if ceil else span // s) + 1


def lrn_ref(x, size, alpha, beta, bias):
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.zeros_like(x, np.float64)
    for ch in range(c):
        sq[:, ch] = (x[:, max(0, ch - lo):min(c - 1, ch + hi) + 1].astype(np.float64) ** 2
                     ).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta


def softmax_ref(x, axis, coerce, log):
    shape = x.shape
    if coerce:
        x, axis = x.reshape(math.prod(shape[:axis]), -1), 1
    z = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    return (z - lse if log else np.exp(z - lse)).reshape(shape)


def act_ref(act, v):
    return v if act is None else act.apply_numpy(v)


# ---------------------------------------------------------------------------------------------
# cases: (id, lowered, inputs, expected)

def nary_case(op, shapes, act, seed=0):
    out = np.broadcast_shapes(*shapes)
    xs = [rnd(*s, seed=seed + j, lo=0.5 if op == "Div" and j else None)
          for j, s in enumerate(shapes)]
    fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
          "Sum": np.add}[op]
    ref = xs[0].astype(np.float64)
    for x in xs[1:]:
        ref = fn(ref, x)
    low = ew.nary(op, shapes, out, act)
    return (f"{op}-{'-'.join('x'.join(map(str, s)) for s in shapes)}", low, xs,
            act_ref(act, ref))


def pool_case(kind, shape, ks, strides, pads, dil=(1, 1), cip=False, ceil=False):
    h, w = shape[2:]
    ho = out_len(h, ks[0], strides[0], pads[0], pads[2], dil[0], ceil)
    wo = out_len(w, ks[1], strides[1], pads[1], pads[3], dil[1], ceil)
    x = rnd(*shape, seed=3)
    low = pool.pool2d(kind, shape, shape[:2] + (ho, wo), ks, strides, pads, dil, cip)
    ref = pool_ref(kind, x, ks, strides, pads, dil, cip, (ho, wo))
    name = f"{kind}pool-{shape}-k{ks}-s{strides}-p{pads}-d{dil}-cip{int(cip)}-ceil{int(ceil)}"
    return name, low, [x], ref


def cases():
    out = [
        nary_case("Add", [(2, 3, 4), (3, 1)], RELU),
        nary_case("Sub", [(5, 1, 3), (1, 4, 1)], None),
        nary_case("Mul", [(1, 3, 1, 5), (1,)], CLIP),
        nary_case("Div", [(2, 3, 5, 7), (2, 3, 5, 7)], SIG),
        nary_case("Sum", [(3, 1, 5), (4, 5), (3, 4, 5)], LEAKY),
        nary_case("Add", [(1, 1), (1,)], TANH),
        nary_case("Mul", [(2, 1, 3, 1), (1, 5, 1, 7)], None),
        nary_case("Sub", [(7,), (3, 1), (2, 1, 1)], None),
    ]
    for j, act in enumerate([RELU, CLIP, LEAKY, SIG, TANH]):
        x = rnd(3, 7, 5, seed=10 + j)
        out.append((f"unary-{act.kind}", ew.unary(act, (3, 7, 5)), [x], act.apply_numpy(x)))
    for shape, act in [((2, 3, 5, 7), LEAKY), ((3, 4), None), ((1, 5, 1, 3), RELU)]:
        x, s, t = rnd(*shape, seed=1), rnd(shape[1], seed=2), rnd(shape[1], seed=3)
        bc = (1, -1) + (1,) * (len(shape) - 2)
        ref = act_ref(act, x * s.reshape(bc) + t.reshape(bc))
        out.append((f"affine-{shape}", ew.channel_affine(shape, act), [x, s, t], ref))
    for n in (1, 1000):
        x = rnd(n, seed=4)
        out.append((f"copy-{n}", ew.copy(n), [x], x))
    for shape, perm in [((2, 3, 4), (2, 0, 1)), ((3, 5, 7, 2), (0, 2, 3, 1)),
                        ((1, 3, 1, 5), (2, 0, 3, 1)), ((4, 6), (1, 0)), ((2, 3), (0, 1))]:
        x = rnd(*shape, seed=5)
        out.append((f"transpose-{shape}-{perm}", layout.transpose(shape, perm), [x],
                    x.transpose(perm)))
    for shapes, axis in [([(2, 3, 5), (2, 1, 5), (2, 4, 5)], 1), ([(1, 3), (4, 3)], 0),
                         ([(3, 2, 2), (3, 2, 5)], 2), ([(2, 0, 3), (2, 2, 3)], 1)]:
        xs = [rnd(*s, seed=6 + j) for j, s in enumerate(shapes)]
        out.append((f"concat-{shapes}-{axis}", layout.concat(shapes, axis), xs,
                    np.concatenate(xs, axis)))
    out += [
        pool_case("max", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1)),
        pool_case("max", (2, 3, 8, 8), (3, 3), (2, 2), (0, 0, 0, 0), ceil=True),
        pool_case("max", (1, 2, 9, 10), (2, 3), (1, 2), (1, 0, 0, 2), dil=(2, 2)),
        pool_case("avg", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1), cip=False),
        pool_case("avg", (1, 2, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1), cip=True),
        pool_case("avg", (2, 3, 8, 8), (3, 3), (2, 2), (0, 0, 0, 0), cip=True, ceil=True),
        pool_case("avg", (1, 1, 6, 7), (2, 3), (2, 1), (0, 2, 1, 0), cip=True),
        pool_case("avg", (1, 2, 9, 10), (3, 2), (2, 1), (2, 1, 0, 0), dil=(2, 3)),
        pool_case("avg", (2, 3, 8, 8), (3, 3), (2, 2), (0, 0, 0, 0), ceil=True),
    ]
    for kind in ("max", "avg"):
        for shape in [(2, 3, 5, 7), (1, 2, 20, 30), (1, 1, 1, 1)]:
            x = rnd(*shape, seed=7)
            ref = x.max(axis=(2, 3)) if kind == "max" else x.astype(np.float64).mean((2, 3))
            out.append((f"global{kind}-{shape}", pool.global_pool(kind, shape), [x],
                        ref.reshape(shape[:2] + (1, 1))))
    for shape, size, alpha, beta, bias in [((1, 7, 3, 5), 3, 1e-2, 0.75, 1.0),
                                           ((2, 6, 2, 3), 4, 0.5, 0.5, 2.0),
                                           ((2, 5, 1, 1), 5, 1.0, 1.3, 0.5)]:
        x = rnd(*shape, seed=8)
        out.append((f"lrn-{shape}-{size}", pool.lrn(shape, size, alpha, beta, bias), [x],
                    lrn_ref(x, size, alpha, beta, bias)))
    for shape, axis, coerce in [((2, 5, 3), 1, False), ((4, 3), 0, False), ((2, 3, 7), 2, False),
                                ((2, 3, 4), 1, True), ((3, 2, 2), 0, True), ((3, 700), 1, False),
                                ((2, 3, 300), 1, False)]:
        for log in (False, True):
            x = rnd(*shape, seed=9) * 3
            out.append((f"{'log' if log else ''}softmax-{shape}-{axis}-{coerce}",
                        pool.softmax(shape, axis, coerce, log), [x],
                        softmax_ref(x, axis, coerce, log)))
    return out


CASES = cases()


def small_grid_cases():
    """Cases whose CUDA code is generated with at most 2 blocks (see `all_cases`), so each
    thread or block loops over several elements or rows."""
    x = rnd(3, 700, seed=11)
    y = rnd(2, 3, 20, 30, seed=12)
    return [
        ("small-grid-add", *nary_case("Add", [(3, 700), (700,)], None)[1:]),
        ("small-grid-softmax", pool.softmax((3, 700), 1, False), [x],
         softmax_ref(x, 1, False, False)),
        ("small-grid-globalavg", pool.global_pool("avg", (2, 3, 20, 30)), [y],
         y.astype(np.float64).mean((2, 3)).reshape(2, 3, 1, 1)),
    ]


SMALL = small_grid_cases()


# ---------------------------------------------------------------------------------------------
# translation unit


@pytest.fixture(scope="module")
def all_cases():
    lowered = [(low.kernel, lower(low)) for _, low, _, _ in CASES]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cew, "MAX_BLOCKS", 2)
        mp.setattr(cpool, "MAX_ROW_BLOCKS", 2)
        lowered += [(low.kernel, lower(low)) for _, low, _, _ in SMALL]
    assert all("dim3(2)," in ck.body for _, ck in lowered[len(CASES):])
    return CASES + SMALL, lowered


@pytest.fixture(scope="module")
def emu(all_cases, tmp_path_factory):
    cases, lowered = all_cases
    lib = EmuLib(lowered, tmp_path_factory.mktemp("cuda-emu"))
    lib.cases = cases
    return lib


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("idx", range(len(CASES + SMALL)), ids=[c[0] for c in CASES + SMALL])
def test_numerics_under_emulator(emu, idx, order):
    name, _, inputs, want = emu.cases[idx]
    got = emu.run(idx, inputs, np.shape(want), order=order)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=name)


def test_equal_kernels_share_one_definition():
    a = lower(ew.nary("Add", [(2, 3), (3,)], (2, 3), RELU))
    b = lower(ew.nary("Add", [(2, 3), (3,)], (2, 3), RELU))
    c = lower(ew.nary("Add", [(2, 3), (2, 3)], (2, 3), RELU))
    assert a.support.keys() == b.support.keys()
    assert a.support.keys() != c.support.keys()


def test_large_shapes_use_64_bit_indices():
    ck = lower(ew.copy(3_000_000_000))
    assert "typedef long long I;" in next(iter(ck.support.values()))
    ck = lower(ew.copy(1000))
    assert "typedef int I;" in next(iter(ck.support.values()))


def test_nvcc_compiles_warning_free(all_cases, tmp_path):
    _, lowered = all_cases
    big = ew.copy(3_000_000_000)    # the 64-bit index path compiles too
    nvcc_compiles(lowered + [(big.kernel, lower(big))], tmp_path)
