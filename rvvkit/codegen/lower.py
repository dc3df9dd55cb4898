"""Dispatch from graph nodes to kernel lowerings. A node's kernel parameters bind, in order, to
its non-empty inputs and then its outputs."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

from ..errors import ModelError, UnsupportedOperator
from ..ir import Graph, Node
from ..ops.nn import softmax_axis
from ..ops.shape import ALIAS_OPS
from .act import Act
from .kernel import Lowered
from .kernels import elementwise as ew
from .kernels import layout, pool


def _shape(g: Graph, name: str):
    return g.t(name).shape


def _conv(n: Node, g: Graph) -> Lowered:
    from .kernels import conv as convk
    a = n.attrs
    has_bias = len(n.inputs) > 2 and bool(n.inputs[2])
    return convk.conv2d(_shape(g, n.inputs[0]), _shape(g, n.inputs[1]), _shape(g, n.outputs[0]),
                        group=a["group"], strides=a["strides"], pads=a["pads"],
                        dilations=a["dilations"], bias=has_bias,
                        residual=bool(a.get("_residual")), act=a.get("_act"))


def _gemm(n: Node, g: Graph) -> Lowered:
    from .kernels import gemm as gemmk
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
                      act=n.attrs.get("_act"))


def _matmul(n: Node, g: Graph) -> Lowered:
    from .kernels import gemm as gemmk
    low = gemmk.matmul(_shape(g, n.inputs[0]), _shape(g, n.inputs[1]), _shape(g, n.outputs[0]),
                       b_const=g.is_const(n.inputs[1]))
    if n.attrs.get("_act"):
        raise ModelError("internal: activation fused into MatMul")  # fuse.py never does this
    return low


def _nary(n: Node, g: Graph) -> Lowered:
    return ew.nary(n.op, [_shape(g, i) for i in n.inputs], _shape(g, n.outputs[0]),
                   n.attrs.get("_act"))


def _unary(n: Node, g: Graph) -> Lowered:
    from ..passes.fuse import activation_of
    return ew.unary(activation_of(g, n), _shape(g, n.inputs[0]))


def _pool(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    kind = "max" if n.op == "MaxPool" else "avg"
    return pool.pool2d(kind, _shape(g, n.inputs[0]), _shape(g, n.outputs[0]), a["kernel"],
                       a["strides"], a["pads"], a["dilations"],
                       bool(a.get("count_include_pad", 0)))


def _softmax(n: Node, g: Graph) -> Lowered:
    shape = _shape(g, n.inputs[0])
    axis, coerce = softmax_axis(n, len(shape))
    return pool.softmax(shape, axis, coerce, log=n.op == "LogSoftmax")


def _lrn(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    return pool.lrn(_shape(g, n.inputs[0]), int(a["size"]), float(a.get("alpha", 1e-4)),
                    float(a.get("beta", 0.75)), float(a.get("bias", 1.0)))


def _copy(n: Node, g: Graph) -> Lowered:
    return ew.copy(g.t(n.outputs[0]).size)


LOWERINGS: Dict[str, Callable[[Node, Graph], Lowered]] = {
    "Conv": _conv, "Gemm": _gemm, "MatMul": _matmul,
    "Add": _nary, "Sub": _nary, "Mul": _nary, "Div": _nary, "Sum": _nary,
    "Relu": _unary, "Clip": _unary, "LeakyRelu": _unary, "Sigmoid": _unary, "Tanh": _unary,
    "ChannelAffine": lambda n, g: ew.channel_affine(_shape(g, n.inputs[0]), n.attrs.get("_act")),
    "MaxPool": _pool, "AveragePool": _pool,
    "GlobalAveragePool": lambda n, g: pool.global_pool("avg", _shape(g, n.inputs[0])),
    "GlobalMaxPool": lambda n, g: pool.global_pool("max", _shape(g, n.inputs[0])),
    "LRN": _lrn, "Softmax": _softmax, "LogSoftmax": _softmax,
    "Transpose": lambda n, g: layout.transpose(_shape(g, n.inputs[0]), n.attrs["perm"]),
    "Concat": lambda n, g: layout.concat([_shape(g, i) for i in n.inputs], n.attrs["axis"]),
    "Identity": _copy, "Dropout": _copy,
}
for _alias in ALIAS_OPS:
    LOWERINGS.setdefault(_alias, _copy)  # used only when the alias must own its output


SINGLE_INPUT = ALIAS_OPS + ("Clip",)  # later inputs are attributes in disguise (shape, bounds)


def kernel_inputs(n: Node) -> List[str]:
    """The node inputs bound to kernel parameters, in parameter order."""
    return n.inputs[:1] if n.op in SINGLE_INPUT else [i for i in n.inputs if i]


def is_alias(n: Node, g: Graph) -> bool:
    """Reshape-like nodes whose output can share its input's buffer (no kernel at all)."""
    return n.op in ALIAS_OPS and n.outputs[0] not in g.outputs


def check_lowerable(g: Graph) -> None:
    """Fail with every node that cannot run: unknown op, fold-only op left with a run-time
    input, or a non-float tensor reaching a kernel."""
    bad: List = []
    details: List[str] = []
    for n in g.nodes:
        if n.op not in LOWERINGS:
            bad.append((n.op, n.name))
            details.append(f"  {n.name}: {n.op} is supported only on build-time constants")
            continue
        for name in kernel_inputs(n) + n.outputs[:1]:
            if g.t(name).dtype != np.float32:
                bad.append((n.op, n.name))
                details.append(f"  {n.name}: tensor {name!r} has dtype {g.t(name).dtype}; "
                               "kernels compute in float32")
                break
    if bad:
        raise UnsupportedOperator(bad, "\n".join(details))


def lower(n: Node, g: Graph) -> Optional[Lowered]:
    return None if is_alias(n, g) else LOWERINGS[n.op](n, g)


__all__ = ["Act", "lower", "is_alias", "kernel_inputs", "check_lowerable", "LOWERINGS"]
