"""Unmasked attention as encoders export it (ViT, Whisper's audio encoder, CLIP's vision tower)
becomes one ONNX `Attention`:

    s = MatMul(q [* a], kt [* b])    q [B, H, S, D], kt [B, H, D, T] (often Transpose(k));
                                     a and b may also apply before Reshapes/Transposes
    p = Softmax(s [* or / c], last axis)
    y = MatMul(p, v)                 v [B, H, T, Dv]

-> Attention(q, K, v, scale = a * b * c), K [B, H, T, D] = kt with its last two axes swapped
(folded into kt's own Transpose when it has one: the exported (0, 2, 3, 1) of k becomes the
cheap (0, 2, 1, 3), rows of D contiguous floats).

Why: three kernels passed the B*H*S*T scores through memory three times (Whisper-tiny: 54 MB a
layer written by QK^T, read and written by Softmax, read by P.V); the Attention kernel keeps one
head's scores in its workspace, computes the softmax there in place and folds the scale into
QK^T's epilogue. A mask (an Add before the Softmax) is left alone: decoders' masked attention
over their caches is passes/cached_attention.py's, after the caches become session state."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..ir import Graph, Node, Tensor
from ..ops.registry import REGISTRY
from .cached_attention import unscaled, attention_node
from .dce import remove_dead
from .view import View

SWAP_LAST = (0, 1, 3, 2)


def _keys(g: Graph, v: View, kt: str) -> Tuple[str, Optional[Tuple[int, ...]]]:
    """(the tensor the keys are read from, the Transpose making [B, H, T, D] of it, None for
    none): kt's own Transpose composed with the swap of kt's last two axes."""
    tr = v.node(kt, "Transpose")
    if tr is None or not v.single(kt):
        return kt, SWAP_LAST
    perm = tuple(int(p) for p in tr.attrs["perm"])
    both = tuple(perm[s] for s in SWAP_LAST)
    return tr.inputs[0], (None if both == (0, 1, 2, 3) else both)


def _lifted(v: View, name: str) -> Tuple[float, Optional[Tuple[Node, str]]]:
    """A scalar factor applied before the Reshape/Transpose chain that made `name` (Whisper
    scales q before splitting its heads): (the factor, (the chain's first node, the input it
    reads instead)); (1, None) when there is none."""
    node = v.prod.get(name)
    first = None
    while node is not None and node.op in ("Reshape", "Transpose") and v.single(name):
        first, name = node, node.inputs[0]
        node = v.prod.get(name)
    if first is None or not v.single(name):
        return 1.0, None
    x, c = unscaled(v, name)
    return (c, (first, x)) if x != name else (1.0, None)


def _match(v: View, sm: Node):
    """(q, kt, value, scale, the final MatMul, the nodes it replaces) of the chain through
    Softmax `sm`, or None."""
    g = v.g
    shape = g.t(sm.inputs[0]).shape
    if len(shape) != 4 or sm.attrs.get("axis") not in (3, -1) or not v.single(sm.inputs[0]):
        return None
    raw, scale = unscaled(v, sm.inputs[0])
    qk = v.node(raw, "MatMul")
    if qk is None or not v.single(raw):
        return None
    q, q_scale = unscaled(v, qk.inputs[0])
    kt, k_scale = unscaled(v, qk.inputs[1])
    (q_lift, q_wire), (k_lift, k_wire) = _lifted(v, q), _lifted(v, kt)
    uses = v.cons.get(sm.outputs[0], [])
    if len(uses) != 1 or sm.outputs[0] in g.outputs:
        return None
    pv = uses[0]
    if pv.op != "MatMul" or pv.act is not None or pv.inputs[0] != sm.outputs[0]:
        return None
    value = pv.inputs[1]
    qs, ks, vs = (tuple(g.t(x).shape) for x in (q, kt, value))
    # per-head operands, no broadcast: q [B, H, S, D], kt [B, H, D, T], v [B, H, T, Dv]
    if not len(qs) == len(ks) == len(vs) == 4 or ks[:3] != qs[:2] + qs[3:] or \
            vs[:3] != qs[:2] + ks[3:] or any(g.is_const(x) for x in (q, kt, value)) or \
            any(g.t(x).dtype != np.float32 for x in (q, kt, value)):
        return None
    rewire = [w for w in (q_wire, k_wire) if w is not None]
    return q, kt, value, scale * q_scale * k_scale * q_lift * k_lift, pv, [qk, sm], rewire


def _transposed(g: Graph, src: str, perm: Tuple[int, ...], name: str) -> Node:
    out = g.fresh_name(f"{name}/keys")
    node = Node("Transpose", out, [src], [out], {"perm": perm})
    (shape, dtype), = REGISTRY["Transpose"].infer(node, g)
    g.add_tensor(Tensor(out, tuple(shape), np.dtype(dtype)))
    return node


def fuse_attention(g: Graph) -> int:
    """Rewrite every matching chain; returns how many were rewritten."""
    done, made = 0, False
    for sm in [n for n in g.nodes if n.op == "Softmax"]:
        v = View(g)
        found = _match(v, sm)
        if found is None:
            continue
        q, kt, value, scale, pv, parts, rewire = found
        src, perm = _keys(g, v, kt)
        keys = _transposed(g, src, perm, pv.name) if perm else None
        made = made or keys is not None
        attention = attention_node(g, pv, [q, keys.outputs[0] if keys else src, value],
                                   scale, parts)
        if attention is None:
            continue   # not the attention it looked like: left as exported
        for node, x in rewire:   # the lifted factors are in the scale now
            node.inputs[0] = x
        at = g.nodes.index(pv)
        g.nodes[at] = attention
        if keys is not None:
            g.nodes.insert(at, keys)
        done += 1
    if done:
        remove_dead(g)
    if made:   # a keys tensor of a chain that was left as exported
        g.prune_tensors()
    return done
