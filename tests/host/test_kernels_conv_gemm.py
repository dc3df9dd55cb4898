"""Conv / Gemm / MatMul kernel emitters: compiled with the host C compiler, run through cffi,
checked against numpy references. The cases are the shared tables of tests/kernel_cases/.

All cases of a kind go into one translation unit (tests/kernel_harness.py: support functions
merged by name, as the emitter does), built twice: with the test flags (-O2) and with the
production flags (-O3 -march=native -ffp-contract=fast), since gcc 12 has miscompiled some loop
shapes only at -O3 with AVX. One TU of each kind is also compiled as C++ (g++) and with clang-16.
"""
from __future__ import annotations

import platform
import shutil
import subprocess

import numpy as np
import pytest

import rvvkit.codegen.kernels.conv.conv2d as convmod
from rvvkit.codegen.kernels.conv.conv2d import conv2d
from rvvkit.codegen.kernels.gemm.packed import gemm, matmul
from rvvkit.codegen.kernels.gemm.tiling import choose_tile
from kernel_cases.case import CLIP, RELU
from kernel_cases.conv import (CONV, CONV_FORCED, CONV_OTHER_COMPILERS, CONV_WINOGRAD,
                               CONV_WINOGRAD_FORCED, CONV_WINOGRAD_RISCV, winograd_forced)
from kernel_cases.gemm import GEMM, MATMUL
from kernel_harness import C_HDR, CLib, translation_unit

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

WARN = ["-Wall", "-Wextra", "-Werror"]
FLAGS = {
    "O2": ["-O2", "-std=c11"],
    "native": ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast",
               "-std=c11"]
    + (["-mprefer-vector-width=512"] if platform.machine() == "x86_64" else []),  # as the JIT
}


def ids(cases):
    return [c.id for c in cases]


# ----------------------------------------------------------------------------- conv
# Every case of tests/kernel_cases/conv.py; unit-variance weights, so the atol grows with the
# fan-in (the sum of fan-in products of order 1).

def _conv_check(lib, i, case, seed=None):
    ins, ref = case.data(seed, weights="unit")
    y = lib(i, ins, ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(case.params["fan_in"]))


