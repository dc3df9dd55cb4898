"""Conv / Gemm / MatMul kernel emitters: compiled with the host C compiler, run through cffi,
checked against numpy references.

All cases of a kind go into one translation unit (tests/kernel_harness.py: support functions
merged by name, as the emitter does), built twice: with the test flags (-O2) and with the
production flags (-O3 -march=native -ffp-contract=fast), since gcc 12 has miscompiled some loop
shapes only at -O3 with AVX. One TU of each kind is also compiled as C++ (g++) and with clang-16.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import rvvkit.codegen.kernels.conv as convmod
from rvvkit.ops.activations import Act
from rvvkit.codegen.kernels.conv import conv2d
from rvvkit.codegen.kernels.gemm import gemm, matmul
from rvvkit.codegen.kernels.gemm_tiling import choose_tile
from conftest import conv_ref
from kernel_harness import C_HDR, CLib, translation_unit

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

WARN = ["-Wall", "-Wextra", "-Werror"]
FLAGS = {
    "O2": ["-O2", "-std=c11"],
    "native": ["-O3", "-march=native", "-fno-math-errno", "-ffp-contract=fast", "-std=c11"],
}
RELU, CLIP = Act("relu"), Act("clip", (-0.5, 0.75))


# ----------------------------------------------------------------------------- references

def out_hw(h, w, k, strides, pads, dil):
    kh, kw = k
    return ((h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1,
            (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1)


# ----------------------------------------------------------------------------- conv cases
# (N, C, H, W, M, (kh, kw), group, strides, pads (t, l, b, r), dilations, bias, residual, act)
CONV = [
    (1, 3, 13, 17, 8, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    (2, 4, 7, 7, 5, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, True, RELU),   # batch 2
    (1, 16, 1, 1, 33, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), False, False, CLIP),  # 1x1 image
    (1, 5, 1, 1, 7, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),   # 1x1, 3x3 k
    (1, 6, 17, 13, 4, (5, 3), 2, (2, 3), (2, 0, 1, 1), (1, 1), True, True, None),  # group 2
    (1, 5, 11, 9, 7, (3, 3), 1, (1, 1), (2, 2, 2, 2), (2, 2), False, True, RELU),  # dilation 2
    (1, 3, 5, 5, 4, (7, 7), 1, (1, 1), (3, 3, 3, 3), (1, 1), True, False, CLIP),   # k > image
    (1, 2, 3, 3, 3, (5, 5), 1, (1, 1), (2, 2, 2, 2), (1, 1), False, False, None),
    (1, 64, 7, 7, 96, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, True, RELU),  # small image
    (1, 32, 14, 14, 64, (1, 1), 1, (2, 2), (0, 0, 0, 0), (1, 1), True, False, None),  # 1x1 /2
    (1, 3, 30, 30, 16, (7, 7), 1, (2, 2), (3, 3, 3, 3), (1, 1), True, False, RELU),  # stem
    (1, 600, 3, 3, 20, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),  # k-blocks
    (1, 7, 13, 17, 11, (3, 3), 1, (3, 3), (0, 1, 2, 0), (1, 1), True, True, CLIP),  # stride 3
    (2, 8, 9, 9, 16, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),  # grouped
    (1, 4, 17, 7, 6, (2, 4), 1, (1, 2), (0, 3, 1, 0), (2, 1), False, False, None),  # odd all
    (1, 300, 13, 13, 40, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, True, RELU),  # pw
    (1, 64, 7, 7, 130, (1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1), True, False, None),
    (2, 5, 10, 12, 9, (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1), True, True, RELU),  # batch 2
    (1, 4, 6, 5, 3, (3, 3), 1, (1, 1), (4, 3, 0, 4), (1, 1), True, False, None),  # pads > k
    (1, 6, 11, 11, 5, (1, 1), 1, (3, 2), (1, 0, 0, 1), (1, 1), False, True, None),  # 1x1, s>k
    (1, 32, 28, 28, 48, (3, 3), 1, (2, 2), (1, 1, 1, 1), (1, 1), True, False, RELU),
    # depthwise
    (1, 8, 13, 13, 8, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), True, False, RELU),
    (2, 8, 14, 14, 8, (3, 3), 8, (2, 2), (0, 1, 1, 0), (1, 1), True, True, None),
    (1, 8, 70, 70, 8, (3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1), False, False, CLIP),
    (2, 6, 9, 9, 6, (3, 3), 6, (3, 3), (1, 1, 1, 1), (2, 2), True, True, RELU),
    (1, 3, 1, 1, 3, (3, 3), 3, (1, 1), (1, 1, 1, 1), (1, 1), True, False, None),
    (1, 4, 17, 11, 4, (5, 5), 4, (2, 1), (2, 2, 2, 2), (1, 1), False, False, None),
]


def _conv_lowered(case):
    n, c, h, w, m, k, g, st, pd, dl, bias, res, act = case
    ho, wo = out_hw(h, w, k, st, pd, dl)
    return conv2d((n, c, h, w), (m, c // g) + k, (n, m, ho, wo), group=g, strides=st,
                  pads=pd, dilations=dl, bias=bias, residual=res, act=act)


def _conv_check(lib, i, case, seed):
    n, c, h, w, m, k, g, st, pd, dl, bias, res, act = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c // g) + k).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    ref = conv_ref(x.astype(np.float64), wt.astype(np.float64), b, g, st, pd, dl)
    r = rng.standard_normal(ref.shape).astype(np.float32) if res else None
    if res:
        ref = ref + r
    if act:
        ref = act.apply_numpy(ref)
    ins = [x, wt] + ([b] if bias else []) + ([r] if res else [])
    y = lib(i, ins, ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(c // g * k[0] * k[1]))


@pytest.fixture(scope="module", params=list(FLAGS))
def conv_lib(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("conv") / f"conv_{request.param}"
    return CLib([_conv_lowered(c) for c in CONV], path, FLAGS[request.param])


@pytest.mark.parametrize("i", range(len(CONV)))
def test_conv(conv_lib, i):
    _conv_check(conv_lib, i, CONV[i], seed=i)


def test_conv_hints_and_macs():
    assert _conv_lowered(CONV[0]).kernel.hint == "conv2d"
    assert _conv_lowered(CONV[1]).kernel.hint == "conv1x1"
    dw = _conv_lowered(next(c for c in CONV if c[6] == c[1] == c[4] > 1))
    assert dw.kernel.hint == "dwconv" and not dw.transforms
    assert _conv_lowered(CONV[0]).kernel.macs == 1 * 8 * 13 * 17 * 3 * 3 * 3
    names = [p.name for p in _conv_lowered(CONV[1]).kernel.params]
    assert names == ["x", "w", "b", "r", "y"]


# Every path x orientation, forced (the cost model alone would not reach all of them).
FORCED = [(path, trans) for path in ("im2col", "grid") for trans in (False, True)] + \
    [("rowpack", True)]
FORCED_CASES = [CONV[0], CONV[4], CONV[5], CONV[12], CONV[13], CONV[14]]


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
            lowered += [_conv_lowered(c) for c in FORCED_CASES]
        finally:
            convmod._plan_conv = orig
    return CLib(lowered, tmp_path_factory.mktemp("forced") / "forced", FLAGS["native"])


@pytest.mark.parametrize("fi", range(len(FORCED)))
def test_conv_forced_paths(forced_lib, fi):
    for j, case in enumerate(FORCED_CASES):
        _conv_check(forced_lib, fi * len(FORCED_CASES) + j, case, seed=100 + j)


# ----------------------------------------------------------------------------- gemm cases
GEMM = [(m, n, k, bc, cm, al, be, act)
        for (m, n, k) in [(1, 7, 5), (5, 13, 17), (1, 300, 700), (64, 3, 100), (33, 1, 9),
                          (7, 65, 1), (100, 100, 800), (1, 1, 1)]
        for bc in (False, True)
        for cm, al, be, act in [(None, 1.0, 1.0, None), ("scalar", 0.5, 2.0, RELU),
                                ("row", 1.0, -1.0, None), ("col", 1.0, 1.0, CLIP),
                                ("full", -0.25, 0.5, None)]]


@pytest.fixture(scope="module", params=list(FLAGS))
def gemm_lib(request, tmp_path_factory):
    lowered = [gemm(m, n, k, b_const=bc, c_mode=cm, alpha=al, beta=be, act=act)
               for m, n, k, bc, cm, al, be, act in GEMM]
    return CLib(lowered, tmp_path_factory.mktemp("gemm") / f"gemm_{request.param}",
               FLAGS[request.param])


@pytest.mark.parametrize("i", range(len(GEMM)))
def test_gemm(gemm_lib, i):
    m, n, k, bc, cm, al, be, act = GEMM[i]
    rng = np.random.default_rng(i)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ref = al * (a.astype(np.float64) @ b)
    ins = [a, b]
    if cm:
        shape = {"scalar": (1,), "row": (m, 1), "col": (n,), "full": (m, n)}[cm]
        c = rng.standard_normal(shape).astype(np.float32)
        ref = ref + be * c
        ins.append(c)
    if act:
        ref = act.apply_numpy(ref)
    y = gemm_lib(i, ins, (m, n))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_gemm_params_and_transform():
    lo = gemm(1, 10, 20, b_const=True, c_mode="col")
    assert [p.name for p in lo.kernel.params] == ["a", "b", "c", "y"]
    assert lo.kernel.hint == "gemm" and lo.kernel.macs == 200 and set(lo.transforms) == {1}
    assert gemm(3, 4, 5, b_const=False, c_mode=None).transforms is None


MATMUL = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 6)), ((4,), (4, 5)),
          ((3, 4), (4,)), ((2, 3, 4), (2, 4, 2)), ((1, 5, 7), (3, 7, 33)), ((7,), (2, 7, 3)),
          ((2, 3, 1, 40), (1, 40, 70)), ((1, 1, 2, 50), (2, 3, 50, 3))]
MATMUL_CASES = [(sa, sb, bc) for sa, sb in MATMUL for bc in (False, True)]


@pytest.fixture(scope="module")
def matmul_lib(tmp_path_factory):
    lowered = []
    for sa, sb, bc in MATMUL_CASES:
        ys = np.matmul(np.zeros(sa), np.zeros(sb)).shape
        lowered.append(matmul(sa, sb, ys, b_const=bc))
    return CLib(lowered, tmp_path_factory.mktemp("mm") / "mm", FLAGS["native"])


@pytest.mark.parametrize("i", range(len(MATMUL_CASES)))
def test_matmul(matmul_lib, i):
    sa, sb, _ = MATMUL_CASES[i]
    rng = np.random.default_rng(i)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    ref = np.matmul(a.astype(np.float64), b)
    y = matmul_lib(i, [a, b], ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.sqrt(sa[-1]))


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
    kernels = [_conv_lowered(CONV[i]).kernel for i in (0, 1, 8, 12, 17, 22)]
    kernels += [gemm(5, 13, 17, b_const=True, c_mode="full", alpha=0.5, act=CLIP).kernel,
                gemm(1, 40, 30, b_const=False, c_mode="col").kernel,
                matmul((2, 3, 5, 7), (1, 7, 9), (2, 3, 5, 9), b_const=False).kernel]
    src = tmp_path / "tu.c"
    src.write_text(translation_unit(C_HDR, kernels))
    for opt in (["-O2"], ["-O3", "-march=native", "-ffp-contract=fast"]):
        subprocess.run([cc, *lang, *opt, *WARN, "-c", str(src), "-o", str(tmp_path / "tu.o")],
                       check=True)
