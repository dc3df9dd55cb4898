"""Canonicalising rewrites: identities removed, Gemm transposes resolved, BatchNormalization and
per-channel constant Mul/Add/Sub/Div turned into one affine op, affine chains merged and folded
into the preceding convolution's weights."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..ir import Graph, Node
from ..ops.elementwise import CHANNEL_AFFINE, bn_affine


def _is_identity(n: Node) -> bool:
    # a Concat of one input is a copy (transformers' caches export one for an empty cache)
    return n.op in ("Identity", "Dropout") or (n.op == "Concat" and len(n.inputs) == 1)


def remove_identities(g: Graph) -> None:
    for n in list(g.nodes):
        if not _is_identity(n):
            continue
        src, dst = n.inputs[0], n.outputs[0]
        if dst in g.outputs and (src in g.inputs or src in g.outputs or g.is_const(src)):
            n.op, n.attrs = "Identity", {}  # must stay a copy: graph outputs own their buffer
            continue
        g.remove_nodes([n])
        g.replace_uses(dst, src) if dst not in g.outputs else _rename_output(g, src, dst)


def _rename_output(g: Graph, src: str, dst: str) -> None:
    """Make the producer of `src` write `dst` (a graph output) directly."""
    for n in g.nodes:
        n.outputs = [dst if o == src else o for o in n.outputs]
    g.tensors[dst].shape = g.tensors[src].shape
    g.replace_uses(src, dst)


def canonical_gemm(g: Graph) -> None:
    """Resolve transA/transB and beta at build time so the kernel sees A[M,K] @ B[K,N] + C."""
    for n in list(g.nodes):
        if n.op != "Gemm":
            continue
        for idx, attr in ((0, "transA"), (1, "transB")):
            if n.attrs.get(attr, 0):
                n.inputs[idx] = _transposed(g, n, n.inputs[idx])
                n.attrs[attr] = 0
        c = n.inputs[2] if len(n.inputs) > 2 else ""
        beta = float(n.attrs.get("beta", 1.0))
        if c and g.is_const(c) and beta != 1.0:
            n.inputs[2] = g.add_const(g.fresh_name(c + "_scaled"),
                                      (g.const(c) * beta).astype(np.float32)).name
            n.attrs["beta"] = 1.0


def _transposed(g: Graph, user: Node, name: str) -> str:
    if g.is_const(name):
        return g.add_const(g.fresh_name(name + "_T"),
                           np.ascontiguousarray(g.const(name).T)).name
    t = g.t(name)
    out = g.fresh_name(name + "_T")
    g.add_tensor(type(t)(out, t.shape[::-1], t.dtype))
    g.nodes.insert(g.nodes.index(user),
                   Node("Transpose", user.name + "/transpose", [name], [out], {"perm": (1, 0)}))
    return out


def _channel_vector(g: Graph, x: str, c: str) -> Optional[np.ndarray]:
    """The constant `c` as one value per channel of `x` if it broadcasts only along axis 1."""
    if not g.is_const(c) or g.is_const(x):
        return None
    xs, cv = g.t(x).shape, g.const(c)
    if len(xs) < 2 or cv.ndim > len(xs) or cv.dtype != np.float32:
        return None
    full = (1,) * (len(xs) - cv.ndim) + cv.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1) or full[1] not in (1, xs[1]):
        return None
    return np.broadcast_to(cv.reshape(-1), (xs[1],)).astype(np.float32)


def _as_affine(g: Graph, n: Node) -> Optional[Tuple[str, np.ndarray, np.ndarray]]:
    if n.op == "BatchNormalization":
        s, t = bn_affine(*(g.const(i) for i in n.inputs[1:5]), n.attrs.get("epsilon", 1e-5))
        return n.inputs[0], s, t
    if n.op not in ("Mul", "Add", "Sub", "Div") or len(n.inputs) != 2:
        return None
    a, b = n.inputs
    for x, c, const_first in ((a, b, False), (b, a, True)):
        v = _channel_vector(g, x, c)
        if v is None or g.t(n.outputs[0]).shape != g.t(x).shape:
            continue
        one, zero = np.ones_like(v), np.zeros_like(v)
        if n.op == "Mul":
            return x, v, zero
        if n.op == "Add":
            return x, one, v
        if n.op == "Sub":
            return (x, -one, v) if const_first else (x, one, -v)
        if not const_first:  # x / c; c / x is not affine
            return x, (1.0 / v.astype(np.float64)).astype(np.float32), zero
    return None


def to_affine(g: Graph) -> None:
    for n in g.nodes:
        aff = _as_affine(g, n)
        if aff is None:
            continue
        x, s, t = aff
        # source_op: what the node was, for step comments once it is folded into another
        n.op, n.attrs = CHANNEL_AFFINE, {"source_op": n.op}
        n.inputs = [x, g.add_const(g.fresh_name(n.name + "/scale"), s).name,
                    g.add_const(g.fresh_name(n.name + "/shift"), t).name]


def _sole_consumer(g: Graph, name: str, consumers) -> Optional[Node]:
    users = consumers.get(name, [])
    if len(users) != 1 or name in g.outputs:
        return None
    return users[0]


def merge_affines(g: Graph) -> None:
    """affine(affine(x)) -> affine(x); Conv followed by affine -> Conv with scaled weights."""
    changed = True
    while changed:
        changed = False
        producers, consumers = g.producers(), g.consumers()
        for n in g.nodes:
            if n.op != CHANNEL_AFFINE:
                continue
            p = producers.get(n.inputs[0])
            if p is None or _sole_consumer(g, n.inputs[0], consumers) is not n:
                continue
            s, t = g.const(n.inputs[1]), g.const(n.inputs[2])
            if p.op == CHANNEL_AFFINE:
                ps, pt = g.const(p.inputs[1]), g.const(p.inputs[2])
                p.inputs[1] = g.add_const(g.fresh_name(p.inputs[1]), ps * s).name
                p.inputs[2] = g.add_const(g.fresh_name(p.inputs[2]), pt * s + t).name
            elif p.op == "Conv" and p.act is None and not p.residual:
                _scale_conv(g, p, s, t)
            else:
                continue
            p.fused.append((n.attrs.get("source_op", n.op), n.name))
            p.fused.extend(n.fused)
            p.outputs = [n.outputs[0]]
            g.remove_nodes([n])
            changed = True
            break


def _scale_conv(g: Graph, conv: Node, s: np.ndarray, t: np.ndarray) -> None:
    w = g.const(conv.inputs[1]).astype(np.float64)
    w = w * s.reshape((-1,) + (1,) * (w.ndim - 1))   # 1-D, 2-D and 3-D weights
    b = g.const(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
    bias = (np.asarray(b, np.float64) * s + t).astype(np.float32)
    wname = g.add_const(g.fresh_name(conv.inputs[1] + "_bn"), w.astype(np.float32)).name
    bname = g.add_const(g.fresh_name(conv.name + "/bias_bn"),
                        np.broadcast_to(bias, (w.shape[0],)).copy()).name
    conv.inputs = [conv.inputs[0], wname, bname]
