"""The one harness of the kernel-level tests: single lowered kernels (a C lowering's `Lowered`:
kernel, build-time weight transforms), without a plan, many cases to one translation unit that
exports them as k0, k1, ... and checked against numpy. Three families use it:

- C (tests/host/test_kernels_conv_gemm.py): built with the host gcc, called through cffi;
- RVV (tests/qemu/test_rvv_kernels.py): cross-compiled, one `main` calls every kernel on a
  guarded buffer under qemu-user;
- CUDA (tests/cuda/test_cuda_*_kernels.py): the kernels' CUDA launchers, built for the CPU
  emulator (g++) and checked with nvcc.

Each call gets its inputs with the lowering's weight transforms applied, a NaN-filled output
and a NaN-filled workspace, so that an unwritten output or a read of unwritten scratch shows.
The case tables, one per kernel family with the subsets each test family runs, live in
tests/kernel_cases/.

Not a conftest.py: tests/conftest.py is imported by name (`from conftest import ...`)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Sequence

import cffi
import numpy as np
import pytest

from rvvkit.codegen.c import KERNEL_PRELUDE
from rvvkit.codegen.kernel import Lowered
from rvvkit.codegen.parallel import definition
from rvvkit.codegen.cuda.render import KERNEL_PRELUDE as CUDA_KERNEL_PRELUDE

# ----------------------------------------------------------------------- translation units

# What the generated units put before their kernels (rvvkit.codegen.c / .cuda.render), plus
# what the harness's own drivers need.
C_HDR = KERNEL_PRELUDE + """#include <stdio.h>
#include <stdlib.h>
#ifdef __cplusplus
#define RVK_API extern "C"
#else
#define RVK_API
#endif
"""
# The part of the generated CUDA prelude that the kernels need (no plan entry points here).
CUDA_HDR = """#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define RVK_LAUNCH(kern, grid, block, args) kern<<<(grid), (block)>>> args
#endif
#define RVK_API extern "C" __attribute__((visibility("default")))
""" + CUDA_KERNEL_PRELUDE


def translation_unit(header: str, kernels: Sequence, support_of=None, body_of=None) -> str:
    """`header`, every kernel's support (merged by name, as the emitter does: one name, one
    text) and each kernel as `k<i>`. support_of/body_of(i, kernel) default to the C kernel's."""
    support: Dict[str, str] = {}
    parts = []
    for i, k in enumerate(kernels):
        sup = k.support if support_of is None else support_of(i, k)
        for name, text in sup.items():
            assert support.setdefault(name, text) == text, f"support {name} differs"
        body = k.body if body_of is None else body_of(i, k)
        # the CUDA launchers (body_of) run on the host: no C prologue there (codegen/c.py)
        parts.append(definition(f"k{i}", k, body, threads=body_of is None,
                                prologue=body_of is None))
    return header + "\n".join(support.values()) + "\n\n" + "\n".join(parts)


def output_index(lowered, n_inputs: int) -> int:
    """Where call_arrays puts the output: after the inputs and the extra weight forms."""
    return n_inputs + len(lowered.extra_weights)


def call_arrays(lowered, inputs, out_shape) -> List[np.ndarray]:
    """The arguments of one kernel call: inputs (weights transformed as the build does), a
    NaN output, then a NaN workspace when the kernel has one."""
    arrs, transforms, _ = lowered.bind([np.ascontiguousarray(a, np.float32) for a in inputs])
    for j, fn in transforms.items():
        arrs[j] = np.ascontiguousarray(fn(arrs[j]), np.float32)
    arrs.append(np.full(out_shape, np.nan, np.float32))
    if lowered.kernel.workspace:
        arrs.append(np.full(lowered.kernel.workspace, np.nan, np.float32))
    return arrs


def compile_clean(cmd: Sequence[str], quiet: bool = False) -> None:
    """Runs a compiler; it must succeed and print no warning (quiet: nothing on stderr)."""
    res = subprocess.run(list(cmd), capture_output=True, text=True)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"{' '.join(cmd[:3])} failed:\n{out[:6000]}"
    assert "warning" not in out.lower(), out[:6000]
    assert not (quiet and res.stderr.strip()), f"{' '.join(cmd[:3])}:\n{res.stderr[:6000]}"


