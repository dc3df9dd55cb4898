"""CUDA generators of the data-movement, index and resize kernels: one thread per output
element (per input element for split), any element type. A bad run-time index sets
rvk_cuda_status and reads index 0 instead, so nothing outside a tensor is touched and the
step fails after it. Scatter kernels (order-dependent reductions) run serially."""
from __future__ import annotations

import hashlib
import math

from ..kernel import Kernel
from ..kernels.movement import index as _index  # noqa: F401  (declares the gather/scatter specs)
from ..kernels.movement.strided import literal, pad_source
from ..kernels.movement.resize import extrapolated, single_term, table_decls, tables, value_expr
from ..loops import collapse, strides_of
from .elementwise import _coord, gather as gather_idx, per_element
from .registry import CudaKernel, generator
from .serial import serial_generator

serial_generator("scatter_nd", "scatter_elements")


def _coords(dims, var="i", name="c", skip=()):
    return [f"const I {name}{k} = {_coord(dims, k, var)};" for k in range(len(dims))
            if k not in skip]


def _checked(var: str, expr: str, dim: int) -> str:
    return (f"long long {var} = (long long){expr};\n"
            f"if ({var} < 0) {var} += {dim};\n"
            f"if ({var} < 0 || {var} >= {dim}) {{ rvk_cuda_status = 1; {var} = 0; }}")


@generator("strided")
def strided(spec: dict, kernel: Kernel) -> CudaKernel:
    dims, strides, offset = spec["dims"], spec["strides"], spec["offset"]
    n = math.prod(dims)
    cd, sts = collapse(dims, [strides, strides_of(dims)])
    decls, (e,) = gather_idx(cd, sts[:1])
    src = f"{offset} + {e}" if offset else e
    return per_element(kernel.hint, kernel, n, "\n".join(decls + [f"y[i] = x[{src}];"]),
                       extents=[abs(offset) + sum(abs(s) * d for s, d in zip(strides, dims))])


@generator("split")
def split(spec: dict, kernel: Kernel) -> CudaKernel:
    shape, axis, sizes = spec["in_shape"], spec["axis"], spec["sizes"]
    inner = math.prod(shape[axis + 1:])
    total = shape[axis] * inner
    lines = [f"(void)y{j};" for j, s in enumerate(sizes) if not s]
    lines += [f"const I o = i / {total};", f"const I r = i - o * {total};"]
    off, first = 0, True
    for j, s in enumerate(sizes):
        if not s:
            continue
        row = s * inner
        rel = f"r - {off}" if off else "r"
        lines.append(f"{'' if first else 'else '}if (r < {off + row}) "
                     f"y{j}[o * {row} + {rel}] = x[i];")
        off, first = off + row, False
    return per_element(kernel.hint, kernel, math.prod(shape), "\n".join(lines))


@generator("pad")
def pad(spec: dict, kernel: Kernel) -> CudaKernel:
    shape, pads, mode = spec["in_shape"], spec["pads"], spec["mode"]
    r = len(shape)
    out = [d + b + e for d, b, e in zip(shape, pads[:r], pads[r:])]
    xs = strides_of(shape)
    lines = _coords(out)
    if mode == "constant":
        lines += [f"const I s{k} = c{k} - ({pads[k]});" for k in range(r)]
        inside = " && ".join(f"s{k} >= 0 && s{k} < {shape[k]}" for k in range(r))
        src = " + ".join(f"s{k} * {xs[k]}" for k in range(r))
        value = literal(spec["value"], kernel.params[-1].dtype)
        lines.append(f"y[i] = ({inside}) ? x[{src}] : {value};")
    else:
        lines += [f"const I s{k} = {pad_source(mode, f'c{k}', pads[k], shape[k])};"
                  for k in range(r)]
        lines.append(f"y[i] = x[{' + '.join(f's{k} * {xs[k]}' for k in range(r))}];")
    return per_element(kernel.hint, kernel, math.prod(out), "\n".join(lines))


@generator("trilu")
def trilu(spec: dict, kernel: Kernel) -> CudaKernel:
    shape, k = spec["shape"], spec["k"]
    rows, cols = shape[-2], shape[-1]
    keep = f"c - r >= {k}" if spec["upper"] else f"c - r <= {k}"
    stmts = (f"const I c = i % {cols};\nconst I r = (i / {cols}) % {rows};\n"
             f"y[i] = ({keep}) ? x[i] : {literal(0, kernel.params[-1].dtype)};")
    return per_element(kernel.hint, kernel, math.prod(shape), stmts)


