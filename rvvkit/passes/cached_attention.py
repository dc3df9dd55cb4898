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
scalar. The key may be transposed in 3-D instead (Reshape to [B * H, T, D], Transpose, Reshape
back: torch's dynamo exporter), and an ONNX Attention fed by repeat_kv of the caches (the same
exporter at opset 23) reads the caches directly too. The attention then reads the caches in
place (query head h reads key/value head h / (Hq / Hkv), which is what repeat_kv lays out) and
stops at the live length: the keys past it were masked out, so their weight was exactly 0. Anything else is
left as exported (still correct, over the whole bound)."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Node
from ..ops.llm.cache_write import CACHE_WRITE
from ..ops.elementwise import CHANNEL_AFFINE
from ..ops.registry import REGISTRY
from .dce import remove_dead
from .view import View


def _uniform(g: Graph, name: str) -> Optional[float]:
    """The value of a constant whose elements are all one number (an affine's per-channel
    scale or shift that is the same for every head)."""
    if not g.is_const(name):
        return None
    data = np.asarray(g.const(name), np.float64).reshape(-1)
    return float(data[0]) if data.size and (data == data[0]).all() else None


def unscaled(v: View, name: str) -> Tuple[str, float]:
    """(the tensor that `name` is a constant multiple of, that constant): through an affine of
    one scale and no shift, then Mul/Div by scalars (View.product); else (`name`, 1)."""
    scale = 1.0
    n = v.node(name, CHANNEL_AFFINE)
    if n is not None and v.single(name) and _uniform(v.g, n.inputs[2]) == 0.0 and \
            _uniform(v.g, n.inputs[1]) is not None:
        scale, name = _uniform(v.g, n.inputs[1]), n.inputs[0]
    coef, factors = v.product(name, [])
    if len(factors) != 1 or v.g.t(factors[0]).shape != v.g.t(name).shape:
        return name, scale
    return factors[0], scale * coef


def _axes(g: Graph, node: Node) -> Optional[List[int]]:
    """An Unsqueeze's axes: its attribute (before opset 13) or its constant input."""
    if "axes" in node.attrs:
        return [int(a) for a in node.attrs["axes"]]
    if len(node.inputs) > 1 and g.is_const(node.inputs[1]):
        return [int(a) for a in np.asarray(g.const(node.inputs[1])).reshape(-1)]
    return None


def _chain(v: View, name: str, ops) -> Optional[Tuple[List[Node], str]]:
    """(the nodes, the tensor the chain starts from) when `name` is made by ops[0] from the
    output of ops[1], and so on, each output read by that one node alone; else None."""
    chain = []
    for op in ops:
        n = v.node(name, op)
        if n is None or not v.single(name):
            return None
        chain.append(n)
        name = n.inputs[0]
    return chain, name


def _round_trip(v: View, name: str) -> str:
    """X where `name` = Transpose(Reshape(Reshape(Transpose(X, p)), s), p) for p = (0, 2, 1, 3)
    and the two reshapes undo each other (the same shape before the first and after the
    second): a heads-last merge and split, as a 3-D MultiHeadAttention's key reaches it
    (frontend/ms_attention.py); else `name`."""
    found = _chain(v, name, ("Transpose", "Reshape", "Reshape", "Transpose"))
    if found is None:
        return name
    chain, x = found
    perms = [tuple(n.attrs.get("perm", ())) for n in (chain[0], chain[3])]
    split, heads_last = chain[0].inputs[0], chain[3].outputs[0]
    if perms != [(0, 2, 1, 3)] * 2 or v.g.t(split).shape != v.g.t(heads_last).shape:
        return name
    return x


