"""C lowerings of graph nodes, each attached to its op's entry in the operator table
(rvvkit.ops.REGISTRY) with `lowering`, and the dispatch that uses them. A node's kernel
parameters bind, in order, to its non-empty inputs and then its outputs."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ... import dtypes
from ...errors import InternalError, ModelError, RvvkitError, UnsupportedOperator
from ...ir import Graph, Node
from ...ops import REGISTRY
from ...ops.activations import BY_OP as ACTIVATIONS_BY_OP, act_of
from ...ops.elementwise import BINARY, CHANNEL_AFFINE
from ...ops.nn import softmax_axis
from ...ops.registry import lowering
from ...ops.movement import BOUND_INPUTS
from ...ops.shape import ALIAS_OPS
from ..kernel import Lowered
from ..kernels.conv import conv2d as convk
from ..kernels.conv import conv3d
from ..kernels.math import elementwise as ew
from ..kernels.gemm import packed as gemmk
from ..kernels.movement import layout
from ..kernels.reduce import pool


def _shape(g: Graph, name: str):
    return g.t(name).shape


@lowering("Conv")
def _conv(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    has_bias = len(n.inputs) > 2 and bool(n.inputs[2])
    xs, ws, ys = _shape(g, n.inputs[0]), _shape(g, n.inputs[1]), _shape(g, n.outputs[0])
    st, pads, dil = a["strides"], a["pads"], a["dilations"]
    if len(xs) == 5:
        fn = conv3d.conv_nd_gemm if g.is_const(n.inputs[1]) else conv3d.conv_nd
        return fn(xs, ws, ys, group=a["group"], strides=st, pads=pads, dilations=dil,
                  bias=has_bias, residual=n.residual, act=n.act)
    if len(xs) == 3:   # 1-D: the 2-D kernels with H = 1 (same buffers, same weight layout)
        xs, ys, _, st, pads, dil, ws = conv3d.as_2d(xs, ys, ws[2:], st, pads, dil, ws)
    return convk.conv2d(xs, ws, ys, group=a["group"], strides=st, pads=pads, dilations=dil,
                        bias=has_bias, residual=n.residual, act=n.act)


@lowering("Gemm")
def _gemm(n: Node, g: Graph) -> Lowered:
    (m, k), (_, nn) = _shape(g, n.inputs[0]), _shape(g, n.inputs[1])
    c = n.inputs[2] if len(n.inputs) > 2 else ""
    mode = None
    if c:
        cs = _shape(g, c)
        full = (1,) * (2 - len(cs)) + tuple(cs)
        mode = {(1, 1): "scalar", (m, 1): "row", (1, nn): "col", (m, nn): "full"}.get(full)
        if m == 1 and full == (1, nn):
            mode = "col"
    return gemmk.gemm(m, nn, k, b_const=g.is_const(n.inputs[1]), c_mode=mode,
                      alpha=float(n.attrs.get("alpha", 1.0)), beta=float(n.attrs.get("beta", 1.0)),
                      act=n.act, pack_rows=n.attrs.get("pack_rows"))


@lowering("MatMul")
def _matmul(n: Node, g: Graph) -> Lowered:
    if n.act is not None:  # the op table says MatMul takes no epilogue: fuse.py never does this
        raise ModelError("internal: activation fused into MatMul")
    # pack_rows: set by rvvkit/llm/prefill.py so that both plans of a decoder read one copy
    return gemmk.matmul(_shape(g, n.inputs[0]), _shape(g, n.inputs[1]), _shape(g, n.outputs[0]),
                        b_const=g.is_const(n.inputs[1]), pack_rows=n.attrs.get("pack_rows"))


@lowering(*BINARY, "Sum")   # C forms: kernels/math/elementwise.py OPERATORS
def _nary(n: Node, g: Graph) -> Lowered:
    if g.t(n.outputs[0]).dtype != np.float32:   # integer arithmetic: the typed kernel
        return lower_logic.typed_nary(n, g)
    return ew.nary(n.op, [_shape(g, i) for i in n.inputs], _shape(g, n.outputs[0]), n.act)


@lowering(*ACTIVATIONS_BY_OP)
def _unary(n: Node, g: Graph) -> Lowered:
    if g.t(n.inputs[0]).dtype != np.float32:    # Abs/Neg/Sign of integers: the typed kernel
        return lower_logic.typed_unary(n, g)
    return ew.unary(act_of(n), _shape(g, n.inputs[0]))


@lowering(CHANNEL_AFFINE)
def _affine(n: Node, g: Graph) -> Lowered:
    return ew.channel_affine(_shape(g, n.inputs[0]), n.act)


@lowering("MaxPool", "AveragePool")
def _pool(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    kind = "max" if n.op == "MaxPool" else "avg"
    xs, ys = _shape(g, n.inputs[0]), _shape(g, n.outputs[0])
    k, st, pads, dil = a["kernel"], a["strides"], a["pads"], a["dilations"]
    cip = bool(a.get("count_include_pad", 0))
    sp = len(xs) - 2
    if (tuple(k) == tuple(xs[2:]) and not any(pads) and all(d == 1 for d in dil)
            and tuple(ys[2:]) == (1,) * sp):
        # a window over the whole plane (ResNet's final 7x7 AveragePool) is a global pool:
        # a reduction per channel, not a vector of one output column
        return pool.global_pool(kind, xs)
    if len(xs) == 5:
        return conv3d.pool_nd(kind, xs, ys, k, st, pads, dil, cip)
    if len(xs) == 3:   # 1-D: the 2-D kernel with H = 1
        xs, ys, k, st, pads, dil, _ = conv3d.as_2d(xs, ys, k, st, pads, dil)
    return pool.pool2d(kind, xs, ys, k, st, pads, dil, cip)


@lowering("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(n: Node, g: Graph) -> Lowered:
    kind = "max" if n.op == "GlobalMaxPool" else "avg"
    return pool.global_pool(kind, _shape(g, n.inputs[0]))


@lowering("Softmax", "LogSoftmax")
def _softmax(n: Node, g: Graph) -> Lowered:
    axis, coerce = softmax_axis(n)
    return pool.softmax(_shape(g, n.inputs[0]), axis, coerce, log=n.op == "LogSoftmax")


@lowering("LRN")
def _lrn(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    return pool.lrn(_shape(g, n.inputs[0]), int(a["size"]), float(a.get("alpha", 1e-4)),
                    float(a.get("beta", 0.75)), float(a.get("bias", 1.0)))


@lowering("Transpose")
def _transpose(n: Node, g: Graph) -> Lowered:
    return layout.transpose(_shape(g, n.inputs[0]), n.attrs["perm"], g.t(n.inputs[0]).dtype.name)


@lowering("Concat")
def _concat(n: Node, g: Graph) -> Lowered:
    return layout.concat([_shape(g, i) for i in n.inputs], n.attrs["axis"],
                         g.t(n.outputs[0]).dtype.name)


# Aliases (Reshape & co.) need a kernel only when the alias must own its output buffer.
@lowering(*ALIAS_OPS)
def _copy(n: Node, g: Graph) -> Lowered:
    t = g.t(n.outputs[0])
    return ew.copy(t.size, t.dtype.name)


def kernel_inputs(n: Node) -> List[str]:
    """The node inputs bound to kernel parameters, in parameter order. Later inputs of aliases
    and activations are attributes in disguise (target shape, clip bounds)."""
    single = n.op in ALIAS_OPS or n.op in ACTIVATIONS_BY_OP
    if n.op in BOUND_INPUTS:   # data-movement ops: shape-like inputs are build-time constants
        return [n.inputs[k] for k in BOUND_INPUTS[n.op] if k < len(n.inputs) and n.inputs[k]]
    return n.inputs[:1] if single else [i for i in n.inputs if i]


def is_alias(n: Node, g: Graph) -> bool:
    """Reshape-like nodes whose output can share its input's buffer (no kernel at all)."""
    return n.op in ALIAS_OPS and n.outputs[0] not in g.outputs