@pytest.fixture(scope="module", params=list(FLAGS))
def conv_lib(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("conv") / f"conv_{request.param}"
    return CLib([c.lower() for c in CONV], path, FLAGS[request.param])


@pytest.mark.parametrize("i", range(len(CONV)), ids=ids(CONV))
def test_conv(conv_lib, i):
    _conv_check(conv_lib, i, CONV[i])


def test_conv_hints_and_macs():
    assert CONV[0].lower().kernel.hint == "conv2d"
    assert CONV[1].lower().kernel.hint == "conv1x1"
    dw = next(c for c in CONV if c.params["group"] == c.params["c"] == c.params["m"] > 1)
    dw = dw.lower()
    assert dw.kernel.hint == "dwconv" and not dw.transforms
    assert CONV[0].lower().kernel.macs == 1 * 8 * 13 * 17 * 3 * 3 * 3
    names = [p.name for p in CONV[1].lower().kernel.params]
    assert names == ["x", "w", "b", "r", "y"]


def test_winograd_is_chosen_where_it_wins():
    for case in CONV_WINOGRAD:
        assert case.lower().kernel.hint in WINOGRAD_HINTS, case.id
    lo = CONV_WINOGRAD[0].lower()
    assert set(lo.transforms) == {1} and lo.kernel.spec["op"] == "conv_winograd"
    assert lo.kernel.macs == 64 * 27 * 27 * 16 * 9      # the convolution's MACs


def test_a_kernel_with_both_forms_stores_both_weight_layouts():
    lo = CONV_WINOGRAD_RISCV[0].lower()                 # 64x7x7 -> 96, bias, residual
    k, spec = lo.kernel, lo.kernel.spec
    assert k.hint == "conv3x3_riscv_winograd" and spec["op"] == "conv_winograd"
    assert [p.name for p in k.params] == ["x", "w", "wd", "b", "r", "y"]
    args, transforms, extra = lo.bind(["x", "w", "b", "r", "y"])
    assert args == ["x", "w", "w", "b", "r", "y"] and set(transforms) == {1, 2} and extra == {2}
    w = np.random.default_rng(0).standard_normal((96, 64, 3, 3)).astype(np.float32)
    direct = winograd_forced(CONV[8], "off").lower()   # the same conv without Winograd
    assert direct.kernel.hint == "conv2d" and spec["direct_panel"] == direct.kernel.spec["w_panel"]
    np.testing.assert_array_equal(transforms[2](w), direct.transforms[1](w))
    assert transforms[1](w).size == 36 * 96 * 64                      # U: 36 elements
    assert "#if defined(__riscv)" in k.body and "wd, b, r, y" in k.body


@pytest.fixture(scope="module", params=list(FLAGS))
def winograd_lib(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("wino") / f"wino_{request.param}"
    lowered = [c.lower() for c in WINOGRAD_CASES]
    assert [lo.kernel.hint for lo in lowered] == \
        ["conv3x3_winograd"] * len(CONV_WINOGRAD_FORCED) + \
        ["conv3x3_riscv_winograd"] * len(CONV_WINOGRAD_RISCV)
    return CLib(lowered, path, FLAGS[request.param])


# Winograd forced, and both forms in one kernel (this host runs its direct branch; QEMU its
# Winograd branch: tests/qemu/test_rvv_kernels.py)
WINOGRAD_CASES = CONV_WINOGRAD_FORCED + CONV_WINOGRAD_RISCV
WINOGRAD_HINTS = ("conv3x3_winograd", "conv3x3_riscv_winograd")


@pytest.mark.parametrize("i", range(len(WINOGRAD_CASES)), ids=ids(WINOGRAD_CASES))
def test_conv_winograd_forced(winograd_lib, i):
    _conv_check(winograd_lib, i, WINOGRAD_CASES[i])


# Every path x orientation, forced (the cost model alone would not reach all of them).
FORCED = [(path, trans) for path in ("im2col", "grid") for trans in (False, True)] + \
    [("rowpack", True)]


@pytest.fixture(scope="module")
def forced_lib(tmp_path_factory):
    lowered = []
    orig = convmod._plan_conv
    for path, trans in FORCED:
        def plan(mg, hw, k, wo, cols_grid, pointwise, split_cost=0.0, path=path, trans=trans):
            cols = cols_grid if path == "grid" else hw
            p, q = (cols, mg) if trans else (mg, cols)
            rows = [d for d in range(1, 15) if wo % d == 0] if path == "rowpack" else None
            mr, nr = choose_tile(p, q, k, trans=trans, mrs=rows)
            return 0.0, path, trans, mr, nr, cols
        convmod._plan_conv = plan
        try:
            lowered += [c.lower() for c in CONV_FORCED]
        finally:
            convmod._plan_conv = orig
    return CLib(lowered, tmp_path_factory.mktemp("forced") / "forced", FLAGS["native"])


@pytest.mark.parametrize("fi", range(len(FORCED)))
def test_conv_forced_paths(forced_lib, fi):
    for j, case in enumerate(CONV_FORCED):
        _conv_check(forced_lib, fi * len(CONV_FORCED) + j, case, seed=100 + j)


# ----------------------------------------------------------------------------- gemm
# Every case of tests/kernel_cases/gemm.py; unit-variance B, atol grows with k.

@pytest.fixture(scope="module", params=list(FLAGS))
def gemm_lib(request, tmp_path_factory):
    return CLib([c.lower() for c in GEMM],
                tmp_path_factory.mktemp("gemm") / f"gemm_{request.param}", FLAGS[request.param])


@pytest.mark.parametrize("i", range(len(GEMM)), ids=ids(GEMM))
def test_gemm(gemm_lib, i):
    ins, ref = GEMM[i].data(weights="unit")
    y = gemm_lib(i, ins, ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(GEMM[i].params["k"]))


def test_gemm_params_and_transform():
    lo = gemm(1, 10, 20, b_const=True, c_mode="col")
    assert [p.name for p in lo.kernel.params] == ["a", "b", "c", "y"]
    assert lo.kernel.hint == "gemm" and lo.kernel.macs == 200 and set(lo.transforms) == {1}
    assert gemm(3, 4, 5, b_const=False, c_mode=None).transforms is None


@pytest.fixture(scope="module")
def matmul_lib(tmp_path_factory):
    return CLib([c.lower() for c in MATMUL], tmp_path_factory.mktemp("mm") / "mm",
                FLAGS["native"])


@pytest.mark.parametrize("i", range(len(MATMUL)), ids=ids(MATMUL))
def test_matmul(matmul_lib, i):
    ins, ref = MATMUL[i].data()
    y = matmul_lib(i, ins, ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(MATMUL[i].params["k"]))


# ----------------------------------------------------------------------------- C++ / clang

# Real network layer shapes: only compiled (production flags, -Werror): gcc's -O3 value-range
# warnings (-Waggressive-loop-optimizations) depend on the constants baked into each kernel.
NET_CONVS = [  # (C, H, M, k, stride, pad, group)
    (3, 224, 64, 7, 2, 3, 1), (64, 56, 64, 3, 1, 1, 1), (256, 56, 64, 1, 1, 0, 1),
    (128, 28, 128, 3, 1, 1, 1), (256, 14, 256, 3, 1, 1, 1), (512, 7, 512, 3, 1, 1, 1),
    (2048, 7, 512, 1, 1, 0, 1), (256, 56, 512, 1, 2, 0, 1), (128, 56, 128, 3, 2, 1, 1),
    (192, 35, 32, 5, 1, 2, 1), (232, 14, 232, 3, 1, 1, 232), (116, 56, 116, 3, 2, 1, 116),
    (128, 28, 128, 3, 1, 1, 4), (16, 55, 64, 3, 1, 1, 1), (3, 227, 96, 11, 4, 0, 1)]


def test_network_shapes_compile_clean(tmp_path):
    kernels = []
    for c, h, m, k, s, p, g in NET_CONVS:
        ho = (h + 2 * p - k) // s + 1
        kernels.append(conv2d((1, c, h, h), (m, c // g, k, k), (1, m, ho, ho), group=g,
                              strides=(s, s), pads=(p,) * 4, dilations=(1, 1), bias=True,
                              residual=True, act=RELU).kernel)
    kernels += [gemm(1, 1000, 2048, b_const=True, c_mode="col").kernel,
                gemm(64, 1000, 2048, b_const=True, c_mode="col").kernel,
                gemm(1, 4096, 25088, b_const=True, c_mode="col", act=RELU).kernel,
                matmul((12, 128, 64), (12, 64, 128), (12, 128, 128), b_const=False).kernel]
    src = tmp_path / "net.c"
    src.write_text(translation_unit(C_HDR, kernels))
    subprocess.run(["gcc", *FLAGS["native"], *WARN, "-c", str(src), "-o", str(tmp_path / "n.o")],
                   check=True)


COMPILERS = [("g++", ["-x", "c++", "-std=c++11"]), ("clang-16", ["-std=c11"]),
             ("clang-16", ["-x", "c++", "-std=c++11"])]


@pytest.mark.parametrize("cc,lang", COMPILERS)
def test_other_compilers(tmp_path, cc, lang):
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} not installed")
    kernels = [c.lower().kernel for c in CONV_OTHER_COMPILERS]
    kernels += [gemm(5, 13, 17, b_const=True, c_mode="full", alpha=0.5, act=CLIP).kernel,
                gemm(1, 40, 30, b_const=False, c_mode="col").kernel,
                matmul((2, 3, 5, 7), (1, 7, 9), (2, 3, 5, 9), b_const=False).kernel]
    src = tmp_path / "tu.c"
    src.write_text(translation_unit(C_HDR, kernels))
    for opt in (["-O2"], ["-O3", "-march=native", "-ffp-contract=fast"]):
        subprocess.run([cc, *lang, *opt, *WARN, "-c", str(src), "-o", str(tmp_path / "tu.o")],
                       check=True)