def _cache(v: View, name: str) -> Optional[str]:
    """The session cache [B, Hkv, N, D] that `name` is, or that repeat_kv made `name` from."""
    name = _round_trip(v, name)
    if v.node(name, CACHE_WRITE) is not None:
        return name
    found = _chain(v, name, ("Reshape", "Expand", "Unsqueeze"))
    if found is None:
        return None
    chain, name = found
    if v.node(name, CACHE_WRITE) is None or _axes(v.g, chain[2]) != [2]:
        return None
    b, hk, total, d = v.g.t(name).shape
    heads = v.g.t(chain[0].outputs[0]).shape[1]
    ok = v.g.t(chain[1].outputs[0]).shape == (b, hk, heads // hk, total, d) and \
        v.g.t(chain[0].outputs[0]).shape == (b, heads, total, d) and heads % hk == 0
    return name if ok else None


def _nan_guard(v: View, name: str) -> Optional[Tuple[str, List[Node]]]:
    """(the output of Where(IsNaN(p), 0, p), those two nodes) when that is all that reads
    probabilities `p` (transformers' SDPA export, as optimum writes it: a row whose keys are
    all masked gives NaN, made 0), else None. Over the live prefix no row is all masked (a
    decoding query sees every live key; a prompt token sees itself), so the guard changes
    nothing there."""
    readers = v.cons.get(name, [])
    nan = next((n for n in readers if n.op == "IsNaN"), None)
    where = next((n for n in readers if n.op == "Where"), None)
    if len(readers) != 2 or nan is None or where is None or not v.single(nan.outputs[0]) or \
            where.inputs[0] != nan.outputs[0] or where.inputs[2] != name or \
            _uniform(v.g, where.inputs[1]) != 0.0:
        return None
    return where.outputs[0], [nan, where]


def _through_casts(v: View, name: str) -> Tuple[Optional[Node], str, List[Node]]:
    """(the one consumer of `name` after float-to-float Casts and a NaN guard (_nan_guard),
    the tensor it reads, the guard's nodes). A float16 model's probabilities go to float16 and
    back (transformers' softmax in float32, then .to(query.dtype)): the attention computes
    them in float32 without that rounding, as it computes the whole float16 graph
    (frontend/stored_floats.py)."""
    guarded = _nan_guard(v, name)
    name, guard = guarded if guarded is not None else (name, [])
    while v.single(name):
        n = v.cons[name][0]
        if n.op != "Cast":
            return n, name, guard
        if v.g.t(n.outputs[0]).dtype not in (np.float32, np.float16):
            break
        name = n.outputs[0]
    return None, name, guard


def _untransposed(v: View, name: str) -> Optional[str]:
    """K where `name` [B, H, D, T] = Transpose(K, (0, 1, 3, 2)), or the same done in 3-D as
    torch's dynamo exporter decomposes scaled_dot_product_attention: Reshape K to
    [B * H, T, D], Transpose (0, 2, 1), Reshape to [B, H, D, T]; else None."""
    tr = v.node(name, "Transpose")
    if tr is not None:
        ok = tuple(tr.attrs.get("perm", ())) == (0, 1, 3, 2) and v.single(name)
        return tr.inputs[0] if ok else None
    found = _chain(v, name, ("Reshape", "Transpose", "Reshape"))
    if found is None:
        return None
    chain, x = found
    shape = v.g.t(x).shape
    if len(shape) != 4 or tuple(chain[1].attrs.get("perm", ())) != (0, 2, 1):
        return None
    b, h, t, d = shape
    ok = v.g.t(chain[2].outputs[0]).shape == (b * h, t, d) and \
        v.g.t(name).shape == (b, h, d, t)
    return x if ok else None


def _repeated_attention(v: View, n: Node) -> Optional[List[str]]:
    """The inputs of an ONNX Attention (opset 23, as torch's dynamo exporter writes
    scaled_dot_product_attention) that reads its keys and values through repeat_kv from the
    session caches, rewritten to read the caches themselves up to the live length (the
    operator takes fewer key/value heads than query heads); else None."""
    if n.op != "Attention" or len(n.inputs) > 4 or n.attrs.get("is_causal") or \
            n.attrs.get("softcap") or n.attrs.get("qk_matmul_output_mode") or \
            len(n.outputs) > 1 or len(v.g.t(n.inputs[0]).shape) != 4:
        return None
    ck, cv = _cache(v, n.inputs[1]), _cache(v, n.inputs[2])
    if ck is None or cv is None:
        return None
    return [n.inputs[0], ck, cv, n.inputs[3] if len(n.inputs) > 3 else ""]


def _match(v: View, sm: Node):
    """(q, cache_k, cache_v, mask, scale, final MatMul, the nodes it replaces) of the chain
    through Softmax `sm`, or None."""
    g = v.g
    shape = g.t(sm.inputs[0]).shape
    add = v.node(sm.inputs[0], "Add")
    if len(shape) != 4 or sm.attrs.get("axis") != 3 or add is None or \
            not v.single(sm.inputs[0]):
        return None
    for scores, mask in (add.inputs, add.inputs[::-1]):
        ms = g.t(mask).shape
        if g.t(scores).shape == shape and len(ms) == 4 and ms[-1] == shape[-1] and \
                g.t(mask).dtype == np.float32 and v.single(scores):
            break
    else:
        return None
    raw, scale = unscaled(v, scores)
    qk = v.node(raw, "MatMul")
    if qk is None or not v.single(raw):
        return None
    q, q_scale = unscaled(v, qk.inputs[0])
    kt, k_scale = unscaled(v, qk.inputs[1])
    k = _untransposed(v, kt)
    if k is None:
        return None
    pv, probs, guard = _through_casts(v, sm.outputs[0])
    if pv is None or pv.op != "MatMul" or pv.act is not None or pv.inputs[0] != probs:
        return None
    ck, cv = _cache(v, k), _cache(v, pv.inputs[1])
    if ck is None or cv is None or len(g.t(q).shape) != 4:
        return None
    return q, ck, cv, mask, scale * q_scale * k_scale, pv, [qk, add, sm] + guard


def attention_node(g: Graph, pv: Node, inputs: List[str], scale: float,
                   parts: List[Node]) -> Optional[Node]:
    """The ONNX Attention computing the final MatMul `pv`'s output from `inputs`, the matched
    `parts` listed as fused; None when its own shape inference does not give pv's output."""
    node = Node("Attention", pv.name, inputs, list(pv.outputs), {"scale": scale},
                fused=[(n.op, n.name) for n in parts] + [(pv.op, pv.name)])
    out = g.t(pv.outputs[0])
    try:
        same = REGISTRY["Attention"].infer(node, g)[0] == (out.shape, out.dtype)
    except ModelError:
        same = False
    return node if same else None


def fuse_cached_attention(g: Graph, live_length) -> int:
    """Rewrite every matching chain; `live_length()` names the int64 [batch] live length
    (made on first use). Returns how many were rewritten."""
    done = 0
    for sm in [n for n in g.nodes if n.op == "Softmax"]:
        found = _match(View(g), sm)
        if found is None:
            continue
        q, ck, cv, mask, scale, pv, parts = found
        attention = attention_node(g, pv, [q, ck, cv, mask, "", "", live_length()], scale,
                                   parts)
        if attention is None:
            continue   # not the attention it looked like: left as exported
        g.nodes[g.nodes.index(pv)] = attention
        done += 1
    for n in [n for n in g.nodes if n.op == "Attention"]:
        ins = _repeated_attention(View(g), n)
        scale = n.attrs.get("scale") or g.t(n.inputs[0]).shape[-1] ** -0.5
        attention = ins and attention_node(g, n, ins + ["", "", live_length()], float(scale),
                                           [])
        if attention:
            g.nodes[g.nodes.index(n)] = attention
            done += 1
    if done:   # once: a chain's dead nodes are its own, so later matches are unaffected
        remove_dead(g)
    return done
