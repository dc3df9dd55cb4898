"""Element-wise kernels: n-ary broadcasting arithmetic with a fused activation, per-channel
affine, and copies. Loops are collapsed so the innermost one is long and unit-stride, which is
what lets gcc/clang vectorise them."""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..act import Act, act_expr
from ..kernel import Kernel, Lowered, Param
from ..loops import broadcast_strides, collapse, nest, strides_of

OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Sum": "+"}


def nary(op: str, in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int],
         act: Optional[Act]) -> Lowered:
    """y = act(x0 <op> x1 <op> ...) with numpy broadcasting; params x0.., y."""
    names = [f"x{i}" for i in range(len(in_shapes))]
    strides = [broadcast_strides(s, out_shape) for s in in_shapes] + [strides_of(out_shape)]
    dims, sts = collapse(out_shape, strides)
    sym = OPERATORS[op]

    def body(idx):
        expr = f" {sym} ".join(f"x{i}[{idx[n]}]" for i, n in enumerate(names))
        return f"const float v = {expr};\ny[{idx['y']}] = {act_expr(act, 'v')};"

    code = nest(dims, sts, names + ["y"], body)
    params = tuple(Param(n) for n in names) + (Param("y", const=False),)
    return Lowered(Kernel(op.lower(), params, code))


def unary(act: Act, shape: Sequence[int]) -> Lowered:
    n = math.prod(shape)
    code = (f"    for (long i = 0; i < {n}; ++i) {{\n        const float v = x[i];\n"
            f"        y[i] = {act.c_expr('v')};\n    }}")
    return Lowered(Kernel(act.kind, (Param("x"), Param("y", const=False)), code))


def channel_affine(shape: Sequence[int], act: Optional[Act]) -> Lowered:
    """y[n, c, :] = act(x[n, c, :] * s[c] + t[c]): BatchNormalization and friends."""
    batch, chans = shape[0], shape[1]
    inner = math.prod(shape[2:])
    code = f"""    for (long n = 0; n < {batch}; ++n) {{
        for (long c = 0; c < {chans}; ++c) {{
            const float sc = s[c], sh = t[c];
            const float *__restrict xp = x + (n * {chans} + c) * {inner};
            float *__restrict yp = y + (n * {chans} + c) * {inner};
            for (long i = 0; i < {inner}; ++i) {{
                const float v = xp[i] * sc + sh;
                yp[i] = {act_expr(act, 'v')};
            }}
        }}
    }}"""
    params = (Param("x"), Param("s"), Param("t"), Param("y", const=False))
    return Lowered(Kernel("affine", params, code, macs=batch * chans * inner))


def copy(n_floats: int) -> Lowered:
    code = f"    memcpy(y, x, sizeof(float) * {n_floats});"
    return Lowered(Kernel("copy", (Param("x"), Param("y", const=False)), code))
