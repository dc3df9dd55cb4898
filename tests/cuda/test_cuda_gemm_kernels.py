"""CUDA generators of the GEMM family (codegen/cuda/gemm.py, tiles.py): Conv, Gemm, MatMul,
checked against numpy.

Every case is lowered by the C lowering (so the spec and the packed-weight layout are exactly
what the planner records; constant inputs go through the lowering's weight transforms), its
CUDA launcher and __global__ functions are generated, and all cases go into one translation
unit: run on the CPU through the emulator header (runtime_c/rvk_cuda_emu.h, g++) and compiled
with nvcc with warnings as errors. Shapes are odd and small (the emulator runs every thread as
a fiber on one core) but chosen to reach every template: several row/column tiles, partial
tiles, k-slices and split-K chunks, every tile shape, grouped/strided/dilated/padded conv and
batch > 1.
"""
from __future__ import annotations

import numpy as np
import pytest

from conftest import conv_ref
from rvvkit.ops.activations import Act
from rvvkit.codegen.kernels import conv, gemm
from kernel_harness import ORDERS, EmuLib, lower, nvcc_compiles

RELU, CLIP = Act("relu"), Act("clip", (-0.5, 0.75))
LEAKY, SIG, TANH = Act("leaky_relu", (0.1,)), Act("sigmoid"), Act("tanh")


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def act_ref(act, v):
    return v if act is None else act.apply_numpy(v)


# ---------------------------------------------------------------------------------------------
# cases: (id, lowered, inputs in ONNX layout, expected)