# ----------------------------------------------------------------------- in-process kernels

class KernelLib:
    """A shared object exporting k<i>(float *...) for each lowered kernel, called with numpy
    arrays through cffi."""

    def __init__(self, so: Path, kernels: Sequence):
        self.kernels = list(kernels)
        self.ffi = cffi.FFI()
        for i, k in enumerate(self.kernels):
            n = len(k.params) + (1 if k.workspace else 0)
            self.ffi.cdef(f"void k{i}({', '.join(['float *'] * n)});")
        self.lib = self.ffi.dlopen(str(so))

    def call(self, i: int, arrs: Sequence[np.ndarray]) -> None:
        getattr(self.lib, f"k{i}")(*[self.ffi.cast("float *", a.ctypes.data) for a in arrs])


class CLib(KernelLib):
    """Lowered C kernels built with `cc flags` into one shared object."""

    def __init__(self, lowered, path: Path, flags: Sequence[str], cc: str = "gcc",
                 warn: Sequence[str] = ("-Wall", "-Wextra", "-Werror")):
        self.lowered = list(lowered)
        src = path.with_suffix(".c")
        src.write_text(translation_unit(C_HDR, [lo.kernel for lo in self.lowered]))
        so = path.with_suffix(".so")
        subprocess.run([cc, *flags, *warn, "-shared", "-fPIC", str(src), "-o", str(so)],
                       check=True)
        super().__init__(so, [lo.kernel for lo in self.lowered])

    def __call__(self, i, inputs, out_shape):
        arrs = call_arrays(self.lowered[i], inputs, out_shape)
        self.call(i, arrs)
        return arrs[output_index(self.lowered[i], len(inputs))]


# ----------------------------------------------------------------------- CUDA

ORDERS = ("forward", "reverse")


def lower(low):
    """The CUDA kernel of a C lowering's result (`Lowered`)."""
    from rvvkit.codegen.cuda import lower_cuda
    return lower_cuda(low.kernel)


def cuda_unit(kernels_and_cuda) -> str:
    """The CUDA launchers of (C kernel, CUDA kernel) pairs as one translation unit."""
    from rvvkit.codegen.cuda.render import launcher_body
    pairs = list(kernels_and_cuda)
    return translation_unit(CUDA_HDR, [k for k, _ in pairs],
                            support_of=lambda i, k: pairs[i][1].support,
                            body_of=lambda i, k: launcher_body(k, pairs[i][1]) + "\n")


class EmuLib(KernelLib):
    """The cases built for the CUDA CPU emulator; run(i, ...) calls launcher k<i> on host
    arrays."""

    def __init__(self, lowered, tmp: Path):
        from rvvkit.jit.nvcc import emulator_header
        if shutil.which("g++") is None:
            pytest.skip("g++ not found")
        src = tmp / "kernels.cu"
        src.write_text(cuda_unit(lowered))
        so = tmp / "kernels.so"
        compile_clean(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-x", "c++",
                       "-include", str(emulator_header()), "-shared", "-fPIC", str(src),
                       "-o", str(so)])
        super().__init__(so, [k for k, _ in lowered])

    def run(self, i, inputs, out_shape, low=None, order="forward"):
        """Output of case i; `low` the case's `Lowered` where it stores weights transformed
        (its build-time packings); `order` the emulator's thread order ("reverse" exposes the
        other half of the missing barriers, see rvk_cuda_emu.h)."""
        low = low or Lowered(self.kernels[i])
        arrs = call_arrays(low, inputs, out_shape)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("RVK_CUDA_EMU_ORDER", order)
            self.call(i, arrs)
        return arrs[output_index(low, len(inputs))]


def nvcc_compiles(lowered, tmp: Path) -> None:
    """Asserts that nvcc compiles the cases with no warning (host and device passes)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    src = tmp / "kernels.cu"
    src.write_text(cuda_unit(lowered))
    compile_clean([nvcc, "-std=c++17", "-c", "-Xcompiler", "-fPIC,-Wall,-Wextra", "-Werror",
                   "all-warnings", str(src), "-o", str(tmp / "kernels.o")])
