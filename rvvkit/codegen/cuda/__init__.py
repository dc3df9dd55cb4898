"""CUDA dialect of the kernel plan: each `Kernel` of the C plan gets a CUDA body generated from
its `spec`, bound to the same parameters (device pointers into the same weights blob, arena and
I/O buffers), so the CUDA translation unit runs the very plan the C one runs.

Contract of a generator `fn(spec: dict, kernel: Kernel) -> CudaKernel`:
  * `body` is the host-side launcher: statements placed in the exported function whose
    signature is `kernel.signature(name)` (same parameter names, plus `ws` when
    kernel.workspace > 0: `kernel.workspace` floats of device scratch it may use). It launches
    `__global__` kernels only through `RVK_LAUNCH(kernel_name, dim3(..), dim3(..), (args));`
    and never synchronises (the plan entry checks errors and times the steps).
  * `support` maps unique names to complete definitions (`__global__`/`__device__` functions)
    written once per translation unit; a name must identify its text (put the shapes or a hash
    of the text in it).
Device code keeps to what both nvcc and the CPU emulator (runtime_c/rvk_cuda_emu.h, which
runs the threads of a block as fibers that switch only at __syncthreads) accept:
threadIdx/blockIdx/blockDim/gridDim, __syncthreads(), fixed-size __shared__ arrays declared at
the top of a __global__ function, <math.h> float functions (expf, logf, tanhf, powf, sqrtf,
fmaxf, fminf, fmaf), `__restrict__`, `__forceinline__`. No warp intrinsics, atomics, dynamic
shared memory, `min`/`max` overloads, or reliance on warp-synchronous execution.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

from ..kernel import Kernel
from ...errors import ModelError


@dataclass
class CudaKernel:
    body: str
    support: Dict[str, str] = field(default_factory=dict)


Generator = Callable[[dict, Kernel], CudaKernel]


# op of Kernel.spec -> "module:function" of its generator in this package
GENERATORS: Dict[str, str] = {
    "conv": "gemm:conv", "gemm": "gemm:gemm", "matmul": "gemm:matmul",
    "nary": "elementwise:nary", "unary": "elementwise:unary", "affine": "elementwise:affine",
    "copy": "elementwise:copy", "transpose": "elementwise:transpose",
    "concat": "elementwise:concat",
    "pool": "pool:pool", "global_pool": "pool:global_pool", "lrn": "pool:lrn",
    "softmax": "pool:softmax",
}


def _generator(op: str) -> Optional[Generator]:
    where = GENERATORS.get(op)
    if where is None:
        return None
    module, fn = where.split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), fn)


def lower_cuda(kernel: Kernel) -> CudaKernel:
    """The CUDA body and support code of one planned kernel."""
    op = kernel.spec.get("op")
    gen = _generator(op)
    if gen is None:
        raise ModelError(f"no CUDA generator for kernel {kernel.hint!r} (op {op!r})")
    return gen(kernel.spec, kernel)