def conv_case(xs, ws, group=1, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), bias=False,
              residual=False, act=None, seed=0):
    n, _, h, w = xs
    m, _, kh, kw = ws
    ho = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    wo = (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    ys = (n, m, ho, wo)
    x, wt = rnd(*xs, seed=seed), rnd(*ws, seed=seed + 1)
    b = rnd(m, seed=seed + 2) if bias else None
    r = rnd(*ys, seed=seed + 3) if residual else None
    want = conv_ref(x, wt, b, group, strides, pads, dil)
    want = act_ref(act, want + (r if residual else 0))
    low = conv.conv2d(xs, ws, ys, group=group, strides=strides, pads=pads, dilations=dil,
                      bias=bias, residual=residual, act=act)
    inputs = [x, wt] + ([b] if bias else []) + ([r] if residual else [])
    name = f"conv-{xs}-{ws}-g{group}-s{strides}-p{pads}-d{dil}"
    return name, low, inputs, want


def gemm_case(m, n, k, b_const, c_mode=None, alpha=1.0, beta=1.0, act=None, seed=0):
    a, b = rnd(m, k, seed=seed), rnd(k, n, seed=seed + 1)
    cshape = {None: None, "scalar": (1,), "row": (m, 1), "col": (n,), "full": (m, n)}[c_mode]
    c = rnd(*cshape, seed=seed + 2) if cshape else None
    want = alpha * (a.astype(np.float64) @ b)
    if c is not None:
        want = want + beta * c
    low = gemm.gemm(m, n, k, b_const=b_const, c_mode=c_mode, alpha=alpha, beta=beta, act=act)
    inputs = [a, b] + ([c] if c is not None else [])
    return f"gemm-{m}x{n}x{k}-{b_const}-{c_mode}", low, inputs, act_ref(act, want)


def matmul_case(a_shape, b_shape, b_const, seed=0):
    a, b = rnd(*a_shape, seed=seed), rnd(*b_shape, seed=seed + 1)
    want = np.matmul(a.astype(np.float64), b)
    low = gemm.matmul(a_shape, b_shape, want.shape, b_const=b_const)
    return f"matmul-{a_shape}-{b_shape}-{b_const}", low, [a, b], want


def cases():
    return [
        # implicit-GEMM conv
        conv_case((2, 4, 7, 9), (6, 2, 3, 3), group=2, strides=(2, 2), pads=(1, 1, 1, 1),
                  bias=True, residual=True, act=RELU),
        conv_case((1, 3, 11, 13), (5, 3, 3, 3), pads=(0, 2, 1, 0), dil=(2, 1), bias=True,
                  act=CLIP, seed=1),
        conv_case((1, 16, 8, 8), (32, 16, 1, 1), act=LEAKY, seed=2),           # pointwise
        conv_case((2, 8, 9, 7), (12, 8, 1, 1), strides=(2, 2), bias=True, seed=3),
        conv_case((1, 20, 9, 9), (70, 20, 3, 3), pads=(1, 1, 1, 1), bias=True, act=SIG,
                  seed=4),                                        # 5 row tiles, 12 k-slices
        conv_case((2, 5, 12, 11), (70, 5, 3, 3), pads=(1, 1, 1, 1), residual=True, act=RELU,
                  seed=13),                                                 # 64x64: 2 x 5
        conv_case((1, 4, 6, 6), (8, 1, 3, 3), group=4, pads=(1, 1, 1, 1), bias=True,
                  seed=5),                                        # channel multiplier 2
        conv_case((3, 2, 10, 11), (3, 2, 5, 3), strides=(1, 2), pads=(2, 1, 2, 1),
                  residual=True, act=TANH, seed=6),                            # batch 3
        conv_case((2, 3, 12, 12), (8, 3, 3, 3), pads=(1, 1, 1, 1), bias=True, seed=7),
        conv_case((1, 32, 3, 3), (130, 32, 3, 3), bias=True, seed=8),          # 128x16
        conv_case((1, 6, 5, 4), (9, 2, 2, 3), group=3, strides=(3, 1), pads=(1, 0, 2, 2),
                  dil=(1, 2), bias=True, residual=True, seed=9),
        # depthwise (direct kernel)
        conv_case((2, 4, 7, 9), (4, 1, 3, 3), group=4, strides=(2, 2), pads=(1, 1, 1, 1),
                  bias=True, residual=True, act=SIG, seed=10),
        conv_case((1, 3, 20, 19), (3, 1, 5, 5), group=3, pads=(3, 0, 1, 4), dil=(2, 1),
                  act=TANH, seed=11),
        conv_case((1, 2, 20, 20), (2, 1, 3, 3), group=2, pads=(1, 1, 1, 1), bias=True,
                  act=RELU, seed=12),                              # 400 positions: 2 blocks
        # Gemm
        gemm_case(1, 10, 64, True, "col", act=RELU),                            # split-K
        gemm_case(33, 10, 64, False, "full", alpha=0.5, beta=2.0, seed=1),
        gemm_case(5, 300, 40, True, "row", act=SIG, seed=2),
        gemm_case(70, 130, 37, True, "scalar", alpha=-1.5, act=CLIP, seed=3),
        gemm_case(9, 3, 200, False, seed=4),
        gemm_case(2, 4100, 5, False, "col", seed=5),                   # split-K, 32 columns
        gemm_case(3, 50, 600, True, "full", beta=-0.5, seed=6),        # split-K, 3 k-chunks
        gemm_case(17, 129, 17, False, "row", act=LEAKY, seed=7),
        # MatMul
        matmul_case((2, 3, 5, 7), (7, 4), True),
        matmul_case((2, 1, 50, 7), (3, 7, 40), False, seed=1),
        matmul_case((7,), (7,), False, seed=2),
        matmul_case((6,), (2, 6, 9), False, seed=3),
        matmul_case((4, 20, 33), (33,), False, seed=4),
        matmul_case((3, 12, 20), (3, 20, 17), True, seed=5),
        matmul_case((2, 70, 20), (20, 70), False, seed=6),
        matmul_case((2, 1, 3, 9), (1, 4, 9, 11), True, seed=7),
    ]


CASES = cases()


# ---------------------------------------------------------------------------------------------
# translation unit


@pytest.fixture(scope="module")
def lowered():
    return [(low.kernel, lower(low)) for _, low, _, _ in CASES]


@pytest.fixture(scope="module")
def emu(lowered, tmp_path_factory):
    return EmuLib(lowered, tmp_path_factory.mktemp("cuda-emu-gemm"))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("idx", range(len(CASES)), ids=[c[0] for c in CASES])
def test_numerics_under_emulator(emu, idx, order):
    name, low, inputs, want = CASES[idx]
    got = emu.run(idx, inputs, np.shape(want), low.transforms, order)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


def test_nvcc_compiles_warning_free(lowered, tmp_path):
    nvcc_compiles(lowered, tmp_path)


# ---------------------------------------------------------------------------------------------
# structure: the templates chosen, names


def _global_name(ck) -> str:
    (name,) = [n for n, t in ck.support.items() if "__global__" in t]
    return name


@pytest.mark.parametrize("low, template", [
    (gemm.gemm(1, 1000, 512, b_const=True, c_mode="col"), "splitk"),       # FC at batch 1
    (gemm.gemm(256, 256, 256, b_const=False, c_mode=None), "t64x64"),
    (conv.conv2d((1, 3, 32, 32), (16, 3, 3, 3), (1, 16, 30, 30), group=1, strides=(1, 1),
                 pads=(0, 0, 0, 0), dilations=(1, 1), bias=True, residual=False, act=None),
     "t16x128"),
    (conv.conv2d((1, 64, 2, 2), (256, 64, 1, 1), (1, 256, 2, 2), group=1, strides=(1, 1),
                 pads=(0, 0, 0, 0), dilations=(1, 1), bias=False, residual=False, act=None),
     "t128x16"),
    (conv.conv2d((1, 8, 5, 5), (8, 1, 3, 3), (1, 8, 3, 3), group=8, strides=(1, 1),
                 pads=(0, 0, 0, 0), dilations=(1, 1), bias=False, residual=False, act=None),
     "dwconv"),
])
def test_template_choice(low, template):
    ck = lower(low)
    name = _global_name(ck)
    assert template in name
    text = ck.support[name]
    assert f"RVK_LAUNCH({name}," in ck.body
    assert "__shared__" in text and "__syncthreads()" in text
    if template.startswith("t"):       # tiled: both operands staged, register micro-tile
        assert "As[" in text and "Bs[" in text and "acc[i][j]" in text


def test_names_identify_the_text():
    a = lower(gemm.gemm(33, 10, 64, b_const=False, c_mode="full"))
    b = lower(gemm.gemm(33, 10, 64, b_const=False, c_mode="full"))
    c = lower(gemm.gemm(33, 10, 64, b_const=False, c_mode="row"))
    d = lower(gemm.gemm(33, 10, 64, b_const=False, c_mode="full", act=RELU))
    assert a.support == b.support and a.body == b.body
    names = [_global_name(x) for x in (a, c, d)]
    assert len(set(names)) == 3
    assert all("33x10x64" in n for n in names)
