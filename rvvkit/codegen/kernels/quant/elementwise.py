"""Kernels of the quantized element-wise family: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearAdd/Mul, lookup tables (QLinearSigmoid/LeakyRelu) and
QLinearConcat. Numerics: rvvkit/ops/quant/numerics.py (onnxruntime's order of float operations).

Plain C written for auto-vectorisation (gcc/clang on x86, clang's scalable RVV): straight
loops, selects instead of branches, no libm call but fmaf (one instruction where the target has
FMA). Rounding half to even of a clamped value is the float trick (v + 1.5 * 2^23) - 1.5 * 2^23,
exact for |v| < 2^22, which the clamp guarantees (the compiler may not reassociate it: rvvkit
never builds with -ffast-math). Scales and zero points are build-time constants: literals in
the body, or (per axis) read from the weights; tables are static arrays in the body. Every node
input is a parameter (kernels bind all of them); the ones a body does not read are voided.

Threads: each kernel but DynamicQuantizeLinear (a min/max over the whole tensor first) is a
split kernel (codegen/parallel.py) over parts of about BLOCK elements, whole rows or planes
where it has any (`part_range`); every element is computed alike in any part."""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ....ops.quant.numerics import qrange
from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import broadcast_strides, cdiv, collapse, loop, nest, strides_of
from ...parallel import Split, parts_loop
from ..math.elementwise import BLOCK

MAGIC = "12582912.0f"   # 1.5 * 2^23: adding and subtracting it rounds to an integer, ties even

declare_spec("quantize", ("outer", "chans", "inner", "out_dtype", "has_zp"))
declare_spec("dequantize", ("outer", "chans", "inner", "in_dtype", "has_zp"))
declare_spec("dynamic_quantize", ("n_elems",))
declare_spec("qlinear_binary", ("operator", "in_shapes", "out_shape", "dtype", "swap",
                                "consts"))
declare_spec("qlut", ("n_elems", "dtype", "table"))
declare_spec("qconcat", ("in_shapes", "axis", "dtype", "tables", "data_params"))


def rint_int(v: str, q: str) -> str:
    """Statements declaring `int q` = float `v` rounded half to even (|v| < 2^22), read from
    the bits of v + 1.5 * 2^23 rather than converted: no float-to-integer instruction, which
    keeps clang from RVV's narrowing vfncvt.rtz (QEMU 7.2 aborts translating it)."""
    return (f"const float {q}_t = {v} + {MAGIC};\nint {q};\n"
            f"memcpy(&{q}, &{q}_t, sizeof {q});\n{q} -= 0x4B400000;")


def round_sat(v: str, lo: int, hi: int, q: str = "q") -> str:
    """Statements declaring `int q`: float variable `v` rounded to the nearest integer in
    [lo, hi] (ties even, NaN to lo: the comparisons fail for it)."""
    return (f"{v} = {v} > {flt(lo)} ? {v} : {flt(lo)};\n"
            f"{v} = {v} < {flt(hi)} ? {v} : {flt(hi)};\n" + rint_int(v, q))


def void(params: Sequence[Param], used: Sequence[str]) -> str:
    names = [p.name for p in params if p.name not in used]
    return "".join(f"    (void){n};\n" for n in names)


def table_literal(table: Sequence, ctype: str, name: str) -> str:
    """`static const ctype name[N] = {...};`, 16 entries a line."""
    vals = [flt(v) if ctype == "float" else str(int(v)) for v in table]
    rows = [", ".join(vals[i:i + 16]) for i in range(0, len(vals), 16)]
    body = ",\n".join("    " + r for r in rows)
    return f"static const {ctype} {name}[{len(vals)}] = {{\n{body}\n}};"


def part_range(var: str, count: int, per_part: int, body: str, flat: bool = False):
    """(loop over `var` in [0, count) as the parts of a split kernel, `per_part` iterations
    each (the last one shorter), its Split factory: work -> Split | None). One part: the plain
    loop (as loops.loop). The bounds depend on the shapes alone."""
    parts = cdiv(count, per_part)
    if parts <= 1:
        return loop(var, 0, count, body, "long", flat), lambda work: None
    if per_part == 1:
        return parts_loop(var, count, body, flat=flat)
    lo, hi = f"(long)rvk_lo * {per_part}", f"(long)rvk_hi * {per_part}"
    return (loop(var, lo, f"({hi} < {count} ? {hi} : {count})", body, "long"),
            lambda work: Split(parts, work))


