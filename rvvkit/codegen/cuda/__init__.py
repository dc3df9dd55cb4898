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
Device code keeps to what both nvcc and the CPU emulator (toolchain/cuda_emu/rvk_cuda_emu.h,
which runs the threads of a block as fibers that switch only at __syncthreads) accept:
threadIdx/blockIdx/blockDim/gridDim, __syncthreads(), fixed-size __shared__ arrays declared at
the top of a __global__ function, <math.h> float functions (expf, logf, tanhf, powf, sqrtf,
fmaxf, fminf, fmaf), `__restrict__`, `__forceinline__`. No warp intrinsics, atomics, dynamic
shared memory, `min`/`max` overloads, or reliance on warp-synchronous execution.
"""
from __future__ import annotations

from ...errors import ModelError
from ..kernel import Kernel
from . import (elementwise, gemm, logic, movement, pool, reduce,  # noqa: F401
               sequence)  # (they fill GENERATORS)
from . import grid  # noqa: F401,E402  (GridSample)
from . import pool_extra  # noqa: F401,E402  (LpPool, Det)
from . import quant_gemm  # noqa: F401,E402  (QConv, QMatMul)
from . import quant  # noqa: F401,E402  (Q/DQ, QLinear element-wise and pooling)
from . import winograd  # noqa: F401,E402  (Winograd conv)
from . import llm  # noqa: F401,E402  (RMSNorm, MatMulNBits, GroupQueryAttention)
from .registry import GENERATORS, CudaKernel, Generator, generator
from .serial import SERIAL_KINDS, serial_generator


def lower_cuda(kernel: Kernel) -> CudaKernel:
    """The CUDA body and support code of one planned kernel."""
    op = kernel.spec.get("op")
    gen = GENERATORS.get(op)
    if gen is None:
        raise ModelError(f"no CUDA generator for kernel {kernel.hint!r} (op {op!r})")
    return gen(kernel.spec, kernel)


__all__ = ["CudaKernel", "Generator", "GENERATORS", "SERIAL_KINDS", "generator", "lower_cuda",
           "serial_generator"]
