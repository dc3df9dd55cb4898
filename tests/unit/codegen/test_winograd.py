"""Winograd F(4x4, 3x3) as data (rvvkit/codegen/kernels/conv/winograd_transforms.py): the
hand-factored transform programs compute exactly the matrices, and the matrices compute a 3x3
convolution."""
from __future__ import annotations

import numpy as np
import pytest

from rvvkit.codegen.kernels.conv import winograd_transforms as wg
from rvvkit.codegen.kernels.conv.winograd import cost, eligible, prefers_direct_off_riscv


@pytest.mark.parametrize("prog, mat", [(wg.IN_PROG, wg.BT), (wg.OUT_PROG, wg.AT)],
                         ids=["input B^T", "output A^T"])
def test_program_is_the_matrix(prog, mat):
    basis = np.eye(wg.TILE)
    got = np.array(wg.run_program(prog, list(basis)))     # column j: the program on e_j
    np.testing.assert_array_equal(got, mat)


def test_matrices_compute_a_3x3_correlation():
    rng = np.random.default_rng(1)
    d, g = rng.standard_normal((6, 6)), rng.standard_normal((3, 3))
    u = wg.G @ g @ wg.G.T
    y = wg.AT @ (u * (wg.BT @ d @ wg.BT.T)) @ wg.AT.T
    ref = np.array([[(d[i:i + 3, j:j + 3] * g).sum() for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-12)


def test_weight_transform_layout():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    u = wg.weights(w)
    assert u.shape == (36, 5, 3) and u.dtype == np.float32
    e = 2 * 6 + 4                                   # element (2, 4) of the 6x6 tile
    want = (wg.G @ w[3, 1].astype(np.float64) @ wg.G.T)[2, 4]
    assert u[e, 3, 1] == pytest.approx(want, rel=1e-6)


def test_eligible_and_cost():
    assert eligible((1, 8, 9, 9), (8, 8, 3, 3), 1, (1, 1), (1, 1))
    assert not eligible((1, 8, 9, 9), (8, 8, 3, 3), 1, (2, 2), (1, 1))      # stride 2
    assert not eligible((1, 8, 9, 9), (8, 8, 3, 3), 1, (1, 1), (2, 2))      # dilated
    assert not eligible((1, 8, 9, 9), (8, 4, 3, 3), 2, (1, 1), (1, 1))      # grouped
    assert not eligible((1, 8, 9, 9), (8, 8, 5, 5), 1, (1, 1), (1, 1))      # 5x5
    small = cost((1, 64, 28, 28), (64, 64, 3, 3), (1, 64, 28, 28), (1, 1, 1, 1))
    big = cost((1, 64, 56, 56), (64, 64, 3, 3), (1, 64, 56, 56), (1, 1, 1, 1))
    assert 3.5 < big / small < 4.5                  # four times the tiles


@pytest.mark.parametrize("c, h, m, direct", [
    (512, 7, 512, True),     # resnet50's last 3x3s: 36 MiB of U for 4 tiles
    (192, 6, 384, True),     # inception_v1's last: 10.6 MiB for 4 tiles
    (128, 14, 32, True),     # densenet121: 36 GEMMs of 32 x 16
    (128, 7, 32, True),
    (48, 13, 192, True),     # squeezenet: 36 GEMMs of 16 tiles, k = 48
    (96, 14, 128, False),    # inception_v2: 16 tiles, 96 channels or more on both sides
    (256, 14, 256, False),   # 16 tiles: U reused enough
    (160, 6, 320, False),    # 4 tiles, 7.4 MiB of U
    (128, 28, 32, False),    # densenet121 at 28x28: 49 tiles
    (512, 12, 512, False),   # zfnet512: 9 tiles
])
def test_hosts_run_directly_where_winograd_only_wins_on_riscv(c, h, m, direct):
    xs, ws_, ys = (1, c, h, h), (m, c, 3, 3), (1, m, h, h)
    assert prefers_direct_off_riscv(xs, ws_, ys, (1, 1, 1, 1)) is direct
    # a batch multiplies the tiles: U is then reused, and the GEMMs are longer
    assert not prefers_direct_off_riscv((8,) + xs[1:], ws_, (8,) + ys[1:], (1, 1, 1, 1))
