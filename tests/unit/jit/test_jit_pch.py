"""rvvkit.jit.pch: the CUDA emulator header precompiled once per compiler and flags, used by
`--on cuda-emu` builds with g++, and never a reason for a build to fail."""
import shutil

import pytest

from rvvkit.jit import nvcc, pch
from rvvkit.jit.compilers import resolve_compiler

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")


@pytest.fixture
def gxx():
    return resolve_compiler("g++", target="host")


def test_header_flags_drop_the_include_and_the_link():
    flags = nvcc.emulator_flags(extra=["-g"], header="{header}")
    assert pch.header_flags(flags, "{header}") == ["-std=c++17", "-O2", "-x", "c++-header",
                                                   "-DRVK_CUDA_EMU", "-fPIC",
                                                   "-ffp-contract=fast", "-g"]


@needs_gxx
def test_gxx_gets_a_precompiled_copy_once(gxx, tmp_path, monkeypatch):
    monkeypatch.setenv("RVVKIT_CACHE_DIR", str(tmp_path))
    flags = nvcc.emulator_flags(header="{header}")
    first = pch.precompiled(nvcc.emulator_header(), gxx, flags)
    assert first.parent.parent == tmp_path / "pch"
    assert (first.parent / (first.name + ".gch")).stat().st_size > 0
    assert first.read_bytes() == nvcc.emulator_header().read_bytes()
    stamp = (first.parent / (first.name + ".gch")).stat().st_mtime_ns
    assert pch.precompiled(nvcc.emulator_header(), gxx, flags) == first
    assert (first.parent / (first.name + ".gch")).stat().st_mtime_ns == stamp   # not rebuilt
    other = pch.precompiled(nvcc.emulator_header(), gxx, nvcc.emulator_flags(
        extra=["-DX=1"], header="{header}"))
    assert other != first   # other flags, another precompiled form


@needs_gxx
def test_emulated_builds_include_it(gxx, tmp_path, monkeypatch):
    monkeypatch.setenv("RVVKIT_CACHE_DIR", str(tmp_path))
    so = nvcc.compile_cu_emulated("extern \"C\" int f(void) { return 3; }\n", gxx)
    assert str(tmp_path / "pch") in (so.parent / "cmd.txt").read_text()


def test_no_precompiled_header_when_it_cannot_be_made(gxx, tmp_path, monkeypatch):
    monkeypatch.setenv("RVVKIT_CACHE_DIR", str(tmp_path))
    header = nvcc.emulator_header()
    assert pch.precompiled(header, gxx, ["-x", "c++", "-fno-such-flag"]) == header
    monkeypatch.setenv("RVVKIT_NO_CACHE", "1")
    assert pch.precompiled(header, gxx, nvcc.emulator_flags(header="{header}")) == header
