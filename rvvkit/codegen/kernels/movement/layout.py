"""Data-movement kernels: Transpose and Concat, on any element type (the RVV and RVK_MEMCPY
fast paths move float32 words; other types are copied element-wise or with memcpy)."""
from __future__ import annotations

import math
from typing import Sequence

from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, make_spec
from ...loops import collapse, loop, nest, outer_loop, strides_of
from ...parallel import split_of
from ...rvv import guarded, header, vle, vlse, vse, vsetvl


def transpose(in_shape: Sequence[int], perm: Sequence[int], dtype: str = "float32") -> Lowered:
    out_shape = [in_shape[p] for p in perm]
    in_st = strides_of(in_shape)
    x_strides = [in_st[p] for p in perm]
    dims, sts = collapse(out_shape, [x_strides, strides_of(out_shape)])
    # parts: the outermost loop's iterations (each writes its own block of y). A transpose
    # between attention's head splits is a pass over a whole activation: Whisper's took 0.4 ms
    # on one core of two
    parts = len(dims) > 1 and dims[0] > 1
    split = split_of(dims[0], math.prod(dims)) if parts else None
    code = nest(dims, sts, ["x", "y"], lambda idx: f"y[{idx['y']}] = x[{idx['x']}];",
                parts=parts)
    params = (Param("x", dtype=dtype), Param("y", const=False, dtype=dtype))
    spec = make_spec("transpose", in_shape=in_shape, perm=perm)
    hint = "transpose" if dtype == "float32" else f"transpose_{dtype}"
    if dims[-1] == 1 or sts[1][-1] != 1 or dtype != "float32":
        return Lowered(Kernel(hint, params, code, spec=spec, split=split))
    return Lowered(Kernel("transpose", params, guarded(_transpose_rvv(dims, sts, parts), code),
                          support=header(), spec=spec, split=split))


def _transpose_rvv(dims, sts, parts: bool) -> str:
    """RVV transpose: outer loops as in the portable nest, the innermost (contiguous in y)
    strip-mined with a strided load from x (unit-stride when x is contiguous there too)."""
    L, depth, pad = 8, len(dims), "    "
    lines, ind = [], pad
    for k in range(depth - 1):
        lines.append(ind + outer_loop(k, dims[k], parts))
        ind += pad
    base = {}
    for name, st in zip(("x", "y"), sts):
        terms = [f"i{k} * {st[k]}" for k in range(depth - 1) if st[k]]
        base[name] = f"{name} + {' + '.join(terms)}" if terms else name
    sx = sts[0][-1]
    load = vle(L, f"{base['x']} + i") if sx == 1 else vlse(L, f"{base['x']} + i * {sx}", sx)
    n = dims[-1]
    lines += [f"{ind}for (size_t i = 0; i < {n};) {{",
              f"{ind}    const size_t vl = {vsetvl(L, f'{n} - i')};",
              f"{ind}    {vse(L, base['y'] + ' + i', load)}",
              f"{ind}    i += vl;",
              f"{ind}}}"]
    for k in range(depth - 2, -1, -1):
        lines.append(pad * (k + 1) + "}")
    return "\n".join(lines)


def concat(in_shapes: Sequence[Sequence[int]], axis: int, dtype: str = "float32") -> Lowered:
    """Each input is a block of `inner_i` elements per outer index; blocks are copied in
    order."""
    outer = math.prod(in_shapes[0][:axis])
    inners = [math.prod(s[axis:]) for s in in_shapes]
    total = sum(inners)
    copies, off = [], 0
    cpy = "RVK_MEMCPY" if dtype == "float32" else "memcpy"
    for i, inner in enumerate(inners):
        if inner:
            copies.append(f"{cpy}(y + o * {total} + {off}, x{i} + o * {inner}, "
                          f"sizeof(*y) * {inner});")
        off += inner
    code = indent(loop("o", 0, outer, "\n".join(copies), "long", flat=True))
    params = tuple(Param(f"x{i}", dtype=dtype) for i in range(len(in_shapes))) + \
        (Param("y", const=False, dtype=dtype),)
    unused = "".join(f"    (void)x{i};\n" for i, n in enumerate(inners) if not n)
    hint = "concat" if dtype == "float32" else f"concat_{dtype}"
    code = unused + code if copies else unused + "    (void)y;"
    return Lowered(Kernel(hint, params, code, support=header(),
                          spec=make_spec("concat", in_shapes=in_shapes, axis=axis)))
