"""CUDA generators of the quantized element-wise and pooling kernels
(codegen/kernels/quant/elementwise.py and pool.py): one thread per output element (per row for
softmax, per plane block for the global average), using the C kernels' own statement builders so
both dialects round the same float values the same way. Tables become `__device__ const` arrays
named by a hash of their contents. Float sums that onnxruntime does in order stay in order (one
thread each)."""
from __future__ import annotations

import hashlib
import math

from ..cfmt import flt
from ..kernel import Kernel
from ..kernels.quant import elementwise as qk
from ..kernels.quant import island as qi
from ..kernels.quant import pool as qp
from ..loops import broadcast_strides, collapse, strides_of
from .elementwise import NAME, gather, gparams, index_type, launch, named, per_element, unused
from .registry import CudaKernel, generator


def _ct(dtype: str) -> str:
    from ... import dtypes
    return dtypes.TABLE[dtype].ctype


def _table(values, ctype: str):
    """(name, definition) of a device table."""
    text = ", ".join(flt(v) if ctype == "float" else str(int(v)) for v in values)
    name = "rvk_cu_tab_" + hashlib.sha1((ctype + text).encode()).hexdigest()[:12]
    return name, f"__device__ const {ctype} {name}[{len(values)}] = {{{text}}};"


def _with(ck: CudaKernel, *tables) -> CudaKernel:
    ck.support = {**{n: d for n, d in tables}, **ck.support}
    return ck


@generator("quantize")
def quantize(spec: dict, kernel: Kernel) -> CudaKernel:
    from ...ops.quant.numerics import qrange
    lo, hi = qrange(spec["out_dtype"])
    chans, inner = spec["chans"], spec["inner"]
    z = "(int)zp[c]" if spec["has_zp"] else "0"
    stmts = f"""const I c = (i / {inner}) % {chans};
const float s = scale[c];
const int z = {z};
float v = x[i] / s;
v = v > (float)({lo} - z) ? v : (float)({lo} - z);
v = v < (float)({hi} - z) ? v : (float)({hi} - z);
{qk.rint_int("v", "q")}
y[i] = ({_ct(spec['out_dtype'])})(q + z);"""
    return per_element("quantize", kernel, spec["outer"] * chans * inner, stmts)


@generator("dequantize")
def dequantize(spec: dict, kernel: Kernel) -> CudaKernel:
    chans, inner = spec["chans"], spec["inner"]
    z = "zp[c]" if spec["has_zp"] else "0"
    stmts = f"""const I c = (i / {inner}) % {chans};
y[i] = {qk.dequant_expr(spec['in_dtype'], 'x[i]', z)} * scale[c];"""
    return per_element("dequantize", kernel, spec["outer"] * chans * inner, stmts)


@generator("dynamic_quantize")
def dynamic_quantize(spec: dict, kernel: Kernel) -> CudaKernel:
    """One block: min/max by a barrier tree, then every thread quantizes its share."""
    n, t = spec["n_elems"], 256
    template = f"""__global__ void {NAME}({gparams(kernel)}) {{
    __shared__ float rmn[{t}];
    __shared__ float rmx[{t}];
    typedef {index_type(n)} I;
    float mn = 0.0f, mx = 0.0f;
    for (I i = (I)threadIdx.x; i < {n}; i += {t}) {{
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }}
    rmn[threadIdx.x] = mn;
    rmx[threadIdx.x] = mx;
    __syncthreads();
    for (int h = {t // 2}; h > 0; h >>= 1) {{
        if ((int)threadIdx.x < h) {{
            const float a = rmn[threadIdx.x + h], b = rmx[threadIdx.x + h];
            rmn[threadIdx.x] = a < rmn[threadIdx.x] ? a : rmn[threadIdx.x];
            rmx[threadIdx.x] = b > rmx[threadIdx.x] ? b : rmx[threadIdx.x];
        }}
        __syncthreads();
    }}
    mn = rmn[0];
    mx = rmx[0];
{_indent(qk.dynamic_params_c("mn", "mx"))}
    const float lo = (float)(0 - zpi), hi = (float)(255 - zpi);
    if (threadIdx.x == 0) {{
        y_scale[0] = sc;
        y_zp[0] = (uint8_t)zpi;
    }}
    for (I i = (I)threadIdx.x; i < {n}; i += {t}) {{
{_indent(qk.quantize_elem_c("x[i]", "y[i]"), 2)}
    }}
}}"""
    name, text = named("dynamic_quantize", template)
    return CudaKernel(launch(name, 1, t, kernel), {name: text})


