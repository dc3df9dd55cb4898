"""Index kernels: Gather, GatherElements, GatherND, ScatterND, ScatterElements, on any data
type with int64 or int32 indices. Every index is wrapped (negative counts from the end) and
checked; one out of range makes the kernel return its data error (Kernel(status=True)), so the
step fails naming its node instead of reading or writing outside a tensor.

Gather of rows (an embedding table looked up by token ids) copies each row with memcpy."""
from __future__ import annotations

import math

from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import collapse, loop, nest, strides_of
from ... import rvv
from .strided import MEMCPY_MIN

declare_spec("gather", ("data_shape", "n_idx", "axis"))
declare_spec("gather_elements", ("data_shape", "idx_shape", "axis"))
declare_spec("gather_nd", ("data_shape", "idx_shape", "batch_dims"))
declare_spec("scatter_nd", ("data_shape", "idx_shape", "reduction"))
declare_spec("scatter_elements", ("data_shape", "idx_shape", "axis", "reduction"))


def checked(var: str, expr: str, dim: int) -> str:
    """C: `long var` = index `expr` wrapped into [0, dim), or the kernel's data error."""
    return (f"long {var} = (long){expr};\n"
            f"if ({var} < 0) {var} += {dim};\n"
            f"if ({var} < 0 || {var} >= {dim}) RVK_DATA_ERROR;")


def move(dst: str, src: str, n: int, dtype: str) -> str:
    """C: copy n elements (a row) from src to dst (pointer expressions)."""
    if n == 1:
        return f"*({dst}) = *({src});"
    if n < MEMCPY_MIN:
        return f"for (long e = 0; e < {n}; ++e) ({dst})[e] = ({src})[e];"
    cpy = "RVK_MEMCPY" if dtype == "float32" else "memcpy"
    return f"{cpy}({dst}, {src}, sizeof(*y) * {n});"


def reduce_stmt(red: str, dst: str, src: str) -> str:
    if red == "none":
        return f"{dst} = {src};"
    if red in ("add", "mul"):
        return f"{dst} = {dst} {'+' if red == 'add' else '*'} {src};"
    cmp = ">" if red == "max" else "<"
    return f"if ({src} {cmp} {dst}) {dst} = {src};"


def _params(names_dtypes, out_dtype):
    return tuple(Param(n, dtype=d) for n, d in names_dtypes) + \
        (Param("y", const=False, dtype=out_dtype),)


def _status_kernel(hint, params, body, spec) -> Lowered:
    return Lowered(Kernel(hint, params, body + "\n    RVK_DATA_OK;", support=rvv.header(),
                          spec=spec, status=True))


def gather(data_shape, n_idx: int, axis: int, dtype: str, idx_dtype: str) -> Lowered:
    outer, dim = math.prod(data_shape[:axis]), data_shape[axis]
    inner = math.prod(data_shape[axis + 1:])
    row = move(f"y + (o * {n_idx} + j) * {inner}", f"data + (o * {dim} + t) * {inner}",
               inner, dtype)
    body = indent(loop("o", 0, outer, loop("j", 0, n_idx, checked("t", "ind[j]", dim) + "\n" +
                                            row, "long"), "long"))
    spec = make_spec("gather", data_shape=data_shape, n_idx=n_idx, axis=axis)
    return _status_kernel(f"gather_{dtype}", _params([("data", dtype), ("ind", idx_dtype)],
                                                     dtype), body, spec)


def _element_nest(data_shape, idx_shape, axis, stmt) -> str:
    """A nest over idx_shape; stmt(i, d) gets the flat index into idx/updates and the data
    offset of the element with the axis coordinate left out."""
    ds = strides_of(data_shape)
    dst = [0 if k == axis else s for k, s in enumerate(ds)]
    dims, sts = collapse(idx_shape, [strides_of(idx_shape), dst])
    return nest(dims, sts, ["i", "d"], lambda ix: stmt(ix["i"], ix["d"]))


