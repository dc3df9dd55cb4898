"""Building CUDA translation units: nvcc choice and flags, the emulator build, the cache, and
compile errors. nvcc compiles without a GPU, so everything here runs where nvcc is installed."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

import rvvkit
from cuda_support import convnet, hand_source, needs_nvcc, relu_model
from rvvkit.errors import CompileError, CompilerNotFound
from rvvkit.jit import build, cache_key, compile_cu, compile_cu_emulated, key_material
from rvvkit.jit import nvcc as nv
from rvvkit.jit.compilers import Compiler

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("private_jit_cache")]
BROKEN = "__global__ void k(float *p) {\n    p[threadIdx.x] = no_such_name;\n}\n"


@pytest.fixture(scope="module")
def conv_cu():
    return rvvkit.build(convnet()).cu_source


# -- finding nvcc, flags ----------------------------------------------------------------------

def test_missing_nvcc_names_the_variable(monkeypatch):
    monkeypatch.setenv("RVVKIT_NVCC", "/nonexistent")
    with pytest.raises(CompilerNotFound, match="RVVKIT_NVCC"):
        nv.resolve_nvcc()
    with pytest.raises(CompilerNotFound, match="RVVKIT_NVCC"):
        compile_cu("int x;\n")


def test_nothing_on_path_says_how_to_point_at_nvcc(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nv, "DEFAULT_NVCC", ("nvcc", str(tmp_path / "cuda" / "bin" / "nvcc")))
    with pytest.raises(CompilerNotFound, match=r"nvcc not found[\s\S]*RVVKIT_NVCC="):
        nv.resolve_nvcc()


def test_a_compiler_that_is_not_nvcc_is_refused(monkeypatch):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    monkeypatch.setenv("RVVKIT_NVCC", "gcc")
    with pytest.raises(CompilerNotFound, match="not nvcc"):
        nv.resolve_nvcc()


@needs_nvcc
def test_resolve_from_env_path_and_command(monkeypatch):
    found = nv.resolve_nvcc()
    assert found.family == "nvcc" and found.machine == "cuda" and not found.is_cxx
    assert nv.nvcc_version(found)[0].isdigit()
    monkeypatch.setenv("RVVKIT_NVCC", found.path)
    assert nv.resolve_nvcc().argv == (found.path,)


def test_flags(monkeypatch):
    assert nv.nvcc_flags() == list(nv.BASE_FLAGS)
    assert nv.nvcc_flags(native=True)[-1] == "-arch=native"
    monkeypatch.setenv("RVVKIT_NVCC_FLAGS", "-arch=sm_90 -DX=1")
    flags = nv.nvcc_flags(native=True)
    assert "-arch=native" not in flags and flags[-2:] == ["-arch=sm_90", "-DX=1"]
    assert "-arch=native" not in nv.nvcc_flags(native=True, extra=["-gencode",
                                                                   "arch=compute_90,code=sm_90"])


def test_build_command_for_nvcc_keeps_pic_behind_xcompiler():
    comp = Compiler(argv=("nvcc",), path="/x/nvcc", version="release 13.0, V13.0.88",
                    family="nvcc", machine="cuda", is_cxx=False)
    cmd = build.build_command(comp, nv.nvcc_flags(), "model.cu", "model.so")
    assert "-fPIC" not in cmd and "-x" not in cmd
    assert cmd[:2] == ["nvcc", "-O3"] and cmd[-4:] == ["model.cu", "-o", "model.so", "-lm"]
    assert cmd.count("-shared") == 1 and "-fPIC,-O3" in cmd


# -- cache key ---------------------------------------------------------------------------------

def test_plain_c_keys_do_not_change():
    """Board caches (runtime/remote_jit) key C builds with the same function: the CUDA options
    must leave their keys alone."""
    comp = Compiler(argv=("gcc",), path="/x/gcc", version="gcc 12", family="gcc",
                    machine="x86_64-linux-gnu", is_cxx=False)
    material = key_material("int x;", comp, ["-O3"])
    assert "suffix" not in material and "depends" not in material
    assert cache_key("int x;", comp, ["-O3"]) == cache_key("int x;", comp, ["-O3"], suffix=".c",
                                                           depends=())


def test_key_covers_suffix_and_dependency_content(tmp_path):
    comp = Compiler(argv=("g++",), path="/x/g++", version="g++ 12", family="gcc",
                    machine="x86_64-linux-gnu", is_cxx=True)
    header = tmp_path / "h.h"
    header.write_text("/* one */\n")
    keys = {cache_key("int x;", comp, []), cache_key("int x;", comp, [], suffix=".cu"),
            cache_key("int x;", comp, [], suffix=".cu", depends=[header])}
    header.write_text("/* two */\n")
    keys.add(cache_key("int x;", comp, [], suffix=".cu", depends=[header]))
    assert len(keys) == 4


# -- nvcc builds -------------------------------------------------------------------------------

@needs_nvcc
def test_generated_cu_compiles_warning_free_and_caches(conv_cu, private_jit_cache, compile_counter):
    so = compile_cu(conv_cu)
    assert so.is_relative_to(private_jit_cache) and so.stat().st_size > 0
    entry = sorted(p.name for p in so.parent.iterdir())
    # no stderr.txt: no warnings; the digest checked before dlopen (jit/cache_trust.py)
    assert entry == ["cmd.txt", "model.cu", "model.so", "model.so.sha256"], entry
    assert (so.parent / "model.cu").read_text() == conv_cu
    assert compile_cu(conv_cu) == so and len(compile_counter) == 1  # second build: a cache hit
    compile_cu(conv_cu, flags=nv.nvcc_flags(extra=["-DRVK_OTHER=1"]))
    assert len(compile_counter) == 2  # other flags, other entry


@needs_nvcc
def test_hand_written_abi_source_compiles_warning_free():
    so = compile_cu(hand_source(rvvkit.build(relu_model())))
    assert not (so.parent / "stderr.txt").exists()


@needs_nvcc
def test_compile_error_shows_nvcc_stderr_and_source(private_jit_cache):
    with pytest.raises(CompileError) as info:
        compile_cu(BROKEN)
    err = info.value
    assert err.returncode != 0 and err.cmd[0].endswith("nvcc")
    assert "model.cu" in err.stderr and "error" in err.stderr
    assert err.source_path.endswith("model.cu") and os.path.isfile(err.source_path)
    assert "> 2 |     p[threadIdx.x] = no_such_name;" in err.excerpt
    assert "compiler stderr" in str(err)


# -- emulator builds ---------------------------------------------------------------------------

def test_emulator_needs_a_cxx_driver(monkeypatch):
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not installed")
    monkeypatch.setenv("RVVKIT_COMPILER", "gcc")
    assert nv.resolve_host_cxx().argv == ("g++",)
    assert nv.resolve_host_cxx("g++").is_cxx


@pytest.mark.parametrize("argv, family, sibling", [
    (("gcc",), "gcc", ("g++",)),
    (("/usr/bin/x86_64-linux-gnu-gcc-12",), "gcc", ("/usr/bin/x86_64-linux-gnu-g++-12",)),
    (("ccache", "clang-16"), "clang", ("ccache", "clang++-16")),
    (("cc",), "gcc", ("c++",)),
    (("python3", "-m", "ziglang", "cc"), "zig", ("python3", "-m", "ziglang", "c++")),
])
def test_cxx_sibling_of_a_c_compiler(argv, family, sibling):
    comp = Compiler(argv=argv, path="/x", version="v", family=family, machine="x86_64",
                    is_cxx=False)
    cands = nv._cxx_siblings(comp)
    assert cands[0] == sibling and ("g++",) in cands


def test_emulator_build_names_the_header_and_is_cached(conv_cu, compile_counter, private_jit_cache):
    so = compile_cu_emulated(conv_cu)
    cmd = (so.parent / "cmd.txt").read_text()
    # g++ reads the header precompiled: a copy of it beside its .gch (rvvkit/jit/pch.py)
    included = Path(re.search(r"-include (\S+)", cmd).group(1))
    assert included.read_bytes() == nv.emulator_header().read_bytes() and "-DRVK_CUDA_EMU" in cmd
    gch = included.parent / (included.name + ".gch")
    assert included == nv.emulator_header() or gch.is_file()
    assert sorted(p.name for p in so.parent.iterdir()) == ["cmd.txt", "model.cu", "model.so",
                                                           "model.so.sha256"]
    assert compile_cu_emulated(conv_cu) == so and len(compile_counter) == 1
