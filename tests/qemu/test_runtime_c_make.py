"""runtime_c/ built as an embedded engineer would, without Python: `make -C runtime_c` with the
host gcc and with the riscv64 cross gcc, the kernels compiled by hand from the artifact's C, and
the runner run (under qemu-riscv64 for riscv64) on an artifact, its outputs checked against
onnxruntime. Also the CMake toolchain files of toolchain/cmake/. Builds go to tmp dirs (O=...),
never into the tree."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import rvvkit
from conftest import run_ort
from qemu_support import QEMU, assert_close, small_feeds, small_model
from rvvkit.jit import targets
from rvvkit.resources import runtime_c_dir, toolchain_dir

RV = targets.riscv()
CROSS_GCC = shutil.which(f"{RV.triple}-gcc")
MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(not MAKE, reason="make not installed (build-essential)")
needs_cross = pytest.mark.skipif(not (MAKE and CROSS_GCC and QEMU),
                                 reason=f"make, {RV.triple}-gcc or qemu-riscv64 missing: run "
                                        "scripts/setup.sh")


def make_runner(out_dir, cc: str, *extra: str):
    proc = subprocess.run([MAKE, "-C", str(runtime_c_dir()), f"O={out_dir}", f"CC={cc}",
                           *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning" not in proc.stderr, proc.stderr
    exe = out_dir / "rvvkit_runner"
    assert exe.is_file()
    return exe


def build_kernels_by_hand(art, out_dir, cc_argv):
    """The artifact's C into a shared object, as on a board: cc -O3 -shared -fPIC model.c."""
    src = out_dir / "model.c"
    src.write_text(art.c_source)
    so = out_dir / "model.so"
    subprocess.run([*cc_argv, "-O3", "-shared", "-fPIC", str(src), "-o", str(so), "-lm"],
                   check=True, capture_output=True, timeout=300)
    return so


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    onnx_model = small_model()
    path = tmp_path_factory.mktemp("make") / "small.rvv"
    art = rvvkit.build(onnx_model)
    art.save(path)
    return onnx_model, art, path


def run_and_check(prefix, exe, so, model, tmp_path):
    onnx_model, art, path = model
    feeds = small_feeds()
    np.save(tmp_path / "x.npy", feeds["x"])
    proc = subprocess.run([*prefix, str(exe), str(path), str(so), "--inputs",
                           str(tmp_path / "x.npy"), "--outdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = {o["name"]: np.load(tmp_path / f"out{i}.npy").reshape(o["shape"])
           for i, o in enumerate(art.meta["outputs"])}
    assert_close(got, run_ort(onnx_model, feeds), "make-built runner", logits="logits")


@needs_make
def test_make_host_gcc_runs_an_artifact(model, tmp_path):
    exe = make_runner(tmp_path, "gcc")
    so = build_kernels_by_hand(model[1], tmp_path, ["gcc"])
    run_and_check([], exe, so, model, tmp_path)


@needs_make
@pytest.mark.skipif(not shutil.which("g++"), reason="g++ not installed")
def test_make_as_cxx11_is_warning_clean(tmp_path):
    make_runner(tmp_path, "g++", "CFLAGS=-O2 -Wall -Wextra -Werror")


@needs_cross
def test_make_cross_gcc_runs_under_qemu(model, tmp_path):
    exe = make_runner(tmp_path, CROSS_GCC)
    so = build_kernels_by_hand(model[1], tmp_path, [CROSS_GCC, *RV.family_flags("gcc").arch])
    prefix = [QEMU, "-L", RV.sysroot, "-cpu", RV.cpu_string(RV.default_vlen)]
    run_and_check(prefix, exe, so, model, tmp_path)


@needs_make
def test_make_clean_removes_only_the_runner(tmp_path):
    make_runner(tmp_path, "cc")
    (tmp_path / "keep.txt").write_text("x")
    subprocess.run([MAKE, "-C", str(runtime_c_dir()), f"O={tmp_path}", "clean"], check=True,
                   capture_output=True)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


CMAKE_LISTS = """cmake_minimum_required(VERSION 3.13)
project(rvvkit_runner C)
add_executable(rvvkit_runner "{runner}")
target_link_libraries(rvvkit_runner dl)
"""


def _cmake_cases():
    clang = shutil.which("clang-16") and shutil.which("ld.lld-16")
    return [pytest.param("riscv64-gcc", marks=pytest.mark.skipif(not CROSS_GCC,
                                                                 reason="no riscv64 gcc")),
            pytest.param("riscv64-clang", marks=pytest.mark.skipif(not clang,
                                                                   reason="no clang-16/lld"))]


@pytest.mark.skipif(not (shutil.which("cmake") and MAKE and QEMU),
                    reason="cmake, make or qemu-riscv64 missing")
@pytest.mark.parametrize("toolchain_file", _cmake_cases())
def test_cmake_toolchain_files_build_the_runner(toolchain_file, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(
        CMAKE_LISTS.format(runner=runtime_c_dir() / "runner.c"))
    tc = toolchain_dir() / "cmake" / f"{toolchain_file}.cmake"
    for argv in (["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"),
                  f"-DCMAKE_TOOLCHAIN_FILE={tc}"], ["cmake", "--build", str(tmp_path / "b")]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([QEMU, "-L", RV.sysroot, "-cpu", RV.cpu_string(RV.default_vlen),
                           str(tmp_path / "b" / "rvvkit_runner"), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: runner"), proc.stderr