def gather_elements(data_shape, idx_shape, axis, dtype, idx_dtype) -> Lowered:
    dim, st = data_shape[axis], strides_of(data_shape)[axis]
    body = _element_nest(data_shape, idx_shape, axis, lambda i, d:
                         f"{checked('t', f'ind[{i}]', dim)}\ny[{i}] = data[{d} + t * {st}];")
    spec = make_spec("gather_elements", data_shape=data_shape, idx_shape=idx_shape, axis=axis)
    return _status_kernel(f"gather_elements_{dtype}",
                          _params([("data", dtype), ("ind", idx_dtype)], dtype), body, spec)


def _nd_offset(data_shape, k: int, first: int) -> str:
    """C: `off` += the offset of index tuple ix[0..k) over data axes first..first+k."""
    st = strides_of(data_shape)
    lines = []
    for j in range(k):
        lines.append("{\n" + indent(checked("t", f"ix[{j}]", data_shape[first + j])) +
                     f"\n    off += t * {st[first + j]};\n}}")
    return "\n".join(lines)


def gather_nd(data_shape, idx_shape, batch_dims: int, dtype, idx_dtype) -> Lowered:
    b, k = batch_dims, idx_shape[-1]
    batch, per = math.prod(data_shape[:b]), math.prod(idx_shape[b:-1])
    block, sl = math.prod(data_shape[b:]), math.prod(data_shape[b + k:])
    ct = Param("i", dtype=idx_dtype).ctype
    inner = "\n".join([f"const {ct} *ix = ind + (b * {per} + n) * {k};",
                       f"long off = b * {block};", _nd_offset(data_shape, k, b),
                       move(f"y + (b * {per} + n) * {sl}", "data + off", sl, dtype)])
    body = indent(loop("b", 0, batch, loop("n", 0, per, inner, "long"), "long"))
    spec = make_spec("gather_nd", data_shape=data_shape, idx_shape=idx_shape,
                     batch_dims=batch_dims)
    return _status_kernel(f"gather_nd_{dtype}", _params([("data", dtype), ("ind", idx_dtype)],
                                                        dtype), body, spec)


def _copy_all(n: int, dtype: str) -> str:
    cpy = "RVK_MEMCPY" if dtype == "float32" else "memcpy"
    return f"    {cpy}(y, data, sizeof(*y) * {n});\n"


def scatter_nd(data_shape, idx_shape, reduction: str, dtype, idx_dtype) -> Lowered:
    k = idx_shape[-1]
    per, sl = math.prod(idx_shape[:-1]), math.prod(data_shape[k:])
    ct = Param("i", dtype=idx_dtype).ctype
    upd = reduce_stmt(reduction, "y[off + s]", f"upd[n * {sl} + s]")
    inner = "\n".join([f"const {ct} *ix = ind + n * {k};", "long off = 0;",
                       _nd_offset(data_shape, k, 0),
                       f"for (long s = 0; s < {sl}; ++s) {upd}"])
    body = _copy_all(math.prod(data_shape), dtype) + indent(loop("n", 0, per, inner, "long"))
    spec = make_spec("scatter_nd", data_shape=data_shape, idx_shape=idx_shape,
                     reduction=reduction)
    return _status_kernel(f"scatter_nd_{reduction}_{dtype}", _params(
        [("data", dtype), ("ind", idx_dtype), ("upd", dtype)], dtype), body, spec)


def scatter_elements(data_shape, idx_shape, axis, reduction, dtype, idx_dtype) -> Lowered:
    dim, st = data_shape[axis], strides_of(data_shape)[axis]
    body = _copy_all(math.prod(data_shape), dtype) + _element_nest(
        data_shape, idx_shape, axis, lambda i, d: checked("t", f"ind[{i}]", dim) + "\n" +
        reduce_stmt(reduction, f"y[{d} + t * {st}]", f"upd[{i}]"))
    spec = make_spec("scatter_elements", data_shape=data_shape, idx_shape=idx_shape, axis=axis,
                     reduction=reduction)
    return _status_kernel(f"scatter_elements_{reduction}_{dtype}", _params(
        [("data", dtype), ("ind", idx_dtype), ("upd", dtype)], dtype), body, spec)
