"""The typed element-wise kernel: y = f(a0, a1, ...) per output element, with numpy
broadcasting, on any element types of rvvkit.dtypes. Comparisons, logic, Where, Cast, the
integer forms of the arithmetic binaries, Pow, Mod, Min/Max/Mean and PRelu are all this one
kernel with a different C expression (kind "ewise"; the CUDA generator in cuda/logic.py reads
the same expression from the spec).

The expression names its operands a0, a1, ... (locals of the input's C type, loaded once per
element, so an operand may appear several times); an input the expression never names is
bound but not read (CastLike's type donor). Loops are collapsed like the float nary kernel's
(innermost long and unit-stride), which is what lets compilers vectorise the portable loop.
Helpers an expression calls are `static RVK_HD inline` with keys starting "hd_", so the CUDA
unit defines them too."""
from __future__ import annotations

import re
from typing import Dict, Optional, Sequence

from .... import dtypes
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import broadcast_strides, collapse, nest, strides_of

declare_spec("ewise", ("operator", "expr", "in_shapes", "in_dtypes", "out_shape", "out_dtype"))


def used(expr: str, j: int) -> bool:
    return re.search(rf"\ba{j}\b", expr) is not None


def operand_layout(in_shapes, out_shape, expr):
    """(indices of the operands the expression reads, collapsed dims, strides per read operand
    then the output)."""
    live = [j for j in range(len(in_shapes)) if used(expr, j)]
    strides = [broadcast_strides(in_shapes[j], out_shape) for j in live]
    dims, sts = collapse(out_shape, strides + [strides_of(out_shape)])
    return live, dims, sts


def ewise(operator: str, expr: str, in_shapes: Sequence[Sequence[int]],
          in_dtypes: Sequence[str], out_shape: Sequence[int], out_dtype: str,
          support: Optional[Dict[str, str]] = None) -> Lowered:
    """y[...] = (out C type)(expr) over out_shape; params x0.. (inputs), y."""
    names = [f"x{j}" for j in range(len(in_shapes))]
    live, dims, sts = operand_layout(in_shapes, out_shape, expr)
    oty = dtypes.TABLE[out_dtype].ctype

    def body(idx):
        loads = [f"const {dtypes.TABLE[in_dtypes[j]].ctype} a{j} = x{j}[{idx[f'x{j}']}];"
                 for j in live]
        return "\n".join(loads + [f"y[{idx['y']}] = ({oty})({expr});"])

    if _elems(out_shape):
        unread = "".join(f"    (void){names[j]};\n" for j in range(len(names)) if j not in live)
        code = unread + nest(dims, sts, [names[j] for j in live] + ["y"], body)
    else:   # an empty tensor: nothing to compute
        code = "    " + " ".join(f"(void){n};" for n in names + ["y"])
    params = tuple(Param(n, dtype=d) for n, d in zip(names, in_dtypes)) + \
        (Param("y", const=False, dtype=out_dtype),)
    spec = make_spec("ewise", operator=operator, expr=expr, in_shapes=in_shapes,
                     in_dtypes=in_dtypes, out_shape=out_shape, out_dtype=out_dtype)
    return Lowered(Kernel(f"{operator.lower()}_{out_dtype}", params, code,
                          support=dict(support or {}), spec=spec))


def _elems(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# -- helpers (C and CUDA) ----------------------------------------------------------------------

def helper(name: str, ctype: str, text: str) -> Dict[str, str]:
    """A `static RVK_HD inline` helper `name`_<C type> (two arguments of `ctype`) with body
    `text` (statements over a, b)."""
    fn = f"{name}_{ctype}"
    return {f"hd_{fn}": f"static RVK_HD inline {ctype} {fn}({ctype} a, {ctype} b) {{\n"
                        f"    {text}\n}}"}


def min_max(which: str, ctype: str) -> Dict[str, str]:
    """rvk_min_T / rvk_max_T: a < b ? a : b. Floats: a NaN in either operand is the result, as
    onnxruntime's Min/Max (and numpy's minimum/maximum) give; the comparison alone returns b
    for a NaN a. Still a compare and a blend per element where compilers vectorise."""
    cmp = "<" if which == "min" else ">"
    nan = " || a != a" if ctype == "float" else ""
    return helper(f"rvk_{which}", ctype, f"return (a {cmp} b{nan}) ? a : b;")


def floor_mod(ctype: str) -> Dict[str, str]:
    """Mod with fmod=0: the remainder takes the divisor's sign (Python's %); 0 for b == 0."""
    if ctype == "float":
        return helper("rvk_mod", ctype, "const float r = fmodf(a, b);\n"
                      "    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;")
    if ctype.startswith("uint") or ctype == "rvk_bool":
        return helper("rvk_mod", ctype, f"return b == 0 ? ({ctype})0 : ({ctype})(a % b);")
    return helper("rvk_mod", ctype, f"if (b == 0) return 0;\n    const {ctype} r = "
                  f"({ctype})(a % b);\n    return (r != 0 && ((r < 0) != (b < 0))) ? "
                  f"({ctype})(r + b) : r;")
