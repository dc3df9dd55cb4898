"""Helpers that write C loop nests over static shapes."""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Sequence, Tuple

from .cfmt import INDENT, indent


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def strides_of(shape: Sequence[int]) -> List[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return out[::-1]


def broadcast_strides(in_shape: Sequence[int], out_shape: Sequence[int]) -> List[int]:
    """Element strides of an input read at every output index (0 along broadcast axes)."""
    full = (1,) * (len(out_shape) - len(in_shape)) + tuple(in_shape)
    st = strides_of(full)
    return [0 if d == 1 and o != 1 else s for d, s, o in zip(full, st, out_shape)]


def collapse(out_shape: Sequence[int], strides: Sequence[Sequence[int]]
             ) -> Tuple[List[int], List[List[int]]]:
    """Merge adjacent axes along which every operand is contiguous with the next axis, so the
    loop nest is as shallow as possible and the innermost loop as long as possible."""
    dims = [int(d) for d in out_shape if d != 1] or [1]
    sts = [[s for s, d in zip(st, out_shape) if d != 1] or [0] for st in strides]
    if all(d == 1 for d in out_shape):
        return [1], [[0] for _ in strides]
    i = len(dims) - 1
    while i > 0:
        if all(st[i - 1] == st[i] * dims[i] for st in sts):
            dims[i - 1] *= dims[i]
            del dims[i]
            for st in sts:
                st[i - 1] = st[i]
                del st[i]
        i -= 1
    return dims, sts


# a statement that declares (not allowed as the unbraced body of a loop)
_DECL = r"(const |float |int |long |size_t |v?float32)"


def loop(var: str, start, stop, body: str, ty: str = "int", flat: bool = False,
         guard: str = "", directives: bool = False, step: int = 1) -> str:
    """`for (ty var = start; var < stop; ++var) { body }`; when the bounds are constants one
    apart, the body once with `var` fixed to `start` (no single-trip loops in the source): in
    a block, or without one when `flat` (the caller knows no declaration can clash).
    `guard`: a condition tested before every trip as well (`guard && var < stop`, the loop
    stopping when it fails), so a single trip is `if (guard) { body }`. `directives`: the
    body's preprocessor lines (RVV guards) stay in column 0 when it is shifted. `step`: the
    increment (constant bounds less than a step apart make the single trip too)."""
    if not (isinstance(start, int) and isinstance(stop, int) and 0 < stop - start <= step):
        cond = f"{guard} && {var} < {stop}" if guard else f"{var} < {stop}"
        inc = f"++{var}" if step == 1 else f"{var} += {step}"
        head = f"for ({ty} {var} = {start}; {cond}; {inc})"
        if "\n" in body or re.match(_DECL, body):
            return f"{head} {{\n{indent(body, directives=directives)}\n}}"
        one_line = len(head) + len(body) < 90 and not body.startswith("for ")
        return f"{head} {body}" if one_line else f"{head}\n{indent(body, directives=directives)}"
    fixed = f"const {ty} {var} = {start};\n" if re.search(rf"\b{var}\b", body) else ""
    if guard:
        return f"if ({guard}) {{\n{indent(fixed + body, directives=directives)}\n}}"
    if flat:
        return fixed + body
    return f"{{\n{indent(fixed + body, directives=directives)}\n}}"


def outer_loop(k: int, dim: int, parts: bool) -> str:
    """The header of a nest's loop k over `dim`; with `parts`, loop 0 runs a split kernel's
    parts [rvk_lo, rvk_hi) (parallel.py) instead of all of dim."""
    lo, hi = ("rvk_lo", "rvk_hi") if parts and k == 0 else ("0", str(dim))
    return f"for (long i{k} = {lo}; i{k} < {hi}; ++i{k}) {{"


def nest(dims: Sequence[int], strides: Sequence[Sequence[int]], names: Sequence[str],
         body: Callable[[Dict[str, str]], str], indent: str = INDENT,
         parts: bool = False) -> str:
    """A loop nest over `dims`. Outer loops keep one offset per operand; `body` receives, per
    operand name, the C index expression of the current element and returns statements.
    A single element (dims [1]) is the body alone, at index 0. `parts`: the outermost loop
    (of two or more) runs a split kernel's parts (outer_loop)."""
    if list(dims) == [1]:
        idx = {name: "0" for name in names}
        return "\n".join(indent + stmt for stmt in body(idx).splitlines())
    depth = len(dims)
    lines: List[str] = []
    for k in range(depth - 1):
        lines.append(indent * (k + 1) + outer_loop(k, dims[k], parts))
    pad = indent * depth
    last = depth - 1
    idx = {}
    for name, st in zip(names, strides):
        terms = [f"i{k} * {st[k]}" for k in range(depth - 1) if st[k]]
        if terms:
            lines.append(f"{pad}const long o_{name} = {' + '.join(terms)};")
        inner = {0: "", 1: f"i{last}"}.get(st[last], f"i{last} * {st[last]}")
        idx[name] = " + ".join(t for t in ((f"o_{name}" if terms else ""), inner) if t) or "0"
    lines.append(f"{pad}for (long i{last} = 0; i{last} < {dims[last]}; ++i{last}) {{")
    for stmt in body(idx).splitlines():
        lines.append(pad + indent + stmt)
    lines.append(pad + "}")
    for k in range(depth - 2, -1, -1):
        lines.append(indent * (k + 1) + "}")
    return "\n".join(lines)