def _indent(text: str, levels: int = 1) -> str:
    return "\n".join("    " * levels + ln for ln in text.splitlines())


@generator("qlinear_binary")
def qlinear_binary(spec: dict, kernel: Kernel) -> CudaKernel:
    from ...ops.quant.numerics import qrange
    out_shape = spec["out_shape"]
    strides = [broadcast_strides(s, out_shape) for s in spec["in_shapes"]]
    dims, sts = collapse(out_shape, strides + [strides_of(out_shape)])
    decls, (ia, ib) = gather(dims, sts[:-1])
    xa, xb = f"a[{ia}]", f"b[{ib}]"
    x, y = (xb, xa) if spec["swap"] and spec["operator"] == "add" else (xa, xb)
    lo, hi = qrange(spec["dtype"])
    used = [p.name for p in kernel.params if p.name not in ("a", "b", "y")]
    stmts = decls + [" ".join(f"(void){u};" for u in used),
                     qk.binary_value(spec["operator"], spec["consts"], x, y),
                     qk.round_sat("v", lo, hi), f"y[i] = ({_ct(spec['dtype'])})q;"]
    return per_element(f"qlinear_{spec['operator']}", kernel, math.prod(out_shape),
                       "\n".join(s for s in stmts if s))


@generator("qdq_add")
def qdq_add(spec: dict, kernel: Kernel) -> CudaKernel:
    """The C kernel's statements; on the GPU the products and the sum are the correctly
    rounded intrinsics, which nvcc never contracts into an fma."""
    ops, names = spec["operands"], ("a[i]", "b[i]")
    vals = [x if dt == "float32" else f"__fmul_rn((float)((int){x} - {zp}), {flt(sc)})"
            for (dt, sc, zp), x in zip(ops, names)]
    keep = bool(spec["keep_float"])
    stmts = (f"{_voids(kernel, ('a', 'b', 'y', 'y1'))}\n#if defined(__CUDA_ARCH__)\n"
             f"float s = __fadd_rn({vals[0]}, {vals[1]});\n#else\n"
             f"{qi.portable_sum(ops, names)}\n#endif\n"
             + qi.quantize_sum(spec["y_q"], bool(spec["relu"]), spec["out_dtype"], "y[i]",
                               "y1[i]" if keep else ""))
    return per_element("qdq_add", kernel, spec["n_elems"], stmts)


def _voids(kernel: Kernel, keep) -> str:
    return " ".join(f"(void){p.name};" for p in kernel.params if p.name not in keep)


@generator("qlut")
def qlut(spec: dict, kernel: Kernel) -> CudaKernel:
    tab = _table(spec["table"], _ct(spec["dtype"]))
    stmts = f"{_voids(kernel, ('x', 'y'))}\ny[i] = {tab[0]}[(uint8_t)x[i]];"
    return _with(per_element("qlut", kernel, spec["n_elems"], stmts), tab)


@generator("qconcat")
def qconcat(spec: dict, kernel: Kernel) -> CudaKernel:
    in_shapes, axis, ct = spec["in_shapes"], spec["axis"], _ct(spec["dtype"])
    data = spec["data_params"]
    outer = math.prod(in_shapes[0][:axis])
    inners = [math.prod(s[axis:]) for s in in_shapes]
    total = sum(inners)
    tables, lines, off = [], [_voids(kernel, tuple(data) + ("y",)),
                              f"const I o = i / {total};", f"const I r = i - o * {total};",
                              f"{ct} v = 0;"], 0
    first = True
    for name, inner, t in zip(data, inners, spec["tables"]):
        if inner:
            src = f"{name}[o * {inner} + r - {off}]"
            if t is not None:
                tab = _table(t, ct)
                tables.append(tab)
                src = f"{tab[0]}[(uint8_t){src}]"
            lines.append(f"{'' if first else 'else '}if (r < {off + inner}) v = {src};")
            first = False
        off += inner
    lines.append("y[i] = v;")
    return _with(per_element("qconcat", kernel, outer * total, "\n".join(lines)), *tables)


