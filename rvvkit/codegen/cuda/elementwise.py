"""CUDA generators of the element-wise and data-movement kernels: nary, unary, affine, copy,
transpose, concat. One thread per output element, 256-thread blocks, grid-stride loops; every
shape is a literal constant, so index arithmetic divides by constants (multiplies on the GPU).

The helpers at the top (naming, parameter lists, launches, index types) are shared with
pool.py, which imports them."""
from __future__ import annotations

import hashlib
import math
import re
from typing import Dict, List, Sequence, Tuple

from ...ops.activations import cuda_act_expr as act_expr
from ..kernel import Kernel
from ..kernels.math.elementwise import OPERATORS
from ..loops import broadcast_strides, collapse, strides_of
from .registry import CudaKernel, generator

THREADS = 256
MAX_BLOCKS = 4096       # grid-stride loops cover the rest; ~4 waves of a large GPU
INT_LIMIT = 2 ** 31 - 1
NAME = "@NAME@"         # placeholder of a __global__ function's name in its template


# ---------------------------------------------------------------------------------------------
# Shared helpers


def index_type(*extents: int) -> str:
    """`int` when every index (up to the largest extent plus one grid stride) fits in 32 bits,
    else `long long`: 64-bit integer division is several times slower on a GPU."""
    return "int" if max(extents, default=0) + MAX_BLOCKS * THREADS < INT_LIMIT else "long long"


def named(hint: str, template: str) -> Tuple[str, str]:
    """(name, text) of a __global__ function whose template uses NAME for its own name. The
    name carries a hash of the text, so equal kernels share one definition in the unit."""
    digest = hashlib.sha1(template.encode()).hexdigest()[:12]
    name = f"rvk_cu_{re.sub(r'[^0-9A-Za-z_]', '_', hint)}_{digest}"
    return name, template.replace(NAME, name)


def gparams(kernel: Kernel) -> str:
    """The parameter list of a __global__ function taking the kernel's pointers."""
    return ", ".join((f"const {p.ctype} *__restrict__ " if p.const
                      else f"{p.ctype} *__restrict__ ") + p.name for p in kernel.params)


def args(kernel: Kernel) -> str:
    return "(" + ", ".join(p.name for p in kernel.params) + ")"


def unused(kernel: Kernel) -> str:
    """Statements that silence unused-parameter warnings for a launcher that launches nothing
    (an empty tensor) and for scratch the CUDA kernel does not need."""
    names = [p.name for p in kernel.params] + (["ws"] if kernel.workspace else [])
    return " ".join(f"(void){n};" for n in names)


def launch(name: str, blocks: int, threads: int, kernel: Kernel) -> str:
    # an unused `ws` is silenced by the emitter (render.py)
    return f"    RVK_LAUNCH({name}, dim3({blocks}), dim3({threads}), {args(kernel)});"


