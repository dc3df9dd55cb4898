"""Data-movement kernels on any element type: strided views (Slice, Expand, Tile, DepthToSpace,
SpaceToDepth: y[i] = x[offset + sum_k c_k * stride_k] over some view of y), Split, Pad, Trilu
and OneHot. Rows contiguous on both sides are copied with memcpy (float32: RVK_MEMCPY, the RVV
copy on riscv64); float32 rows gathered with a stride use RVV strided loads."""
from __future__ import annotations

import math
from typing import Sequence

from ... import rvv
from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import collapse, loop, nest, strides_of

declare_spec("strided", ("dims", "strides", "offset"))
declare_spec("split", ("in_shape", "axis", "sizes"))
declare_spec("pad", ("in_shape", "pads", "mode", "value"))
declare_spec("trilu", ("shape", "upper", "k"))
declare_spec("onehot", ("idx_shape", "depth", "axis"))

MEMCPY_MIN = 8   # shorter contiguous rows are copied element by element


def literal(value, dtype: str) -> str:
    """`value` as a C constant of element type `dtype`."""
    if dtype == "float32":
        return flt(float(value))
    if dtype == "bool":
        return "1" if value else "0"
    v = int(value)
    return f"INT64_C({v})" if dtype == "int64" else f"({_ctype(dtype)}){v}"


def _ctype(dtype: str) -> str:
    return Param("t", dtype=dtype).ctype


def _cpy(dtype: str) -> str:
    return "RVK_MEMCPY" if dtype == "float32" else "memcpy"


def copy_body(dims, x_strides, y_strides, dtype: str, x: str = "x", y: str = "y") -> str:
    """C statements copying x[x_strides . c] to y[y_strides . c] for every c over dims."""
    cd, (xs, ys) = collapse(dims, [x_strides, y_strides])
    if cd[-1] >= MEMCPY_MIN and xs[-1] == 1 and ys[-1] == 1:
        outer = cd[:-1] or [1]
        row = f"sizeof(*{y}) * {cd[-1]}"
        return nest(outer, [xs[:-1] or [0], ys[:-1] or [0]], ["xo", "yo"], lambda i:
                    f"{_cpy(dtype)}({y} + {i['yo']}, {x} + {i['xo']}, {row});")
    portable = nest(cd, [xs, ys], ["xo", "yo"], lambda i: f"{y}[{i['yo']}] = {x}[{i['xo']}];")
    if dtype != "float32" or ys[-1] != 1 or cd[-1] < MEMCPY_MIN:
        return portable
    return rvv.guarded(_rvv_rows(cd, xs, ys, x, y), portable)


def _rvv_rows(dims, xs, ys, x, y) -> str:
    """Outer loops as the portable nest; each row (contiguous in y) one strided load per
    strip (stride 0 broadcasts, negative strides walk backwards)."""
    L, depth, pad = 8, len(dims), "    "
    lines, ind = [], pad
    for k in range(depth - 1):
        lines.append(f"{ind}for (long i{k} = 0; i{k} < {dims[k]}; ++i{k}) {{")
        ind += pad

    def base(name, st):
        terms = [f"i{k} * {st[k]}" for k in range(depth - 1) if st[k]]
        return f"{name} + {' + '.join(terms)}" if terms else name
    n, sx = dims[-1], xs[-1]
    src = f"{base(x, xs)} + i" if sx == 1 else f"{base(x, xs)} + i * {sx}"
    load = rvv.vle(L, src) if sx == 1 else rvv.vlse(L, src, sx)
    lines += [f"{ind}for (long i = 0; i < {n};) {{",
              f"{ind}    const size_t vl = {rvv.vsetvl(L, f'(size_t)({n} - i)')};",
              f"{ind}    {rvv.vse(L, base(y, ys) + ' + i', load)}",
              f"{ind}    i += (long)vl;", f"{ind}}}"]
    for k in range(depth - 2, -1, -1):
        lines.append(pad * (k + 1) + "}")
    return "\n".join(lines)


def _params(dtype, n_out=1):
    outs = tuple(Param("y" if n_out == 1 else f"y{j}", const=False, dtype=dtype)
                 for j in range(n_out))
    return (Param("x", dtype=dtype),) + outs


def strided(hint: str, dims: Sequence[int], strides: Sequence[int], offset: int,
            dtype: str) -> Lowered:
    """y (viewed as `dims`, row-major) [c] = x[offset + strides . c]."""
    params = _params(dtype)
    spec = make_spec("strided", dims=dims, strides=strides, offset=offset)
    if math.prod(dims) == 0:
        return Lowered(Kernel(f"{hint}_{dtype}", params, "    (void)x;\n    (void)y;", spec=spec))
    x = "x" if not offset else "xb"
    body = copy_body(dims, strides, strides_of(dims), dtype, x=x)
    if offset:
        body = f"    const {_ctype(dtype)} *xb = x + {offset};\n" + body
    return Lowered(Kernel(f"{hint}_{dtype}", params, body, support=rvv.header(), spec=spec))


