"""Numerics under QEMU: models built once, cross-compiled, run by the runner under qemu-riscv64
at every VLEN (128..1024) and with tail/mask-agnostic lanes filled with ones, compared with
onnxruntime (rtol 1e-3, atol 1e-4, same argmax).

QEMU runs the light models at roughly a few seconds (SqueezeNet, ShuffleNet) to tens of seconds
(Inception v1; ResNet50 takes ~50 s, hence Inception) per inference on the 2-core CI machine, so
the matrix is cut to fit the ~10 minute budget of tests/qemu: every VLEN, with and without
all-ones tails, for the small model; every VLEN and two all-ones settings for SqueezeNet; every
VLEN for ShuffleNet; two settings for Inception v1. The small model has odd sizes so
every VLEN leaves vector tails."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import rvvkit
from rvvkit.jit.targets import riscv
from conftest import run_ort
from qemu_support import (CLANG, GCC_CXX, RV_COMPILER, assert_close, expose_logits,
                          needs_both_compilers, needs_qemu, small_feeds, small_model)
from rvvkit.zoo import light_model, sample_inputs

pytestmark = [pytest.mark.qemu, needs_qemu]

SEED = 0
SETTINGS = [(vlen, tail) for vlen in riscv().vlens for tail in (False, True)]
LIGHT = [("squeezenet", 128, False), ("squeezenet", 256, False), ("squeezenet", 512, False),
         ("squeezenet", 1024, False), ("squeezenet", 128, True), ("squeezenet", 1024, True),
         ("shufflenet", 128, True), ("shufflenet", 256, False), ("shufflenet", 512, False),
         ("shufflenet", 1024, False), ("inception_v1", 128, True), ("inception_v1", 1024, False)]


def _id(vlen: int, tail: bool) -> str:
    return f"vlen{vlen}" + ("-ones" if tail else "")


@functools.lru_cache(maxsize=None)
def _small(tmp_root: str):
    model = small_model()
    path = f"{tmp_root}/small.rvv"
    rvvkit.build(model).save(path)
    return path, run_ort(model, small_feeds())


@functools.lru_cache(maxsize=1)  # one light model at a time: keeps memory to one copy
def _light(name: str, tmp_root: str):
    model = light_model(name, SEED)
    feeds = sample_inputs(model, SEED)
    logits = expose_logits(model)
    path = f"{tmp_root}/{name}.rvv"
    rvvkit.build(model).save(path)
    return path, feeds, run_ort(model, feeds), logits


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("qemu-models"))


@pytest.mark.parametrize("vlen,tail", SETTINGS, ids=[_id(*s) for s in SETTINGS])
def test_small_model(tmp_root, vlen, tail):
    path, ref = _small(tmp_root)
    with rvvkit.load(path, on="qemu", vlen=vlen, tail_ones=tail, compiler=RV_COMPILER) as sess:
        assert_close(sess.run(small_feeds()), ref, f"small/{_id(vlen, tail)}", "logits")


@pytest.mark.parametrize("name,vlen,tail", LIGHT, ids=[f"{n}-{_id(v, t)}" for n, v, t in LIGHT])
def test_light_model(tmp_root, name, vlen, tail):
    path, feeds, ref, logits = _light(name, tmp_root)
    with rvvkit.load(path, on="qemu", vlen=vlen, tail_ones=tail, compiler=RV_COMPILER) as sess:
        assert_close(sess.run(feeds), ref, f"{name}/{_id(vlen, tail)}", logits)


@needs_both_compilers
def test_scalar_gcc12_and_clang16_agree(tmp_root, monkeypatch):
    """The same artifact file, the compiler switched by the environment alone: GCC 12
    (TVM_RVV_COMPILER, scalar code) and clang-16 (RVVKIT_COMPILER, RVV code)."""
    path, feeds, ref, logits = _light("squeezenet", tmp_root)
    monkeypatch.delenv("RVVKIT_COMPILER", raising=False)
    monkeypatch.setenv("TVM_RVV_COMPILER", GCC_CXX)
    with rvvkit.load(path, on="qemu", vlen=256) as sess:
        assert sess.compiler.argv == (GCC_CXX,) and sess.compiler.is_cxx
        scalar = sess.run(feeds)
    monkeypatch.setenv("RVVKIT_COMPILER", CLANG)  # wins over TVM_RVV_COMPILER
    with rvvkit.load(path, on="qemu", vlen=256) as sess:
        assert sess.compiler.argv[0] == CLANG and sess.compiler.family == "clang"
        vector = sess.run(feeds)
    assert_close(scalar, ref, "squeezenet/gcc12", logits)
    assert_close(vector, ref, "squeezenet/clang16", logits)
    for name in ref:  # and each other, tighter than either is to onnxruntime
        np.testing.assert_allclose(scalar[name], vector[name], rtol=1e-4, atol=1e-5,
                                   err_msg=f"gcc12 vs clang16: {name!r}")
