"""Decomposed attention over session caches, as transformers/optimum export it, becomes one ONNX
`Attention` that reads only the live prefix of the caches.

After passes/kv_cache.py has made a growing cache session state (`rvvkit.CacheWrite` of the
new keys/values into a buffer of the --max-seq bound), the exported attention still runs over
the whole bound, masked, and first copies each cache to every query head of its group
(`repeat_kv`: Unsqueeze, Expand, Reshape). Here the chain

    q, k = cache_k [-> Unsqueeze(2) -> Expand -> Reshape]     (grouped-query heads)
    s = MatMul(q, Transpose(k, (0, 1, 3, 2))) [* or / a scalar]
    p = Softmax(s + mask, last axis) [-> Cast to float]
    y = MatMul(p, cache_v [-> Unsqueeze(2) -> Expand -> Reshape])

becomes Attention(q, cache_k, cache_v, mask, nonpad_kv_seqlen = live length), scale the
scalar. The attention then reads the caches in place (query head h reads key/value head
h / (Hq / Hkv), which is what repeat_kv lays out) and stops at the live length: the keys past
it have a mask of the most negative float, so their weight was exactly 0. Anything else is
left as exported (still correct, over the whole bound)."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Node
from ..ops.cache_write import CACHE_WRITE
from ..ops.elementwise import CHANNEL_AFFINE
from ..ops.registry import REGISTRY
from .dce import remove_dead

Uses = Dict[str, List[Node]]


def _only_use(uses: Uses, name: str) -> bool:
    return len(uses.get(name, [])) == 1


def _scalar(g: Graph, name: str) -> Optional[float]:
    """The value of a constant whose elements are all one number."""
    if not g.is_const(name):
        return None
    data = np.asarray(g.const(name), np.float64).reshape(-1)
    return float(data[0]) if data.size and (data == data[0]).all() else None


def _unscaled(g: Graph, prod, uses: Uses, name: str) -> Tuple[str, float]:
    """(tensor before any multiplications by a constant scalar, their product)."""
    scale = 1.0
    while name in prod and _only_use(uses, name):
        n = prod[name]
        if n.act is not None or n.residual:
            break
        if n.op == CHANNEL_AFFINE and _scalar(g, n.inputs[2]) == 0.0 and \
                _scalar(g, n.inputs[1]) is not None:
            scale *= _scalar(g, n.inputs[1])
        elif n.op in ("Mul", "Div") and _scalar(g, n.inputs[1]) is not None and \
                g.t(n.inputs[0]).shape == g.t(name).shape:
            c = _scalar(g, n.inputs[1])
            if n.op == "Div" and c == 0.0:
                break
            scale *= c if n.op == "Mul" else 1.0 / c
        elif n.op == "Mul" and _scalar(g, n.inputs[0]) is not None and \
                g.t(n.inputs[1]).shape == g.t(name).shape:
            scale *= _scalar(g, n.inputs[0])
            name = n.inputs[1]
            continue
        else:
            break
        name = n.inputs[0]
    return name, scale


def _cache(g: Graph, prod, uses: Uses, name: str) -> Optional[str]:
    """The session cache [B, Hkv, N, D] that `name` is, or that repeat_kv made `name` from."""
    n = prod.get(name)
    if n is not None and n.op == CACHE_WRITE:
        return name
    chain = []
    for op in ("Reshape", "Expand", "Unsqueeze"):
        if n is None or n.op != op or not _only_use(uses, n.outputs[0]):
            return None
        chain.append(n)
        n = prod.get(n.inputs[0])
    if n is None or n.op != CACHE_WRITE or _axes(g, chain[2]) != [2]:
        return None
    cache = n.outputs[0]
    b, hk, total, d = g.t(cache).shape
    reps = g.t(name).shape[1] // hk
    ok = g.t(chain[1].outputs[0]).shape == (b, hk, reps, total, d) and \
        g.t(name).shape == (b, hk * reps, total, d)
    return cache if ok else None


def _axes(g: Graph, node: Node) -> Optional[List[int]]:
    """An Unsqueeze's axes: its attribute (before opset 13) or its constant input."""
    if "axes" in node.attrs:
        return [int(a) for a in node.attrs["axes"]]
    if len(node.inputs) > 1 and g.is_const(node.inputs[1]):
        return [int(a) for a in np.asarray(g.const(node.inputs[1])).reshape(-1)]
    return None


def _through_casts(g: Graph, uses: Uses, name: str) -> Tuple[Optional[Node], str]:
    """(the one consumer of `name` after float-to-float Casts, the tensor it reads)."""
    while _only_use(uses, name):
        n = uses[name][0]
        if n.op != "Cast":
            return n, name
        if g.t(n.outputs[0]).dtype != np.float32:
            break
        name = n.outputs[0]
    return None, name


def _match(g: Graph, prod, uses: Uses, sm: Node):
    """(q, cache_k, cache_v, mask, scale, final MatMul) of the chain through Softmax `sm`."""
    shape = g.t(sm.inputs[0]).shape
    if len(shape) != 4 or sm.attrs.get("axis") != 3 or sm.inputs[0] not in prod:
        return None
    add = prod[sm.inputs[0]]
    if add.op != "Add" or not _only_use(uses, sm.inputs[0]):
        return None
    for scores, mask in (add.inputs, add.inputs[::-1]):
        ms = g.t(mask).shape
        if g.t(scores).shape == shape and len(ms) == 4 and ms[-1] == shape[-1] and \
                g.t(mask).dtype == np.float32 and _only_use(uses, scores):
            break
    else:
        return None
    raw, scale = _unscaled(g, prod, uses, scores)
    qk = prod.get(raw)
    if qk is None or qk.op != "MatMul" or qk.act is not None or not _only_use(uses, raw):
        return None
    q, q_scale = _unscaled(g, prod, uses, qk.inputs[0])
    kt, k_scale = _unscaled(g, prod, uses, qk.inputs[1])
    tr = prod.get(kt)
    if tr is None or tr.op != "Transpose" or tuple(tr.attrs.get("perm", ())) != (0, 1, 3, 2) \
            or not _only_use(uses, kt):
        return None
    pv, probs = _through_casts(g, uses, sm.outputs[0])
    if pv is None or pv.op != "MatMul" or pv.act is not None or pv.inputs[0] != probs:
        return None
    ck, cv = _cache(g, prod, uses, tr.inputs[0]), _cache(g, prod, uses, pv.inputs[1])
    if ck is None or cv is None or len(g.t(q).shape) != 4:
        return None
    return q, ck, cv, mask, scale * q_scale * k_scale, pv, [qk, add, sm]


def fuse_cached_attention(g: Graph, live_length) -> int:
    """Rewrite every matching chain; `live_length()` names the int64 [batch] live length
    (made on first use). Returns how many were rewritten."""
    done = 0
    for sm in [n for n in g.nodes if n.op == "Softmax"]:
        found = _match(g, g.producers(), g.consumers(), sm)
        if found is None:
            continue
        q, ck, cv, mask, scale, pv, parts = found
        attention = Node("Attention", pv.name, [q, ck, cv, mask, "", "", live_length()],
                         list(pv.outputs), {"scale": scale},
                         fused=[(n.op, n.name) for n in parts] + [(pv.op, pv.name)])
        out = g.t(pv.outputs[0])
        try:
            same = REGISTRY["Attention"].infer(attention, g)[0] == (out.shape, out.dtype)
        except ModelError:
            same = False
        if not same:
            continue   # not the attention it looked like: left as exported
        g.nodes[g.nodes.index(pv)] = attention
        remove_dead(g)
        done += 1
    return done
