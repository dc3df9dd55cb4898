"""Data-movement kernels: Transpose and Concat."""
from __future__ import annotations

import math
from typing import Sequence

from ..kernel import Kernel, Lowered, Param
from ..loops import collapse, nest, strides_of


def transpose(in_shape: Sequence[int], perm: Sequence[int]) -> Lowered:
    out_shape = [in_shape[p] for p in perm]
    in_st = strides_of(in_shape)
    x_strides = [in_st[p] for p in perm]
    dims, sts = collapse(out_shape, [x_strides, strides_of(out_shape)])
    code = nest(dims, sts, ["x", "y"], lambda idx: f"y[{idx['y']}] = x[{idx['x']}];")
    return Lowered(Kernel("transpose", (Param("x"), Param("y", const=False)), code))


def concat(in_shapes: Sequence[Sequence[int]], axis: int) -> Lowered:
    """Each input is a block of `inner_i` floats per outer index; blocks are copied in order."""
    outer = math.prod(in_shapes[0][:axis])
    inners = [math.prod(s[axis:]) for s in in_shapes]
    total = sum(inners)
    lines = [f"    for (long o = 0; o < {outer}; ++o) {{"]
    off = 0
    for i, inner in enumerate(inners):
        lines.append(f"        memcpy(y + o * {total} + {off}, x{i} + o * {inner}, "
                     f"sizeof(float) * {inner});")
        off += inner
    lines.append("    }")
    params = tuple(Param(f"x{i}") for i in range(len(in_shapes))) + (Param("y", const=False),)
    return Lowered(Kernel("concat", params, "\n".join(lines)))
