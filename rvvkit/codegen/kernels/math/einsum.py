"""Einsum as a direct loop nest: per output element (flat index decomposed into its letters),
the sum over the contracted letters of the product of the inputs, each read at the sum of its
letters' strides (a repeated letter in one term reads the diagonal; a size-1 broadcast axis
has stride 0). Two-operand forms that are a plain batched matrix product (transposes folded
into the operands' strides) are lowered by codegen/lower/sequence.py onto the GEMM instead."""
from __future__ import annotations

import math
from typing import Dict, Sequence

from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop, strides_of

declare_spec("einsum", ("terms", "out_term", "in_shapes", "out_shape", "dims"))


def _offset(term: str, shape, idx: Dict[str, str]) -> str:
    parts = []
    for c, s, d in zip(term, strides_of(shape), shape):
        if d > 1 and s:
            parts.append(f"{idx[c]} * {s}" if s > 1 else idx[c])
    return " + ".join(parts) or "0"


def per_output(terms: Sequence[str], out_term: str, in_shapes, out_shape,
               dims: Dict[str, int]) -> str:
    """Statements computing output element y[o] (shared with the CUDA generator)."""
    contracted = sorted({c for t in terms for c in t} - set(out_term))
    ost = strides_of(out_shape)
    idx = {c: f"i_{c}" for c in set("".join(terms)) | set(out_term)}
    decl = []
    for c, s, d in zip(out_term, ost, out_shape):
        q = f"o / {s}" if s > 1 else "o"
        decl.append(f"const long i_{c} = {q if c == out_term[0] else f'({q}) % {d}'};")
    decl += [f"(void)i_{c};" for c in out_term]   # unused where every input has size 1
    prod = " * ".join(f"x{k}[{_offset(t, s, idx)}]" for k, (t, s) in enumerate(zip(terms,
                                                                                  in_shapes)))
    inner = f"acc += {prod};"
    for c in reversed(contracted):   # flat: each declares only its own i_<letter>
        inner = loop(f"i_{c}", 0, dims[c], inner, "long", flat=True)
    return "\n".join(decl) + f"\nfloat acc = 0.0f;\n{inner}\ny[o] = acc;"


def einsum(terms: Sequence[str], out_term: str, in_shapes, out_shape,
           dims: Dict[str, int]) -> Lowered:
    """y[out_term] = sum over the other letters of prod_i x_i[terms[i]]; params x0.., y."""
    in_shapes = [tuple(int(v) for v in s) for s in in_shapes]
    out_shape = tuple(int(v) for v in out_shape)
    contracted = sorted({c for t in terms for c in t} - set(out_term))
    n_out = math.prod(out_shape)
    stmts = per_output(terms, out_term, in_shapes, out_shape, dims)
    body = loop("o", 0, n_out, stmts, "long")   # one output element (a scalar): no loop
    params = tuple(Param(f"x{k}") for k in range(len(terms))) + (Param("y", False),)
    spec = make_spec("einsum", terms=tuple(terms), out_term=out_term,
                     in_shapes=tuple(in_shapes), out_shape=out_shape,
                     dims=tuple(sorted(dims.items())))
    macs = n_out * math.prod(dims[c] for c in contracted)
    return Lowered(Kernel("einsum", params, indent(body) + "\n", macs=macs, spec=spec))
