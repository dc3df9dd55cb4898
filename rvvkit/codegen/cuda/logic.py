"""CUDA generator of the typed element-wise kernel (kind "ewise", codegen/kernels/math/logic.py):
one thread per output element, the C kernel's expression over operands loaded at their
broadcast indices, its "hd_" helpers (RVK_HD: host and device) defined in the unit."""
from __future__ import annotations

import math

from ... import dtypes
from ..kernel import Kernel
from ..kernels.math.logic import operand_layout
from .elementwise import gather, per_element
from .registry import CudaKernel, generator


@generator("ewise")
def ewise(spec: dict, kernel: Kernel) -> CudaKernel:
    expr, in_dtypes = spec["expr"], spec["in_dtypes"]
    live, dims, sts = operand_layout(spec["in_shapes"], spec["out_shape"], expr)
    ins, y = kernel.params[:-1], kernel.params[-1]
    decls, idx = gather(dims, sts[:-1])
    loads = [f"const {dtypes.TABLE[in_dtypes[j]].ctype} a{j} = {ins[j].name}[{e}];"
             for j, e in zip(live, idx)]
    unread = [f"(void){ins[j].name};" for j in range(len(ins)) if j not in live]
    oty = dtypes.TABLE[spec["out_dtype"]].ctype
    stmts = unread + decls + loads + [f"{y.name}[i] = ({oty})({expr});"]
    ck = per_element(kernel.hint or "ewise", kernel, math.prod(spec["out_shape"]),
                     "\n".join(stmts))
    helpers = {k: v for k, v in kernel.support.items() if k.startswith("hd_")}
    return CudaKernel(ck.body, {**helpers, **ck.support})
