"""Runs single CUDA kernels generated from C lowerings, without a plan: many cases go into one
translation unit (exported `k<i>` launchers), built once for the CPU emulator (g++) and once
checked with nvcc. Used by the kernel-family tests of tests/cuda."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cffi
import numpy as np
import pytest

import rvvkit
from rvvkit.codegen.cuda import lower_cuda
from rvvkit.codegen.cuda.render import launcher_body

EMU = Path(rvvkit.__file__).parent / "runtime_c" / "rvk_cuda_emu.h"
# The part of the generated prelude that the kernels need (no plan entry points here).
ORDERS = ("forward", "reverse")
HDR = """#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define RVK_LAUNCH(kern, grid, block, args) kern<<<(grid), (block)>>> args
#endif
#include <math.h>
#define RVK_API extern "C" __attribute__((visibility("default")))
"""


def lower(low):
    """The CUDA kernel of a C lowering's result (`Lowered`)."""
    return lower_cuda(low.kernel)


def translation_unit(kernels_and_cuda) -> str:
    support, parts = {}, []
    for i, (k, ck) in enumerate(kernels_and_cuda):
        for name, text in ck.support.items():
            assert support.setdefault(name, text) == text, f"support {name} differs"
        parts.append(f"{k.signature(f'k{i}')} {{\n{launcher_body(k, ck)}\n}}\n")
    return HDR + "\n".join(support.values()) + "\n\n" + "\n".join(parts)


class EmuLib:
    """The cases built for the CPU emulator; run(i, ...) calls launcher k<i> on host arrays."""

    def __init__(self, lowered, tmp: Path):
        if shutil.which("g++") is None:
            pytest.skip("g++ not found")
        src = tmp / "kernels.cu"
        src.write_text(translation_unit(lowered))
        so = tmp / "kernels.so"
        cmd = ["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-x", "c++",
               "-include", str(EMU), "-shared", "-fPIC", str(src), "-o", str(so)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        self.ffi = cffi.FFI()
        for i, (k, _) in enumerate(lowered):
            n = len(k.params) + (1 if k.workspace else 0)
            self.ffi.cdef(f"void k{i}({', '.join(['float *'] * n)});")
        self.lib = self.ffi.dlopen(str(so))
        self.kernels = [k for k, _ in lowered]

    def run(self, i, inputs, out_shape, transforms=None, order="forward"):
        """Output of case i; `transforms` are the lowering's build-time weight packings;
        `order` the emulator's thread order ("reverse" exposes the other half of the missing
        barriers, see rvk_cuda_emu.h)."""
        arrs = [np.ascontiguousarray(a, np.float32) for a in inputs]
        for j, fn in (transforms or {}).items():
            arrs[j] = np.ascontiguousarray(fn(arrs[j]), np.float32)
        y = np.full(out_shape, np.nan, np.float32)          # unwritten outputs show up
        arrs.append(y)
        if self.kernels[i].workspace:
            arrs.append(np.full(self.kernels[i].workspace, np.nan, np.float32))
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RVK_CUDA_EMU_ORDER", order)
            getattr(self.lib, f"k{i}")(*[self.ffi.cast("float *", a.ctypes.data)
                                         for a in arrs])
        return y


def nvcc_compiles(lowered, tmp: Path) -> None:
    """Asserts that nvcc compiles the cases with no warning (host and device passes)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    src = tmp / "kernels.cu"
    src.write_text(translation_unit(lowered))
    cmd = [nvcc, "-std=c++17", "-c", "-Xcompiler", "-fPIC,-Wall,-Wextra", "-Werror",
           "all-warnings", str(src), "-o", str(tmp / "kernels.o")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "warning" not in (res.stdout + res.stderr).lower(), res.stdout + res.stderr