def rows_per_part(row: int) -> int:
    """Rows of `row` elements (or operations) in a part of about BLOCK."""
    return max(1, BLOCK // max(1, row))


# -- QuantizeLinear / DequantizeLinear -------------------------------------------------------

def _channels(outer: int, chans: int, inner: int, head: str, elem: str, xt: str, yt: str
              ) -> Tuple[str, Optional[Split]]:
    """(loops over the rows (outer, channel) around `head` (per channel c) and `elem` (per
    element i of the row's `inner` elements, between xp and yp), its Split): parts of whole
    rows, or blocks of one row's elements when there is one."""
    n = outer * chans
    if n == 1:
        elems, split = part_range("i", inner, BLOCK, elem)
        code = f"""const long c = 0;
const {xt} *__restrict xp = x;
{yt} *__restrict yp = y;
{head}
{elems}"""
    else:
        chan = "0" if chans == 1 else ("r" if outer == 1 else f"r % {chans}")
        code, split = part_range("r", n, rows_per_part(inner), f"""const long c = {chan};
const {xt} *__restrict xp = x + r * {inner};
{yt} *__restrict yp = y + r * {inner};
{head}
{loop("i", 0, inner, elem, "long")}""")
    return indent(code), split(n * inner * 8)


def quantize(outer: int, chans: int, inner: int, out_dtype: str, has_zp: bool) -> Lowered:
    """y = sat(rint_even(clamp(x / scale[c], qmin - zp[c], qmax - zp[c])) + zp[c]); params
    x, scale, (zp,) y."""
    from .... import dtypes
    lo, hi = qrange(out_dtype)
    yt = dtypes.TABLE[out_dtype].ctype
    params = (Param("x"), Param("scale")) + \
        ((Param("zp", dtype=out_dtype),) if has_zp else ()) + \
        (Param("y", const=False, dtype=out_dtype),)
    z = "(int)zp[c]" if has_zp else "0"
    head = f"""const float s = scale[c];
const int z = {z};
const float lo = (float)({lo} - z), hi = (float)({hi} - z);"""
    elem = f"""float v = xp[i] / s;
v = v > lo ? v : lo;
v = v < hi ? v : hi;
{rint_int("v", "q")}
yp[i] = ({yt})(q + z);"""
    spec = make_spec("quantize", outer=outer, chans=chans, inner=inner, out_dtype=out_dtype,
                     has_zp=has_zp)
    code, split = _channels(outer, chans, inner, head, elem, "float", yt)
    return Lowered(Kernel(f"quantize_{out_dtype}", params, code, spec=spec, split=split))


def dequant_expr(in_dtype: str, x: str, z: str) -> str:
    """float(int32(x) - int32(zp)); int32 inputs wrap like onnxruntime's (no overflow UB)."""
    if in_dtype == "int32":
        return f"(float)(int32_t)((uint32_t){x} - (uint32_t){z})"
    return f"(float)((int){x} - {z})"


def dequantize(outer: int, chans: int, inner: int, in_dtype: str, has_zp: bool) -> Lowered:
    """y = (float)(x - zp[c]) * scale[c]; params x, scale, (zp,) y."""
    from .... import dtypes
    xt = dtypes.TABLE[in_dtype].ctype
    params = (Param("x", dtype=in_dtype), Param("scale")) + \
        ((Param("zp", dtype=in_dtype),) if has_zp else ()) + (Param("y", const=False),)
    head = f"const float s = scale[c];\nconst {xt} z = {'zp[c]' if has_zp else '0'};"
    elem = f"yp[i] = {dequant_expr(in_dtype, 'xp[i]', 'z')} * s;"
    spec = make_spec("dequantize", outer=outer, chans=chans, inner=inner, in_dtype=in_dtype,
                     has_zp=has_zp)
    code, split = _channels(outer, chans, inner, head, elem, xt, "float")
    return Lowered(Kernel(f"dequantize_{in_dtype}", params, code, spec=spec, split=split))


def dynamic_params_c(mn: str, mx: str) -> str:
    """C statements: scale `sc` and zero point `zpi` from the range [mn, mx] (both hold 0),
    exactly as quant_math.dynamic_qparams."""
    return f"""const float sc = {mx} == {mn} ? 1.0f : ({mx} - {mn}) / 255.0f;
float zf = 0.0f - {mn} / sc;
zf = zf > 0.0f ? zf : 0.0f;
zf = zf < 255.0f ? zf : 255.0f;
{rint_int("zf", "zpi")}"""


def quantize_elem_c(x: str, y: str) -> str:
    """C statements: uint8 `y` = x quantized with `sc`, `zpi`, lo, hi (DynamicQuantizeLinear)."""
    return f"""float v = {x} / sc;
v = v > lo ? v : lo;
v = v < hi ? v : hi;
{rint_int("v", "q")}
{y} = (uint8_t)(q + zpi);"""


def dynamic_quantize(n: int) -> Lowered:
    """DynamicQuantizeLinear: params x, y (uint8), y_scale (float[1]), y_zero_point (uint8[1])."""
    params = (Param("x"), Param("y", const=False, dtype="uint8"),
              Param("y_scale", const=False), Param("y_zp", const=False, dtype="uint8"))
    minmax = loop("i", 0, n, "mn = x[i] < mn ? x[i] : mn;\nmx = x[i] > mx ? x[i] : mx;", "long")
    quant = loop("i", 0, n, quantize_elem_c("x[i]", "y[i]"), "long")
    code = indent(f"""float mn = 0.0f, mx = 0.0f;   /* the range always holds 0 */
{minmax}
{dynamic_params_c("mn", "mx")}
const float lo = (float)(0 - zpi), hi = (float)(255 - zpi);
y_scale[0] = sc;
y_zp[0] = (uint8_t)zpi;
{quant}""")
    return Lowered(Kernel("dynamic_quantize", params, code,
                          spec=make_spec("dynamic_quantize", n_elems=n)))


# -- QLinearAdd / QLinearMul -----------------------------------------------------------------

def binary_value(op: str, consts: Tuple, x: str, y: str, fma: str = "fmaf") -> str:
    """C statements computing float `v` from the operands' values (as float expressions of the
    raw integers). add: consts (rx, ry, F), x/y in MLAS's roles; mul: (ratio, za, zb, zc)."""
    if op == "add":
        rx, ry, f = consts
        return f"float v = {fma}((float){x}, {flt(rx)}, {fma}((float){y}, {flt(ry)}, {flt(f)}));"
    ratio, za, zb, zc = consts
    # the product is clamped before zc is added: values past +-512 saturate anyway, and the
    # select keeps compilers from fusing the multiply and the add (onnxruntime rounds both)
    return (f"float m = (float)(((int){x} - {za}) * ((int){y} - {zb})) * {flt(ratio)};\n"
            "m = m > -512.0f ? m : -512.0f;\nm = m < 512.0f ? m : 512.0f;\n"
            f"float v = m + {flt(zc)};")


def qlinear_binary(op: str, in_shapes, out_shape, dtype: str, swap: bool, consts: Tuple,
                   params: Tuple[Param, ...], a: str, b: str) -> Lowered:
    """y = QLinearAdd/Mul(a, b) with numpy broadcasting; `params` are all the node's tensors
    (a and b name the data ones), y last."""
    from .... import dtypes
    lo, hi = qrange(dtype)
    yt = dtypes.TABLE[dtype].ctype
    strides = [broadcast_strides(s, out_shape) for s in in_shapes] + [strides_of(out_shape)]
    dims, sts = collapse(out_shape, strides)

    def body(idx):
        xa, xb = f"{a}[{idx[a]}]", f"{b}[{idx[b]}]"
        x, y = (xb, xa) if swap and op == "add" else (xa, xb)
        return f"{binary_value(op, consts, x, y)}\n{round_sat('v', lo, hi)}\n" \
               f"y[{idx['y']}] = ({yt})q;"

    loops = nest(dims, sts, [a, b, "y"], body)
    # parts: runs of the outermost loop (blocks of elements when it is the only one)
    per = BLOCK if len(dims) == 1 else rows_per_part(math.prod(dims[1:]))
    outer, split = part_range("i0", dims[0], per, "")
    if split(1) is not None:
        first = f"for (long i0 = 0; i0 < {dims[0]}; ++i0)"
        assert first in loops, loops
        loops = loops.replace(first, outer.strip(), 1)
    code = void(params, (a, b, "y")) + loops
    spec = make_spec("qlinear_binary", operator=op, in_shapes=in_shapes, out_shape=out_shape,
                     dtype=dtype, swap=swap, consts=consts)
    return Lowered(Kernel(f"qlinear_{op}_{dtype}", params, code, spec=spec,
                          split=split(math.prod(out_shape) * 16)))


# -- lookup tables ---------------------------------------------------------------------------

def qlut(n: int, dtype: str, table: np.ndarray, params: Tuple[Param, ...]) -> Lowered:
    """y[i] = table[byte of x[i]] (256 entries of dtype); params x, the node's parameters, y."""
    from .... import dtypes
    ct = dtypes.TABLE[dtype].ctype
    vals = tuple(int(v) for v in np.asarray(table).view(np.dtype(dtype)))
    elems, split = part_range("i", n, BLOCK, "y[i] = tab[(uint8_t)x[i]];")
    code = indent(table_literal(vals, ct, "tab")) + "\n" + void(params, ("x", "y")) + \
        indent(elems)
    spec = make_spec("qlut", n_elems=n, dtype=dtype, table=vals)
    return Lowered(Kernel(f"qlut_{dtype}", params, code, spec=spec, split=split(n * 2)))


def qconcat(in_shapes, axis: int, dtype: str, tables: List[Optional[np.ndarray]],
            params: Tuple[Param, ...], data: Sequence[str]) -> Lowered:
    """Concatenation along `axis` of the inputs named `data`, each copied or requantised
    through its table (None: a copy)."""
    from .... import dtypes
    ct = dtypes.TABLE[dtype].ctype
    outer = math.prod(in_shapes[0][:axis])
    inners = [math.prod(s[axis:]) for s in in_shapes]
    total = sum(inners)
    vals = tuple(None if t is None else tuple(int(v) for v in np.asarray(t).view(np.dtype(dtype)))
                 for t in tables)
    decls, parts, off = [], [], 0
    for j, (name, inner, t) in enumerate(zip(data, inners, vals)):
        if inner:
            src = f"{name}[o * {inner} + i]"
            if t is not None:
                decls.append(table_literal(t, ct, f"tab{j}"))
                src = f"tab{j}[(uint8_t){src}]"
            parts.append(loop("i", 0, inner, f"y[o * {total} + {off} + i] = {src};", "long"))
        off += inner
    rows, split = part_range("o", outer, rows_per_part(total), "\n".join(parts) or ";")
    code = indent("\n".join(decls)) + ("\n" if decls else "") + void(params, list(data) + ["y"]) \
        + indent(rows)
    spec = make_spec("qconcat", in_shapes=in_shapes, axis=axis, dtype=dtype, tables=vals,
                     data_params=tuple(data))
    return Lowered(Kernel(f"qconcat_{dtype}", params, code, spec=spec,
                          split=split(outer * total * 2)))


def node_params(names: Sequence[Tuple[str, str]], out: Sequence[Tuple[str, str]]
                ) -> Tuple[Param, ...]:
    """Params (name, dtype) for inputs then outputs."""
    return tuple(Param(nm, dtype=dt) for nm, dt in names) + \
        tuple(Param(nm, const=False, dtype=dt) for nm, dt in out)


__all__ = ["quantize", "dequantize", "dynamic_quantize", "qlinear_binary", "qlut", "qconcat",
           "node_params", "round_sat", "rint_int", "binary_value", "MAGIC", "part_range",
           "rows_per_part"]
