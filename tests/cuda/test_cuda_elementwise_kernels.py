"""CUDA generators of the non-GEMM kernels (codegen/cuda/elementwise.py, pool.py), checked
against numpy.

Every case's C lowering is built (so the spec is exactly what the planner records), its CUDA
launcher and __global__ functions are generated, and all cases go into one translation unit:
run on the CPU through the emulator header (runtime_c/rvk_cuda_emu.h, g++) and compiled with
nvcc with warnings as errors. A few cases are generated with the grid caps lowered so that the
grid-stride and block-stride loops take more than one trip. The cases are the shared tables of
tests/kernel_cases/.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rvvkit.codegen.cuda import elementwise as cew
from rvvkit.codegen.cuda import pool as cpool
from rvvkit.codegen.kernels.math import elementwise as ew
from kernel_cases import elementwise as kew
from kernel_cases import pool as kpool
from kernel_cases.case import RELU, table
from kernel_harness import ORDERS, EmuLib, lower, nvcc_compiles

# The CUDA subsets of the shared tables (tests/kernel_cases/): element-wise, layout, pooling,
# normalisation.
CASES = (kew.NARY_EMU + kew.UNARY_EMU + kew.AFFINE_EMU + kew.COPY + kew.TRANSPOSE_EMU
         + kew.CONCAT + kpool.POOL_EMU + kpool.GLOBAL_POOL_EMU + kpool.LRN_EMU
         + kpool.SOFTMAX_EMU)

# Cases whose CUDA code is generated with at most 2 blocks (see `all_cases`), so each thread or
# block loops over several elements or rows.
SMALL = table(11, [dataclasses.replace(c, id=f"small-grid-{name}") for name, c in [
    ("add", kew.nary("Add", [(3, 700), (700,)])),
    ("softmax", kpool.softmax((3, 700), 1)),
    ("globalavg", kpool.global_pool("avg", (2, 3, 20, 30)))]])


# ---------------------------------------------------------------------------------------------
# translation unit


@pytest.fixture(scope="module")
def all_cases():
    lowered = [(low.kernel, lower(low)) for low in (c.lower() for c in CASES)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cew, "MAX_BLOCKS", 2)
        mp.setattr(cpool, "MAX_ROW_BLOCKS", 2)
        lowered += [(low.kernel, lower(low)) for low in (c.lower() for c in SMALL)]
    assert all("dim3(2)," in ck.body for _, ck in lowered[len(CASES):])
    return CASES + SMALL, lowered


@pytest.fixture(scope="module")
def emu(all_cases, tmp_path_factory):
    cases, lowered = all_cases
    lib = EmuLib(lowered, tmp_path_factory.mktemp("cuda-emu"))
    lib.cases = cases
    return lib


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("idx", range(len(CASES + SMALL)), ids=[c.id for c in CASES + SMALL])
def test_numerics_under_emulator(emu, idx, order):
    case = emu.cases[idx]
    inputs, want = case.data()
    got = emu.run(idx, inputs, np.shape(want), order=order)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=case.id)


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