@generator("onehot")
def onehot(spec: dict, kernel: Kernel) -> CudaKernel:
    shape, depth, axis = spec["idx_shape"], spec["depth"], spec["axis"]
    inner = math.prod(shape[axis:])
    stmts = "\n".join([f"const I j = i % {inner};", f"const I d = (i / {inner}) % {depth};",
                       f"const I o = i / ({inner} * {depth});",
                       f"long long t = (long long)ind[o * {inner} + j];",
                       f"if (t < 0) t += {depth};",
                       "y[i] = values[t == (long long)d ? 1 : 0];"])
    return per_element(kernel.hint, kernel, math.prod(shape) * depth, stmts)


@generator("gather")
def gather(spec: dict, kernel: Kernel) -> CudaKernel:
    data, n_idx, axis = spec["data_shape"], spec["n_idx"], spec["axis"]
    outer, dim = math.prod(data[:axis]), data[axis]
    inner = math.prod(data[axis + 1:])
    stmts = "\n".join([f"const I e = i % {inner};", f"const I j = (i / {inner}) % {n_idx};",
                       f"const I o = i / ({inner} * {n_idx});", _checked("t", "ind[j]", dim),
                       f"y[i] = data[(o * {dim} + (I)t) * {inner} + e];"])
    return per_element(kernel.hint, kernel, outer * n_idx * inner, stmts,
                       extents=[math.prod(data)])


@generator("gather_elements")
def gather_elements(spec: dict, kernel: Kernel) -> CudaKernel:
    data, ind, axis = spec["data_shape"], spec["idx_shape"], spec["axis"]
    ds = strides_of(data)
    lines = _coords(ind, skip=(axis,)) + [_checked("t", "ind[i]", data[axis])]
    terms = [f"c{k} * {ds[k]}" for k in range(len(data)) if k != axis] + [f"(I)t * {ds[axis]}"]
    lines.append(f"y[i] = data[{' + '.join(terms)}];")
    return per_element(kernel.hint, kernel, math.prod(ind), "\n".join(lines),
                       extents=[math.prod(data)])


@generator("gather_nd")
def gather_nd(spec: dict, kernel: Kernel) -> CudaKernel:
    data, ind, b = spec["data_shape"], spec["idx_shape"], spec["batch_dims"]
    k = ind[-1]
    per, sl = math.prod(ind[b:-1]), math.prod(data[b + k:])
    block, ds = math.prod(data[b:]), strides_of(data)
    lines = [f"const I e = i % {sl};", f"const I n = i / {sl};", f"const I bb = n / {per};",
             f"long long off = (long long)bb * {block};"]
    for j in range(k):
        lines += [_checked(f"t{j}", f"ind[n * {k} + {j}]", data[b + j]),
                  f"off += t{j} * {ds[b + j]};"]
    lines.append("y[i] = data[off + e];")
    return per_element(kernel.hint, kernel, math.prod(ind[:-1]) * sl, "\n".join(lines),
                       extents=[math.prod(data)])


@generator("resize")
def resize(spec: dict, kernel: Kernel) -> CudaKernel:
    tabs = tables(spec)
    out = spec["out_shape"]
    prefix = "rz" + hashlib.sha1(repr(sorted(spec.items())).encode()).hexdigest()[:10] + "_"
    decls = table_decls(tabs, prefix, "static __device__ const")
    terms = [single_term(t, prefix, k, f"(long long)c{k}") for k, t in enumerate(tabs)]
    base = " + ".join(t for t in terms if t) or "0"
    value = value_expr(tabs, prefix, lambda k: f"c{k}", "b", "x")
    value = extrapolated(tabs, prefix, lambda k: f"c{k}", value,
                         literal(spec["extrapolation"], kernel.params[-1].dtype))
    lines = _coords(out) + [f"const long long b = {base};", f"y[i] = {value};"]
    ck = per_element(kernel.hint, kernel, math.prod(out), "\n".join(lines))
    if decls:
        ck.support = {prefix + "tables": "\n".join(decls), **ck.support}
    return ck
