"""CUDA forms of the kinds of codegen/lower/extra.py: LpPool, SwiGLU and RotaryEmbedding in parallel
(one thread per output element; a position id outside the caches sets rvk_cuda_status and
reads row 0, so the step fails after it without touching memory outside a tensor); Det
serial (the C kernel's LU on one thread: models hold few, small determinants)."""
from __future__ import annotations

import math

from ..cfmt import indent
from ..kernel import Kernel
from ..kernels.math import det  # noqa: F401  (their declare_spec calls)
from ..kernels.reduce import lppool
from ..kernels.llm import rope
from .elementwise import per_element
from .registry import CudaKernel, generator
from .serial import serial_generator


@generator("lppool")
def _lppool(spec: dict, kernel: Kernel) -> CudaKernel:
    stmts = "const long long q = (long long)i;\n" + lppool.per_output(spec, "q")
    return per_element("lppool", kernel, math.prod(spec["y_shape"]), stmts)


@generator("swiglu")
def _swiglu(spec: dict, kernel: Kernel) -> CudaKernel:
    return per_element("swiglu", kernel, spec["n"], rope.swiglu_expr(spec["alpha"], "i"))


@generator("rope")
def _rope(spec: dict, kernel: Kernel) -> CudaKernel:
    """Element d of a head pairs with d +- rot/2 (halves) or d ^ 1 (interleaved pairs)."""
    xs, heads, head, rot = spec["x_shape"], spec["heads"], spec["head"], spec["rot"]
    half, layout4d = rot // 2, spec["layout4d"]
    seq = xs[2] if layout4d else xs[1]
    sb, ss = (heads * seq * head, head) if layout4d else (seq * heads * head, heads * head)
    row = "(long long)i / %d * %d + (long long)i / %d %% %d" % (sb, seq, ss, seq)
    if spec["positions"]:
        pick = (f"long long r = pos[{row}];\n"
                f"if (r < 0 || r >= {spec['rows']}) {{ rvk_cuda_status = 1; r = 0; }}")
    else:
        pick = f"const long long r = {row};"
    if spec["interleaved"]:
        j, first, other = "d / 2", "d % 2 == 0", "(d % 2 == 0 ? 1 : -1)"
    else:
        j, first, other = f"d % {half}", f"d < {half}", f"(d < {half} ? {half} : -{half})"
    stmts = f"""const long long d = (long long)i % {head};
if (d >= {rot}) {{
    y[i] = x[i];
}} else {{
{indent(pick)}
    const float c = cosc[r * {half} + {j}], s = sinc[r * {half} + {j}];
    const float o = x[(long long)i + {other}];
    y[i] = {first} ? c * x[i] - s * o : s * o + c * x[i];
}}"""
    return per_element("rope", kernel, math.prod(xs), stmts)


serial_generator("det")
