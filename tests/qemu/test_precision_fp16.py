"""`rvvkit build --precision fp16|auto` (codegen/precision.py, kernels/conv/half.py): the float16
conv forms run under the K1 profile (Zvfh) at every VLEN with poisoned tails and give what
float32 arithmetic gives on float16-rounded operands; `auto` computes float32 where the target
lacks Zvfh; `fp16` refuses to compile there, with a message saying why."""
import math
import os
import zlib

import numpy as np
import onnxruntime as ort
import pytest

import rvvkit
from qemu_support import make_model, needs_qemu, node
from rvvkit.errors import CompileError
from rvvkit.codegen.kernels.conv.half_gemm import HalfGemm, plan, rows_for
from rvvkit.codegen.kernels.conv.half_staged import stages

# (name, conv attributes, x shape, output channels, bias, residual, activation)
CASES = [
    ("pointwise_relu", dict(kernel_shape=[1, 1]), (1, 13, 5, 7), 19, True, False, "Relu"),
    ("pointwise_res_clip", dict(kernel_shape=[1, 1]), (2, 40, 9, 9), 16, True, True, "Clip"),
    ("3x3_s2_p1", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
     (1, 5, 11, 13), 9, True, False, "Relu"),
    ("7x7_s2_p3", dict(kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3]),
     (1, 3, 17, 15), 12, False, False, "Clip"),
    ("3x3_dil2_res", dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]),
     (2, 6, 9, 10), 8, True, True, None),
    ("3x3_s3_asym", dict(kernel_shape=[3, 3], strides=[3, 3], pads=[0, 1, 2, 0]),
     (1, 4, 10, 11), 5, True, False, None),
    # few positions, many channels: the GEMM runs transposed (vectors along channels)
    ("pointwise_7x7_transposed", dict(kernel_shape=[1, 1]), (1, 40, 7, 7), 128, True, True,
     "Relu"),
    ("pointwise_3x3_transposed_lmul2", dict(kernel_shape=[1, 1]), (1, 70, 3, 3), 30, True,
     True, "Relu"),
    ("3x3_s2_transposed", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
     (2, 8, 9, 9), 45, True, False, "Clip"),
    # depthwise: the grid sweep in float16 (weights converted per channel)
    ("depthwise_3x3", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
     (1, 32, 14, 14), 32, True, False, "Clip"),
    ("depthwise_3x3_s2", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              group=16), (1, 16, 15, 14), 16, True, False, "Relu"),
    ("depthwise_5x5_res_small", dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=8),
     (2, 8, 6, 5), 8, False, True, None),
]
# 3x3 stride-1 convs that Winograd takes: their 36 GEMMs run in float16 on transformed
# operands, whose rounding the output transform amplifies (F(4x4, 3x3): ~1e-2 of the largest
# output, as a numpy model of the same rounding predicts), so they are held to float32 only
WINOGRAD_CASES = [
    ("winograd_7x7_transposed", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     (1, 32, 7, 7), 33, True, False, "Relu"),
    ("winograd_16x15_res", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     (1, 64, 16, 15), 24, True, True, None),
]
WINOGRAD_TOLERANCE = 2e-2
VLENS = (128, 256, 512, 1024)
# Against float32 arithmetic on float16-rounded operands, relative to the largest output: the
# depthwise form widens every product into float32 sums (equal up to summation order); the GEMM
# forms sum stages of 32 products in float16 first (half_staged.STAGE), whose rounding adds
# 5e-4..2.3e-3 on these cases (the most on the longest sums: 147 terms)
SAME_ROUNDING = {"widened": 1e-5, "staged": 4e-3}
# against float32 arithmetic (onnxruntime): the operands' and the partial sums' rounding;
# measured 5e-4..2.1e-3 on these cases (docs/guide/precision.md)
FP32_TOLERANCE = 4e-3


def _out_hw(attrs, h, w):
    k = attrs["kernel_shape"]
    s, d = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    return [(n + p[i] + p[i + 2] - d[i] * (k[i] - 1) - 1) // s[i] + 1
            for i, n in enumerate((h, w))]