def grid_for(n: int) -> int:
    return max(1, min(MAX_BLOCKS, -(-n // THREADS)))


def per_element(hint: str, kernel: Kernel, n: int, stmts: str, extents: Sequence[int] = ()
                ) -> CudaKernel:
    """A kernel running `stmts` (which see the output index `i`, of type `I`) for every i in
    [0, n), one thread each, through a grid-stride loop."""
    if n <= 0:
        return CudaKernel("    " + unused(kernel))
    ty = index_type(n, *extents)
    inner = "\n".join("        " + line for line in stmts.splitlines())
    template = f"""__global__ void {NAME}({gparams(kernel)}) {{
    typedef {ty} I;
    const I step = (I)blockDim.x * (I)gridDim.x;
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < {n}; i += step) {{
{inner}
    }}
}}"""
    name, text = named(hint, template)
    return CudaKernel(launch(name, grid_for(n), THREADS, kernel), {name: text})


def gather(dims: Sequence[int], strides: Sequence[Sequence[int]], var: str = "i"
           ) -> Tuple[List[str], List[str]]:
    """For a flat index `var` over the collapsed output `dims` (row-major, so the output's own
    index is `var`), the element index of each operand with element `strides`: returns
    (coordinate declarations needed, index expression per operand)."""
    contiguous = strides_of(dims)
    need: Dict[int, str] = {}
    exprs = []
    for st in strides:
        if list(st) == contiguous:
            exprs.append(var)
            continue
        terms = []
        for k, s in enumerate(st):
            if s == 0:
                continue
            need[k] = _coord(dims, k, var)
            terms.append(f"c{k}" if s == 1 else f"c{k} * {s}")
        exprs.append(" + ".join(terms) or "0")
    decls = [f"const I c{k} = {need[k]};" for k in sorted(need)]
    return decls, exprs


def _coord(dims: Sequence[int], k: int, var: str) -> str:
    """Coordinate k of flat index `var` over `dims`."""
    below = math.prod(dims[k + 1:])
    q = var if below == 1 else f"{var} / {below}"
    if k == 0:          # the outermost coordinate needs no wrap-around
        return q
    return f"{var} % {dims[k]}" if below == 1 else f"({q}) % {dims[k]}"


# ---------------------------------------------------------------------------------------------
# Generators


@generator("nary")
def nary(spec: dict, kernel: Kernel) -> CudaKernel:
    """y = act(x0 <op> x1 <op> ...) with numpy broadcasting (operands left to right, as C)."""
    in_shapes, out_shape = spec["in_shapes"], spec["out_shape"]
    ins, y = kernel.params[:-1], kernel.params[-1]
    strides = [broadcast_strides(s, out_shape) for s in in_shapes]
    dims, sts = collapse(out_shape, strides + [strides_of(out_shape)])
    decls, idx = gather(dims, sts[:-1])
    sym = OPERATORS[spec["operator"]]
    value = f" {sym} ".join(f"{p.name}[{e}]" for p, e in zip(ins, idx))
    stmts = decls + [f"const float v = {value};",
                     f"{y.name}[i] = {act_expr(spec.get('act'), 'v')};"]
    return per_element(kernel.hint or "nary", kernel, math.prod(out_shape), "\n".join(stmts))


@generator("unary")
def unary(spec: dict, kernel: Kernel) -> CudaKernel:
    x, y = kernel.params
    act = spec["act"]
    stmts = f"const float v = {x.name}[i];\n{y.name}[i] = {act.cuda_expr('v')};"
    return per_element(act.kind, kernel, math.prod(spec["shape"]), stmts)


@generator("affine")
def affine(spec: dict, kernel: Kernel) -> CudaKernel:
    """y[n, c, :] = act(x[n, c, :] * s[c] + t[c])."""
    x, s, t, y = kernel.params
    shape = spec["shape"]
    chans, inner = shape[1], math.prod(shape[2:])
    n = math.prod(shape)
    c = _coord([shape[0], chans, inner], 1, "i")
    stmts = (f"const I c = {c};\n"
             f"const float v = {x.name}[i] * {s.name}[c] + {t.name}[c];\n"
             f"{y.name}[i] = {act_expr(spec.get('act'), 'v')};")
    return per_element("affine", kernel, n, stmts)


@generator("copy")
def copy(spec: dict, kernel: Kernel) -> CudaKernel:
    x, y = kernel.params
    return per_element("copy", kernel, spec["n_elems"], f"{y.name}[i] = {x.name}[i];")


@generator("transpose")
def transpose(spec: dict, kernel: Kernel) -> CudaKernel:
    in_shape, perm = spec["in_shape"], spec["perm"]
    x, y = kernel.params
    out_shape = [in_shape[p] for p in perm]
    in_st = strides_of(in_shape)
    dims, sts = collapse(out_shape, [[in_st[p] for p in perm], strides_of(out_shape)])
    decls, (idx,) = gather(dims, sts[:1])
    stmts = decls + [f"{y.name}[i] = {x.name}[{idx}];"]
    return per_element("transpose", kernel, math.prod(out_shape), "\n".join(stmts))


@generator("concat")
def concat(spec: dict, kernel: Kernel) -> CudaKernel:
    """Per outer index, the inputs' blocks of inner_j floats one after another in y."""
    in_shapes, axis = spec["in_shapes"], spec["axis"]
    ins, y = kernel.params[:-1], kernel.params[-1]
    outer = math.prod(in_shapes[0][:axis])
    inners = [math.prod(s[axis:]) for s in in_shapes]
    total = sum(inners)
    parts = [(p, inner, off) for p, inner, off in
             zip(ins, inners, [sum(inners[:j]) for j in range(len(inners))]) if inner]
    empty = [f"(void){p.name};" for p, inner in zip(ins, inners) if not inner]
    lines = empty + [f"const I o = i / {total};", f"const I r = i - o * {total};",
                     f"{y.ctype} v;"]
    for j, (p, inner, off) in enumerate(parts):
        rel = f"r - {off}" if off else "r"
        load = f"v = {p.name}[o * {inner} + {rel}];"
        if j == len(parts) - 1:
            lines.append(f"else {load}" if j else load)
        else:
            lines.append(f"{'else ' if j else ''}if (r < {off + inner}) {load}")
    lines.append(f"{y.name}[i] = v;")
    return per_element("concat", kernel, outer * total, "\n".join(lines))