def split(in_shape, axis: int, sizes, dtype: str) -> Lowered:
    """Per outer index, consecutive blocks of x go to y0, y1, ..."""
    outer, inner = math.prod(in_shape[:axis]), math.prod(in_shape[axis + 1:])
    total = in_shape[axis] * inner
    lines, off = [], 0
    for j, s in enumerate(sizes):
        row = s * inner
        if row:
            lines.append(f"{_cpy(dtype)}(y{j} + o * {row}, x + o * {total} + {off}, "
                         f"sizeof(*x) * {row});")
        else:
            lines.append(f"(void)y{j};")
        off += row
    body = indent(loop("o", 0, outer, "\n".join(lines), "long"))
    if not off:   # every output empty
        body = "    (void)x;\n" + body
    spec = make_spec("split", in_shape=in_shape, axis=axis, sizes=sizes)
    return Lowered(Kernel(f"split_{dtype}", _params(dtype, len(sizes)), body,
                          support=rvv.header(), spec=spec))


def pad_source(mode: str, o: str, before: int, d: int) -> str:
    """C expression: the input coordinate output coordinate `o` reads (all modes but
    constant, whose out-of-range coordinates read the pad value)."""
    s = f"({o} - {before})" if before else o
    if mode == "edge":
        return f"({s} < 0 ? 0 : {s} >= {d} ? {d - 1} : {s})"
    if mode == "wrap":
        return f"((({s}) % {d} + {d}) % {d})"
    # reflect (pads < d): mirror about 0 and about d - 1
    return f"({s} < 0 ? -{s} : {s} >= {d} ? {2 * (d - 1)} - {s} : {s})"


def pad(in_shape, pads, mode: str, value, dtype: str) -> Lowered:
    r = len(in_shape)
    out = [d + b + e for d, b, e in zip(in_shape, pads[:r], pads[r:])]
    spec = make_spec("pad", in_shape=in_shape, pads=pads, mode=mode, value=value)
    params = _params(dtype)
    if math.prod(out) == 0:
        return Lowered(Kernel(f"pad_{dtype}", params, "    (void)x;\n    (void)y;", spec=spec))
    if mode == "constant":
        body = _pad_constant(in_shape, pads, out, value, dtype)
    else:
        xs = strides_of(in_shape)
        nest = f"y[at++] = x[b{r - 1}];"
        for k in reversed(range(r)):   # flat: each level declares only its own o<k>, b<k>
            prev = f"b{k - 1} + " if k else ""
            src = pad_source(mode, f"o{k}", pads[k], in_shape[k])
            nest = loop(f"o{k}", 0, out[k], f"const long b{k} = {prev}{src} * {xs[k]};\n{nest}",
                        "long", flat=True)
        body = indent("long at = 0;\n" + nest)
    return Lowered(Kernel(f"pad_{mode}_{dtype}", params, body, support=rvv.header(), spec=spec))


def _pad_constant(in_shape, pads, out, value, dtype) -> str:
    r, n = len(in_shape), math.prod(out)
    if float(value) == 0:
        fill = f"    {'RVK_MEMZERO' if dtype == 'float32' else 'memset'}(y, " \
               f"{'' if dtype == 'float32' else '0, '}sizeof(*y) * {n});"
    else:
        fill = f"    for (long i = 0; i < {n}; ++i) y[i] = {literal(value, dtype)};"
    lo = [max(0, b) for b in pads[:r]]
    region = [min(o, b + d) - lo_k for o, b, d, lo_k in zip(out, pads[:r], in_shape, lo)]
    if min(region) <= 0:
        return fill + "\n    (void)x;"
    xs, ys = strides_of(in_shape), strides_of(out)
    x_off = sum(max(0, -b) * s for b, s in zip(pads[:r], xs))
    y_off = sum(b * s for b, s in zip(lo, ys))
    ct = _ctype(dtype)
    return "\n".join([fill, f"    const {ct} *xb = x + {x_off};", f"    {ct} *yb = y + {y_off};",
                      copy_body(region, xs, ys, dtype, x="xb", y="yb")])


def trilu(shape, upper: bool, k: int, dtype: str) -> Lowered:
    rows, cols = shape[-2], shape[-1]
    batch = math.prod(shape[:-2])
    keep = f"c - r >= {k}" if upper else f"c - r <= {k}"
    inner = loop("c", 0, cols, f"const long at = (b * {rows} + r) * {cols} + c;\n"
                 f"y[at] = ({keep}) ? x[at] : {literal(0, dtype)};", "long")
    body = indent(loop("b", 0, batch, loop("r", 0, rows, inner, "long"), "long"))
    spec = make_spec("trilu", shape=shape, upper=int(upper), k=k)
    return Lowered(Kernel(f"trilu_{dtype}", _params(dtype), body, spec=spec))


def onehot(idx_shape, depth: int, axis: int, idx_dtype: str, dtype: str) -> Lowered:
    """y[o, d, j] = values[idx[o, j] (negative: + depth) == d]; out-of-range rows stay off."""
    outer, inner = math.prod(idx_shape[:axis]), math.prod(idx_shape[axis:])
    cell = loop("j", 0, inner, f"long t = (long)ind[o * {inner} + j];\n"
                f"if (t < 0) t += {depth};\n"
                f"y[(o * {depth} + d) * {inner} + j] = values[t == d ? 1 : 0];", "long")
    body = indent(loop("o", 0, outer, loop("d", 0, depth, cell, "long"), "long"))
    params = (Param("ind", dtype=idx_dtype), Param("values", dtype=dtype),
              Param("y", const=False, dtype=dtype))
    spec = make_spec("onehot", idx_shape=idx_shape, depth=depth, axis=axis)
    return Lowered(Kernel(f"onehot_{dtype}", params, body, spec=spec))