@generator("qgap")
def qgap(spec: dict, kernel: Kernel) -> CudaKernel:
    """One block per plane: the integer sum by a barrier tree (exact in any order)."""
    shape, ct = spec["x_shape"], _ct(spec["dtype"])
    rows, inner, t = shape[0] * shape[1], math.prod(shape[2:]), 256
    if rows <= 0:
        return CudaKernel("    " + unused(kernel))
    fin = qp.gap_finish("red[0]", spec["x_zp"], inner, spec["scale"], spec["y_zp"],
                        spec["dtype"])
    template = f"""__global__ void {NAME}({gparams(kernel)}) {{
    __shared__ int red[{t}];
    typedef {index_type(rows * inner)} I;
    {_voids(kernel, ('x', 'y'))}
    for (I r = (I)blockIdx.x; r < {rows}; r += (I)gridDim.x) {{
        int acc = 0;
        for (I k = (I)threadIdx.x; k < {inner}; k += {t}) acc += x[r * {inner} + k];
        red[threadIdx.x] = acc;
        __syncthreads();
        for (int h = {t // 2}; h > 0; h >>= 1) {{
            if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
            __syncthreads();
        }}
        if (threadIdx.x == 0) {{
{_indent(fin, 3)}
            y[r] = ({ct})(q + {spec['y_zp']});
        }}
        __syncthreads();
    }}
}}"""
    name, text = named("qgap", template)
    return CudaKernel(launch(name, min(rows, 65535), t, kernel), {name: text})


@generator("qavgpool")
def qavgpool(spec: dict, kernel: Kernel) -> CudaKernel:
    n, c, h, w = spec["x_shape"]
    ho, wo = spec["y_shape"][2:]
    tab = _table(spec["table"], "float")
    body = qp.avgpool_window(spec, "I").replace("tab[", f"{tab[0]}[")
    stmts = f"""{_voids(kernel, ('x', 'y'))}
const I ow = i % {wo};
const I oh = (i / {wo}) % {ho};
const {_ct(spec['dtype'])} *__restrict__ xp = x + (i / {ho * wo}) * {h * w};
{body}
y[i] = ({_ct(spec['dtype'])})q;"""
    return _with(per_element("qavgpool", kernel, n * c * ho * wo, stmts, [n * c * h * w]), tab)


@generator("qsoftmax")
def qsoftmax(spec: dict, kernel: Kernel) -> CudaKernel:
    """One thread per row: the row's sum is sequential, as onnxruntime's."""
    outer, n, inner, ct = spec["outer"], spec["n"], spec["inner"], _ct(spec["dtype"])
    tab = _table(spec["table"], "float")
    row = qp.softmax_row(spec, "I").replace("tab + 255", f"{tab[0]} + 255")
    stmts = f"""{_voids(kernel, ('x', 'y'))}
const I base = (i / {inner}) * {n * inner} + i % {inner};
const {ct} *__restrict__ xp = x + base;
{ct} *__restrict__ yp = y + base;
{row}"""
    return _with(per_element("qsoftmax", kernel, outer * inner, stmts, [outer * n * inner]), tab)


@generator("maxpool_int")
def maxpool_int(spec: dict, kernel: Kernel) -> CudaKernel:
    n, c, h, w = spec["x_shape"]
    ho, wo = spec["y_shape"][2:]
    (sh, sw), (pt, pl) = spec["strides"], spec["pads"][:2]
    ct = _ct(spec["dtype"])
    stmts = f"""const I ow = i % {wo};
const I oh = (i / {wo}) % {ho};
const {ct} *__restrict__ xp = x + (i / {ho * wo}) * {h * w};
const I h0 = oh * {sh} - {pt}, w0 = ow * {sw} - {pl};
{qp.maxpool_window(spec, "I")}
y[i] = ({ct})acc;"""
    return per_element(f"maxpool_{spec['dtype']}", kernel, n * c * ho * wo, stmts,
                       [n * c * h * w])
