"""The CPU emulator keeps device memory out of the host's reach, as a GPU does: host code that
reads or writes a cudaMalloc'd buffer outside a kernel launch or a cudaMemcpy/cudaMemset is
refused with one line naming the plan step, where it used to pass (and a GPU crashed: a
depthwise conv's host wrapper cleared its device workspace with memset)."""
from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import rvvkit
from rvvkit.builder import build_model
from rvvkit.codegen.c import render
from rvvkit.codegen.cuda.render import CUDA
from rvvkit.codegen.plan import build_plan
from rvvkit.errors import ExecutionError
from rvvkit.frontend.onnx import from_onnx
from rvvkit.jit.nvcc import emulator_header
from rvvkit.passes import optimize

from cuda_support import make_model, rand

pytestmark = pytest.mark.cuda

C = 16   # channels: one plane per part of the split C kernel, whose prologue clears `ws`


def depthwise_model():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], group=C, pads=[1, 1, 1, 1], name="dw")]
    return make_model(nodes, [("x", [1, C, 40, 40])], ["y"], {"w": rand(C, 1, 3, 3, seed=1)})


def feeds():
    return {"x": rand(1, C, 40, 40, seed=2)}


def run_emulated(art):
    with rvvkit.load(art, on="cuda-emu") as sess:
        return sess.run(feeds())


def test_depthwise_runs_with_no_host_touch_of_device_memory():
    art = build_model(depthwise_model())
    assert "RVK_MEMZERO" not in _wrapper(art.cu_source), "host clear back in the wrapper"
    with rvvkit.load(art, on="host") as sess:
        want = sess.run(feeds())["y"]
    np.testing.assert_allclose(run_emulated(art)["y"], want, rtol=1e-5, atol=1e-5)


def test_old_depthwise_wrapper_is_refused_naming_the_step():
    """The CUDA unit as rendered before the fix (the C prologue in the host wrapper)."""
    model = depthwise_model()
    art = build_model(model)
    g = from_onnx(model)
    optimize(g, 2)
    old = render(build_plan(g), dataclasses.replace(CUDA, prologue=True))
    assert "RVK_MEMZERO(ws" in _wrapper(old), "the planted case lost its host clear"
    art.cu_source = old
    with pytest.raises(ExecutionError) as err:
        run_emulated(art)
    msg = str(err.value)
    assert "\n" not in msg
    assert re.match(r"step 0 \(Conv node 'dw'\): host code wrote device memory \(byte \d+ of "
                    r"a \d+-byte cudaMalloc\) in the host code of plan step 0 \(before any "
                    r"launch\)", msg), msg


@pytest.mark.parametrize("plant,kind", [("memset(y, 0, 64);", "wrote"),
                                        ("{ volatile float v = w[0]; (void)v; }", "read")])
def test_planted_host_access_is_refused_and_the_session_recovers(plant, kind):
    art = build_model(depthwise_model())
    good = art.cu_source
    art.cu_source = _plant(good, plant)
    with rvvkit.load(art, on="cuda-emu") as sess:
        with pytest.raises(ExecutionError, match=f"step 0 .*host code {kind} device memory"):
            sess.run(feeds())
        # refused, not crashed: the process and the emulator carry on
        art2 = build_model(depthwise_model())
        assert run_emulated(art2)["y"].shape == (1, C, 40, 40)


def test_launch_arguments_are_evaluated_on_the_host():
    """A launch argument that reads device memory is a host read on a GPU."""
    art = build_model(depthwise_model())
    head, wrapper = art.cu_source.split("RVK_API void k0_", 1)
    read = r"\1\2 + 0 * (int)*(volatile const float *)w"
    wrapper, n = re.subn(r"(RVK_LAUNCH\(\w+, [^;]*?, \()(\w+)", read,
                         wrapper, count=1)
    assert n == 1
    art.cu_source = head + "RVK_API void k0_" + wrapper
    with pytest.raises(ExecutionError, match="host code read device memory"):
        run_emulated(art)


PROGRAM = r"""
#include <cstdio>
int main(int argc, char **argv) {
    float *d = nullptr;
    if (cudaMalloc((void **)&d, 1000) != cudaSuccess) return 2;
    const float one = 1.0f;
    float back = 0.0f;
    cudaMemcpy(d + 10, &one, sizeof one, cudaMemcpyHostToDevice);   /* allowed */
    cudaMemcpy(&back, d + 10, sizeof back, cudaMemcpyDeviceToHost);
    if (back != 1.0f) return 3;
    if (argc > 1 && argv[1][0] == 'n') *(volatile int *)nullptr = 1;   /* not device memory */
    d[3] = 2.0f;                                                       /* outside any step */
    std::puts("not refused");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("emu_memory")
    src, exe = tmp / "prog.cu", tmp / "prog"
    src.write_text(PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-x", "c++",
                    "-include", str(emulator_header()), str(src), "-o", str(exe)], check=True)
    return exe


def test_host_access_outside_a_step_aborts_with_one_line(program):
    proc = subprocess.run([str(program)], capture_output=True, text=True)
    assert proc.returncode == -6, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr == ("rvk_cuda_emu: host code wrote device memory (byte 12 of a 1000-byte "
                           "cudaMalloc) outside any plan step; host code may only launch kernels "
                           "and call the CUDA runtime (on a GPU this is a host SIGSEGV)\n")


def test_other_faults_stay_ordinary_crashes(program):
    proc = subprocess.run([str(program), "null"], capture_output=True, text=True)
    assert proc.returncode == -11 and "rvk_cuda_emu" not in proc.stderr, proc


def _wrapper(source: str) -> str:
    """The first host wrapper's text (RVK_API void k0_dwconv(...) { ... })."""
    i = source.index("RVK_API void k0_")
    return source[i:source.index("\n}\n", i)]


def _plant(source: str, stmt: str) -> str:
    """`stmt` as the first statement of the first kernel's host wrapper."""
    m = re.search(r"RVK_API void k0_\w*\([^)]*\) \{[^\n]*\n", source)
    assert m, "no wrapper found"
    return source[:m.end()] + f"    {stmt}\n" + source[m.end():]
