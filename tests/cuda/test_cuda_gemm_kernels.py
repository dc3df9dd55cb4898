"""CUDA generators of the GEMM family (codegen/cuda/gemm.py, tiles.py): Conv, Gemm, MatMul,
checked against numpy.

Every case is lowered by the C lowering (so the spec and the packed-weight layout are exactly
what the planner records; constant inputs go through the lowering's weight transforms), its
CUDA launcher and __global__ functions are generated, and all cases go into one translation
unit: run on the CPU through the emulator header (runtime_c/rvk_cuda_emu.h, g++) and compiled
with nvcc with warnings as errors. Shapes are odd and small (the emulator runs every thread as
a fiber on one core) but chosen to reach every template: several row/column tiles, partial
tiles, k-slices and split-K chunks, every tile shape, grouped/strided/dilated/padded conv and
batch > 1. The cases are the emulator subsets of the shared tables (tests/kernel_cases/).
"""
from __future__ import annotations

import numpy as np
import pytest

from rvvkit.ops.activations import Act
from rvvkit.codegen.kernels.conv import conv2d as conv
from rvvkit.codegen.kernels.gemm import packed as gemm
from kernel_cases.conv import CONV_EMU, CONV_WINOGRAD_RISCV
from kernel_cases.gemm import GEMM_EMU, MATMUL_EMU
from kernel_harness import ORDERS, EmuLib, lower, nvcc_compiles

RELU = Act("relu")

# The shared tables' CUDA subsets (tests/kernel_cases/), and a conv carrying both of its forms
# (the GPU takes Winograd; the direct form's weights are an unused parameter).
CASES = CONV_EMU + CONV_WINOGRAD_RISCV[-1:] + GEMM_EMU + MATMUL_EMU


# ---------------------------------------------------------------------------------------------
# translation unit


@pytest.fixture(scope="module")
def lowered_cases():
    return [c.lower() for c in CASES]


@pytest.fixture(scope="module")
def lowered(lowered_cases):
    return [(low.kernel, lower(low)) for low in lowered_cases]


@pytest.fixture(scope="module")
def emu(lowered, tmp_path_factory):
    return EmuLib(lowered, tmp_path_factory.mktemp("cuda-emu-gemm"))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("idx", range(len(CASES)), ids=[c.id for c in CASES])
def test_numerics_under_emulator(emu, lowered_cases, idx, order):
    inputs, want = CASES[idx].data()
    got = emu.run(idx, inputs, np.shape(want), lowered_cases[idx], order)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale, err_msg=CASES[idx].id)


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