def _case(name, attrs, xs, m, bias, residual, act, round_operands=False):
    """(model, feeds): seeded weights and inputs; with round_operands, the weights and x are
    rounded to float16 values (kept float32), which is what the float16 form computes on."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    cg = xs[1] // attrs.get("group", 1)
    w = (rng.standard_normal((m, cg, *attrs["kernel_shape"])) * 0.3).astype(np.float32)
    ho, wo = _out_hw(attrs, *xs[2:])
    feeds = {"x": rng.standard_normal(xs).astype(np.float32)}
    if residual:
        feeds["r"] = rng.standard_normal((xs[0], m, ho, wo)).astype(np.float32)
    inits = {"W": w, "lo": np.float32(0.0), "hi": np.float32(6.0)}
    if bias:
        inits["B"] = rng.standard_normal(m).astype(np.float32)
    if round_operands:
        inits["W"] = w.astype(np.float16).astype(np.float32)
        feeds["x"] = feeds["x"].astype(np.float16).astype(np.float32)
    nodes = [node("Conv", ["x", "W"] + (["B"] if bias else []), ["c"], **attrs)]
    last = "c"
    if residual:
        nodes.append(node("Add", ["c", "r"], ["a"]))
        last = "a"
    if act == "Clip":
        nodes.append(node("Clip", [last, "lo", "hi"], ["y"]))
    else:
        nodes.append(node(act or "Identity", [last], ["y"]))
    ins = [("x", list(xs))] + ([("r", [xs[0], m, ho, wo])] if residual else [])
    return make_model(nodes, ins, [("y", [xs[0], m, ho, wo])], inits), feeds


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]


# -- build-time facts (no emulator) ----------------------------------------------------------

def test_weights_pack_as_float16_in_either_orientation():
    w = np.arange(5 * 12, dtype=np.float32).reshape(5, 12) - 20.0
    w[0, 0] = 1e6     # beyond float16: clamped, not infinite
    normal = HalfGemm(5, 12, 100, False)
    packed = normal.pack(w).reshape(-1, 12, normal.rows)   # panels [m / R][k][R]
    assert packed.dtype == np.float16 and packed[0, 0, 0] == np.float16(65504.0)
    assert packed[0, 5, 2] == np.float16(w[2, 5])
    trans = HalfGemm(5, 12, 9, True)
    t = trans.pack(w).reshape(12, 5)                        # [k][m]
    assert t[5, 2] == np.float16(w[2, 5]) and t.shape == (12, 5)
    assert rows_for(16) == 4 and rows_for(19) == 5 and rows_for(14) == 7
    assert normal.weight_halves == 60 and trans.weight_halves == 60
    padded = HalfGemm(9, 3, 100, False)                     # 9 rows: two panels of 5
    panels = padded.pack(np.ones((9, 3))).reshape(2, 3, 5)
    assert padded.weight_halves == 30 and not panels[1, :, 4].any() and panels[1, :, :4].all()


def test_cases_cover_every_staged_form():
    """Both orientations at both LMULs, each orientation with a middle stage (three or more)
    and a padded panel, among the GEMM cases (as planned for VLEN 256)."""
    forms = []
    for name, attrs, xs, m, *_ in CASES:
        if "group" not in attrs:
            kh, kw = attrs["kernel_shape"]
            g = plan(m, xs[1] * kh * kw, math.prod(_out_hw(attrs, *xs[2:])))
            forms.append((g, stages(g.k)[1], (g.cols if g.trans else g.m) % g.rows))
    assert {(g.trans, g.lmul) for g, _, _ in forms} == {(t, L) for t in (0, 1) for L in (2, 4)}
    for trans in (False, True):
        assert any(g.trans == trans and n >= 3 for g, n, _ in forms), trans
        assert any(g.trans == trans and pad for g, _, pad in forms), trans


def test_build_records_precision_and_stores_float16_weights():
    model, _ = _case(*CASES[0])
    sizes = {}
    for p in ("fp32", "auto", "fp16"):
        art = rvvkit.build(model, precision=p)
        assert art.meta["precision"] == p
        sizes[p] = art.meta["memory"]["weights_bytes"]
    assert sizes["fp16"] < sizes["fp32"] < sizes["auto"]
    assert not rvvkit.build(model, precision="fp16").meta["cuda"]["available"]
    assert rvvkit.build(model, precision="auto").meta["cuda"]["available"]


def test_fp16_artifact_refuses_a_target_without_zvfh():
    model, feeds = _case(*CASES[0])
    art = rvvkit.build(model, precision="fp16")
    with pytest.raises(CompileError, match="precision fp16"):
        rvvkit.load(art, on="host").run(feeds)


# -- the float16 forms under QEMU ------------------------------------------------------------

@needs_qemu
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("precision", ["auto", "fp16"])
def test_float16_form_on_k1_profile(case, precision):
    model, feeds = _case(*case)
    rounded, rfeeds = _case(*case, round_operands=True)
    exact, same = _ort(model, feeds), _ort(rounded, rfeeds)
    scale = float(np.abs(exact).max())
    art = rvvkit.build(model, precision=precision)
    for vlen in VLENS:
        with rvvkit.load(art, on="qemu", vlen=vlen, isa="k1", tail_ones=True) as s:
            y = s.run(feeds)["y"]
        # the float16 form ran (float32 arithmetic would be ~1e-7 off), on float16 operands
        assert np.abs(y - exact).max() > 1e-6 * scale, vlen
        form = "widened" if "group" in case[1] else "staged"
        np.testing.assert_allclose(y, same, rtol=0, atol=SAME_ROUNDING[form] * scale,
                                   err_msg=vlen)
        np.testing.assert_allclose(y, exact, rtol=0, atol=FP32_TOLERANCE * scale,
                                   err_msg=vlen)


@needs_qemu
@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=[c[0] for c in WINOGRAD_CASES])
def test_winograd_float16_gemms_on_k1_profile(case):
    model, feeds = _case(*case)
    exact = _ort(model, feeds)
    scale = float(np.abs(exact).max())
    for precision in ("auto", "fp16"):
        art = rvvkit.build(model, precision=precision)
        assert "winograd" in art.c_source, "the case must take the Winograd form"
        for vlen in (128, 512):
            with rvvkit.load(art, on="qemu", vlen=vlen, isa="k1", tail_ones=True) as s:
                y = s.run(feeds)["y"]
            assert np.abs(y - exact).max() > 1e-6 * scale, (precision, vlen)
            np.testing.assert_allclose(y, exact, rtol=0, atol=WINOGRAD_TOLERANCE * scale,
                                       err_msg=f"{precision} {vlen}")


@needs_qemu
def test_auto_computes_float32_without_zvfh():
    model, feeds = _case(*CASES[2])
    exact = _ort(model, feeds)
    art = rvvkit.build(model, precision="auto")
    with rvvkit.load(art, on="qemu", vlen=256, isa="rv64gcv", tail_ones=True) as s:
        y = s.run(feeds)["y"]
    np.testing.assert_allclose(y, exact, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rvvkit.load(art, on="host").run(feeds)["y"], exact,
                               rtol=1e-5, atol=1e-5)


@needs_qemu
def test_fp16_refuses_the_plain_rvv_profile():
    model, feeds = _case(*CASES[0])
    art = rvvkit.build(model, precision="fp16")
    with pytest.raises(CompileError, match="Zvfh"):
        rvvkit.load(art, on="qemu", vlen=256, isa="rv64gcv").run(feeds)


# -- the generated source compiles warning-clean with every float16 form ---------------------

def _every_form_model():
    """A pointwise conv, a Winograd 3x3, a depthwise 3x3 (a large and a small plane), a strided
    3x3 (im2col) and a pointwise conv on a 7x7 map (transposed GEMM)."""
    rng = np.random.default_rng(7)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)
    nodes = [node("Conv", ["x", "w1"], ["a"], kernel_shape=[1, 1]),
             node("Conv", ["a", "w2"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             node("Conv", ["b", "w3"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
             node("Conv", ["c", "w4"], ["d"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1, 1, 1, 1]),
             node("Conv", ["d", "w5"], ["e"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=40),
             node("Conv", ["e", "w6"], ["y"], kernel_shape=[1, 1])]
    inits = {"w1": w(32, 16, 1, 1), "w2": w(32, 32, 3, 3), "w3": w(32, 1, 3, 3),
             "w4": w(40, 32, 3, 3), "w5": w(40, 1, 3, 3), "w6": w(64, 40, 1, 1)}
    return make_model(nodes, [("x", [1, 16, 14, 14])], [("y", [1, 64, 7, 7])], inits)


def _compilers():
    """(name, argv prefix) of the riscv64 compilers here that target the K1 profile."""
    import shutil
    import subprocess
    import sys
    from rvvkit.jit import isa
    k1 = isa.profile("k1")
    out = []
    if shutil.which("clang-16"):
        ver = subprocess.run(["clang-16", "--version"], capture_output=True, text=True).stdout
        out.append(("clang-16", ["clang-16", "--target=riscv64-linux-gnu", "-O2",
                                 *k1.arch_flags("clang", ver)]))
    if subprocess.run([sys.executable, "-m", "ziglang", "version"],
                      capture_output=True).returncode == 0:
        out.append(("zig", [sys.executable, "-m", "ziglang", "cc", "--target=riscv64-linux-gnu",
                            "-O2", *k1.arch_flags("zig")]))
    return out


@pytest.mark.parametrize("precision", ["auto", "fp16"])
def test_float16_source_compiles_warning_clean_as_c_and_cpp(precision, tmp_path):
    import subprocess
    art = rvvkit.build(_every_form_model(), precision=precision, cuda=False)
    src = art.c_source
    assert src.count("vfwmacc") >= 5 and "rvk_conv_phase_split_f16" in src and "gemm16" in src
    (tmp_path / "m.c").write_text(src)
    compilers = _compilers()
    if not compilers:
        pytest.skip("no riscv64 compiler with Zvfh here (clang-16 or zig: scripts/setup.sh)")
    for name, cc in compilers:
        for lang in (["-x", "c", "-std=c11"], ["-x", "c++", "-std=c++11"]):
            proc = subprocess.run([*cc, "-Wall", "-Wextra", "-Werror", *lang, "-c",
                                   str(tmp_path / "m.c"), "-o", str(tmp_path / "m.o")],
                                  capture_output=True, text=True)
            assert proc.returncode == 0 and not proc.stderr.strip(), \
                (name, lang, proc.stderr[:3000])


def test_auto_source_compiles_warning_clean_without_zvfh(tmp_path):
    """auto's float32 side: the host compilers and plain RVV see no float16 code."""
    import shutil
    import subprocess
    src = tmp_path / "m.c"
    src.write_text(rvvkit.build(_every_form_model(), precision="auto", cuda=False).c_source)
    ccs = [[c, "-O2"] for c in ("gcc", "clang") if shutil.which(c)]
    if shutil.which("clang-16"):
        ccs.append(["clang-16", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-O2"])
    for cc in ccs:
        for lang in (["-x", "c", "-std=c11"], ["-x", "c++", "-std=c++11"]):
            proc = subprocess.run([*cc, "-Wall", "-Wextra", "-Werror", *lang, "-c", str(src),
                                   "-o", str(tmp_path / "m.o")], capture_output=True, text=True)
            assert proc.returncode == 0 and not proc.stderr.strip(), \
                (cc, lang, proc.stderr[:3000])


@needs_qemu
@pytest.mark.parametrize("profile", ["rv64gcv", "k1"])
def test_auto_build_uses_only_the_profiles_extensions(profile):
    """Under the checking QEMU (which traps an extension the -cpu leaves out): auto's plain-RVV
    build uses no Zvfh/Zfh and computes float32; its K1 build runs its float16 forms."""
    from rvvkit.jit import isa
    from rvvkit.errors import RvvkitError
    try:
        qemu = isa.check_qemu()
    except RvvkitError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    model = _every_form_model()
    feeds = {"x": np.random.default_rng(3).standard_normal((1, 16, 14, 14)).astype(np.float32)}
    exact = _ort(model, feeds)
    art = rvvkit.build(model, precision="auto", cuda=False)
    with rvvkit.load(art, on="qemu", vlen=256, isa=profile, check=True, qemu=qemu) as s:
        y = s.run(feeds)["y"]
    err = np.abs(y - exact).max() / np.abs(exact).max()
    assert err < (1e-5 if profile == "rv64gcv" else 2e-2), err
    if profile == "k1":
        assert err > 1e-6, "the float16 forms did not run"


# -- whole models (benchmarks/precision_models.py runs every light and stored one) ------------

@needs_qemu
@pytest.mark.parametrize("name", ["squeezenet", "mobilenet_v2_legacy", "resnet18_legacy"])
def test_models_in_float16_keep_their_top1(name):
    """A light model (random weights, rvvkit.zoo) and two stored exports, built with auto and
    run under the K1 profile: within the documented 2e-2 of onnxruntime's float32 logits
    (relative to their largest magnitude), the same top-1 class."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import precision_models
    row = precision_models.check(name, 256)
    assert "error" not in row, row
    assert row["half_kernels"] > 0 and row["top1"] is True, row
    assert 1e-6 < row["rel_error"] <= precision_models.LIMIT, row
