"""The decomposed normalisations exporters write, matched for passes/patterns.py.

LayerNorm (torch before opset 17):

    m = ReduceMean(x, trailing axes); d = x - m; p = Pow(d, 2) or d * d
    y = d / Sqrt(ReduceMean(p, same axes) + eps) [* gamma] [+ beta]

becomes LayerNormalization(x, scale, bias; axis, epsilon). RMSNorm (LLaMA-style models):

    y = x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2)) + eps)) [* gamma]   (or x / Sqrt(...),
                                                                      or x * (1 / Sqrt(...)))

becomes RMSNormalization(x, scale; axis, epsilon). An absent gamma or beta is a constant of
ones or zeros over the normalised shape."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..ir import Node
from .view import View

LAYERNORM = "LayerNormalization"
RMSNORM = "RMSNormalization"


def _const_operand(v: View, n: Node) -> Tuple[Optional[str], Optional[str]]:
    """(run-time operand, constant operand) of a binary node, or (None, None)."""
    if len(n.inputs) != 2:
        return None, None
    a, b = n.inputs
    if v.g.is_const(b) and not v.g.is_const(a):
        return a, b
    if v.g.is_const(a) and not v.g.is_const(b):
        return b, a
    return None, None


def _affine_tail(v: View, anchor: Node):
    """Walk back from `anchor` over an optional Add(beta) and Mul(gamma) to the Div:
    (div node, gamma name, beta name, tail nodes) or None."""
    gamma = beta = None
    tail: List[Node] = []
    n = anchor
    if n.op == "Add":
        inner, beta = _const_operand(v, n)
        tail.append(n)
        n = v.node(inner, "Mul", "Div") if inner and v.single(inner) else None
    if n is not None and n.op == "Mul":
        inner, gamma = _const_operand(v, n)
        tail.append(n)
        n = v.node(inner, "Div") if inner and v.single(inner) else None
    if n is None or n.op != "Div" or len(n.inputs) != 2:
        return None
    return n, gamma, beta, tail + [n]


def _reduce_mean(v: View, name: str, rank: int) -> Optional[Node]:
    """A ReduceMean over trailing axes that keeps dims."""
    n = v.node(name, "ReduceMean")
    if n is None or not n.attrs.get("keepdims", 1):
        return None
    axes = tuple(n.attrs.get("axes", ()))
    if not axes or axes != tuple(range(rank - len(axes), rank)):
        return None
    return n


def _params(v: View, name: Optional[str], shape, fill: float) -> Optional[np.ndarray]:
    """gamma/beta as an array of the normalised shape (None: it does not broadcast so)."""
    if name is None:
        return np.full(shape, fill, np.float32)
    data = v.g.const(name)
    if data.dtype != np.float32:
        return None
    while data.ndim > len(shape) and data.shape[0] == 1:
        data = data.reshape(data.shape[1:])
    if data.ndim > len(shape):
        return None
    try:
        if np.broadcast_shapes(data.shape, shape) != tuple(shape):
            return None
    except ValueError:
        return None
    return np.ascontiguousarray(np.broadcast_to(data, shape))


def match_layernorm(v: View, anchor: Node):
    if anchor.op not in ("Add", "Mul", "Div"):
        return None
    found = _affine_tail(v, anchor)
    if found is None:
        return None
    div, gamma, beta, nodes = found
    d, s = div.inputs
    sq = v.node(s, "Sqrt")
    if sq is None or not v.single(s):
        return None
    var, eps = v.plus_const(sq.inputs[0], nodes)
    sub = v.node(d, "Sub")
    if var is None or sub is None or len(sub.inputs) != 2:
        return None
    x, m = sub.inputs
    rank = len(v.g.t(x).shape)
    mean, mean2 = _reduce_mean(v, m, rank), _reduce_mean(v, var, rank)
    if mean is None or mean2 is None or mean.inputs[0] != x or not v.single(var):
        return None
    axes = tuple(mean.attrs["axes"])
    if tuple(mean2.attrs["axes"]) != axes:
        return None
    p = mean2.inputs[0]
    sqr = v.node(p, "Pow", "Mul")
    if sqr is None or not v.single(p) or sqr.inputs[0] != d:
        return None
    if sqr.op == "Pow" and v.scalar(sqr.inputs[1]) != 2.0:
        return None
    if sqr.op == "Mul" and sqr.inputs[1] != d:
        return None
    norm_shape = v.g.t(x).shape[axes[0]:]
    scale, bias = _params(v, gamma, norm_shape, 1.0), _params(v, beta, norm_shape, 0.0)
    if scale is None or bias is None or not eps > 0:
        return None
    names = []
    for what, data in (("scale", scale), ("bias", bias)):
        names.append(v.g.fresh_name(f"{anchor.name or 'layernorm'}_{what}"))
        v.g.add_const(names[-1], data)
    attrs = {"axis": axes[0] - rank, "epsilon": float(eps)}
    return LAYERNORM, [x, *names], attrs, nodes + [sq, mean2, sqr, sub, mean]


def _inverse_sqrt(v: View, n: Node, nodes: List[Node]) -> Tuple[Optional[str], Optional[str]]:
    """(x, s) when `n` is x / s or x * r with r = Reciprocal(s) or 1 / s (r read once)."""
    if n.op == "Div":
        return n.inputs[0], n.inputs[1]
    for x, r in (n.inputs, n.inputs[::-1]):
        rec = v.node(r, "Reciprocal", "Div") if v.single(r) else None
        if rec is not None and rec.op == "Reciprocal":
            nodes.append(rec)
            return x, rec.inputs[0]
        if rec is not None and len(rec.inputs) == 2 and v.scalar(rec.inputs[0]) == 1.0:
            nodes.append(rec)
            return x, rec.inputs[1]
    return None, None


def match_rmsnorm(v: View, anchor: Node):
    if anchor.op not in ("Mul", "Div") or len(anchor.inputs) != 2:
        return None
    nodes: List[Node] = [anchor]
    n, gamma = anchor, None
    if n.op == "Mul":
        inner, gamma = _const_operand(v, n)
        if gamma is not None:
            n = v.node(inner, "Mul", "Div") if v.single(inner) else None
            if n is None or len(n.inputs) != 2:
                return None
            nodes.append(n)
    x, s = _inverse_sqrt(v, n, nodes)
    sq = v.node(s, "Sqrt") if s is not None and v.single(s) else None
    if sq is None:
        return None
    var, eps = v.plus_const(sq.inputs[0], nodes)
    rank = len(v.g.t(x).shape)
    mean = _reduce_mean(v, var, rank) if var is not None and v.single(var) else None
    if mean is None or not v.single(mean.inputs[0]):
        return None
    sqr = v.node(mean.inputs[0], "Pow", "Mul")
    if sqr is None or sqr.inputs[0] != x:
        return None
    if sqr.op == "Mul" and sqr.inputs[1] != x:
        return None
    if sqr.op == "Pow" and v.scalar(sqr.inputs[1]) != 2.0:
        return None
    axes = tuple(mean.attrs["axes"])
    scale = _params(v, gamma, v.g.t(x).shape[axes[0]:], 1.0)
    if scale is None or not eps > 0:
        return None
    name = v.g.fresh_name(f"{anchor.name or 'rmsnorm'}_scale")
    v.g.add_const(name, scale)
    attrs = {"axis": axes[0] - rank, "epsilon": float(eps)}
    return RMSNORM, [x, name], attrs, nodes + [sq, mean, sqr]