def unlowerable(g: Graph) -> List[Tuple[str, str, str]]:
    """Every node that cannot run, as (op, node name, why): unknown op, fold-only op left with
    a run-time input, or a tensor of a dtype its kernel does not take. The frontend adds these
    to its own findings so that one error lists all of a model's problems."""
    found: List[Tuple[str, str, str]] = []
    for n in g.nodes:
        op = REGISTRY.get(n.op)
        if op is None or op.lower is None:
            found.append((n.op, n.name, f"{n.op} is supported only on build-time constants"))
            continue
        for name in kernel_inputs(n) + [o for o in n.outputs if o]:
            if not op.takes(g.t(name).dtype):
                found.append((n.op, n.name, _dtype_problem(n, name, g.t(name).dtype)))
                break
    return found


def _dtype_problem(n: Node, name: str, dtype) -> str:
    """Why tensor `name` of node n cannot be computed: a dtype outside rvvkit's table (float64,
    float16, int16, ...; constants of those fold, run-time tensors have no C type), or one
    outside what n's kernel takes."""
    if not dtypes.supported(dtype):
        return (f"tensor {name!r} has dtype {dtype}, which rvvkit computes on only as "
                f"build-time constants; its tensors are {', '.join(dtypes.NAMES)}")
    return f"tensor {name!r} has dtype {dtype}; {n.op} computes on " \
        f"{', '.join(REGISTRY[n.op].kernel_dtypes)}"


def check_lowerable(g: Graph) -> None:
    """Fail with every node that cannot run (see unlowerable)."""
    found = unlowerable(g)
    if found:
        raise UnsupportedOperator([(op, name) for op, name, _ in found],
                                  "\n".join(f"  {name}: {why}" for _, name, why in found))


def lower(n: Node, g: Graph) -> Optional[Lowered]:
    """n's kernel (None for an alias). The frontend has checked the node: an exception that
    is not an RvvkitError is a bug in its lowering, reported naming the node."""
    try:
        return None if is_alias(n, g) else REGISTRY[n.op].lower(n, g)
    except RvvkitError:
        raise
    except Exception as exc:
        raise InternalError(n.op, n.name, exc) from exc


# The lowerings of the other op families attach themselves on import (after the helpers above,
# which they may use).
# Every family's module registers its lowerings on import, and imports `lowering` from here:
# so they come after the definitions above (logic is also called by name, above).
from . import logic as lower_logic  # noqa: E402
from . import extra, grid, llm, movement, quant, quant_ew, reduce, sequence  # noqa: E402,F401

__all__ = ["lower", "is_alias", "kernel_inputs", "check_lowerable", "unlowerable"]
