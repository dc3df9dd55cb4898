"""Precompiled kernels in the artifact (rvvkit/artifact/precompiled.py): `build --precompile` and
`pack` add them; a host or QEMU without a compiler runs them and says so; a working compiler
still JIT-compiles unless they are preferred; they never enter the shared compile cache."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import rvvkit
from conftest import run_ort
from qemu_support import QEMU, RV_COMPILER, small_feeds, small_model
from rvvkit.artifact import Artifact
from rvvkit.errors import CompilerNotFound
from rvvkit.precompile import pack
from rvvkit.artifact.precompiled import KERNELS_PREFIX, RUNNER_PREFIX, available

needs_rvv = pytest.mark.skipif(not (QEMU and RV_COMPILER), reason="qemu-riscv64 or a riscv64 "
                               "cross compiler missing: run scripts/setup.sh")
HOST_ARCH = os.uname().machine


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    archs = ["x86_64"] if HOST_ARCH == "x86_64" else []
    if QEMU and RV_COMPILER:
        archs.append("riscv64")
    art = pack(rvvkit.build(small_model(), cuda=False), archs)
    path = tmp_path_factory.mktemp("pre") / "small.rvv"
    art.save(path)
    return path


@pytest.fixture
def no_compilers(tmp_path, monkeypatch):
    """PATH holding qemu-riscv64 alone: no cc, gcc, clang or cross compiler to be found."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if QEMU:
        os.symlink(QEMU, bin_dir / "qemu-riscv64")
    monkeypatch.setenv("PATH", str(bin_dir))
    for var in ("RVVKIT_COMPILER", "TVM_RVV_COMPILER", "RVVKIT_PREFER_PRECOMPILED"):
        monkeypatch.delenv(var, raising=False)
    return bin_dir


def test_sections_and_meta(packed):
    art = Artifact.load(packed).check_model()
    for arch, triple in available(art).items():
        entry = art.meta["precompiled"][triple]
        assert entry["arch"] == arch and entry["flags"] and len(entry["key"]) == 64
        assert art.extra[KERNELS_PREFIX + triple][:4] == b"\x7fELF"
        assert art.extra[RUNNER_PREFIX + triple][:4] == b"\x7fELF"
        assert "-march=native" not in entry["flags"]  # the board's CPU is unknown at build


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="x86_64 kernels are precompiled on x86_64")
def test_host_without_compiler_runs_precompiled(packed, no_compilers):
    feeds = small_feeds()
    with rvvkit.load(packed, on="host") as sess:
        assert sess.kernels_from.startswith("precompiled x86_64")
        assert sess.describe()["kernels"] == sess.kernels_from
        got = sess.run(feeds)
    want = run_ort(small_model(), feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


@needs_rvv
def test_qemu_without_compiler_runs_precompiled(packed, no_compilers, monkeypatch):
    # zig's clang comes with Python (the ziglang package), so PATH alone does not hide every
    # riscv64 compiler here: name one that does not exist, as on a machine without any
    monkeypatch.setenv("RVVKIT_COMPILER", "no-such-riscv64-cc")
    feeds = small_feeds()
    with rvvkit.load(packed, on="qemu", vlen=128) as sess:
        assert sess.kernels_from.startswith("precompiled riscv64")
        got = sess.run(feeds)
    want = run_ort(small_model(), feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


def test_working_compiler_still_jits_unless_preferred(packed):
    with rvvkit.load(packed, on="host") as sess:
        assert sess.kernels_from == "jit"
    if HOST_ARCH == "x86_64":
        with rvvkit.load(packed, on="host", prefer_precompiled=True) as sess:
            assert sess.kernels_from.startswith("precompiled")
            # a private copy, not the shared compile cache
            assert "rvvkit-precompiled-" in str(sess.so_path)


def test_no_compiler_and_no_precompiled_names_both_ways_out(no_compilers):
    art = rvvkit.build(small_model(), cuda=False)
    with pytest.raises(CompilerNotFound, match=r"rvvkit pack ARTIFACT --precompile"):
        rvvkit.load(art, on="host")


def test_prefer_without_precompiled_is_one_clear_error():
    from rvvkit.errors import ArtifactError
    art = rvvkit.build(small_model(), cuda=False)
    with pytest.raises(ArtifactError, match="no precompiled kernels for"):
        rvvkit.load(art, on="host", prefer_precompiled=True)


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="x86_64 kernels are precompiled on x86_64")
def test_cli_build_pack_and_run_without_compiler(tmp_path):
    import onnx
    model = tmp_path / "m.onnx"
    onnx.save(small_model(), model)
    art = tmp_path / "m.rvv"
    run = [sys.executable, "-m", "rvvkit"]
    subprocess.run(run + ["build", str(model), "-o", str(art), "-q"], check=True)
    proc = subprocess.run(run + ["pack", str(art), "--precompile", "host"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert "precompiled kernels and runner for x86_64" in proc.stderr
    env = dict(os.environ, PATH=str(tmp_path / "empty"))
    proc = subprocess.run(run + ["run", str(art)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "precompiled x86_64" in proc.stderr
    bad = subprocess.run(run + ["pack", str(art), "--precompile", "sparc"], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "unknown target 'sparc'" in bad.stderr
    assert "Traceback" not in bad.stderr
