"""CUDA generator of the GridSample kernel (codegen/kernels/movement/grid.py): one thread per output
element (n, c, p), which computes its location's neighbours itself (the C kernel shares them
across channels) and then sums them with the C kernel's statements."""
from __future__ import annotations

import math

from ..kernel import Kernel
from ..kernels.movement.grid import axis_stmts, helpers, sample_stmts
from .elementwise import per_element
from .registry import CudaKernel, generator


@generator("gridsample")
def gridsample(spec: dict, kernel: Kernel) -> CudaKernel:
    x_shape, grid_shape = spec["x_shape"], spec["grid_shape"]
    c, k = x_shape[1], len(x_shape) - 2
    s, p = math.prod(x_shape[2:]), math.prod(grid_shape[1:-1])
    total = x_shape[0] * c * p
    stmts = [f"const long p = (long)(i % {p});",
             f"const long nc = (long)(i / {p});   /* n * C + c */",
             f"const float *gp = grid + (nc / {c} * {p} + p) * {k};"]
    stmts += [t for j in range(k) for t in axis_stmts(spec, j, "gp")]
    stmts.append(f"const float *xc = x + nc * {s};")
    stmts += sample_stmts(spec, "xc", "y[i]")
    ck = per_element(kernel.hint or "gridsample", kernel, total, "\n".join(stmts),
                     (math.prod(x_shape), math.prod(grid_shape)))
    return CudaKernel(ck.body, {**helpers(spec), **ck.support})
