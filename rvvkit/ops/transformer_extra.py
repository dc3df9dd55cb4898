"""Transformer building blocks of recent opsets: SwiGLU (opset 28: Swish_alpha(A) * B, A and
B of one shape) and RotaryEmbedding (opset 23: RoPE on [batch, heads, seq, head] or
[batch, seq, heads * head] input, halves or interleaved pairs rotated, cos/sin rows picked by
position_ids or given per (batch, seq)). Attributes are canonicalised into node.attrs here:
"heads", "head", "rot" (rotated width), "interleaved", "layout4d"."""
from __future__ import annotations

import numpy as np

from .registry import F32, bad, in_shape, opt_input, register


def _swiglu_eval(node, xs):
    a = np.asarray(xs[0], np.float64)
    alpha = float(node.attrs.get("alpha", 1.0))
    return [(a / (1.0 + np.exp(-alpha * a)) * xs[1]).astype(np.float32)]


@register("SwiGLU", _swiglu_eval)
def _swiglu(node, g):
    a, b = in_shape(node, g, 0), in_shape(node, g, 1)
    if tuple(a) != tuple(b):
        raise bad(node, f"A {list(a)} and B {list(b)} must have one shape (no broadcasting)")
    node.attrs["alpha"] = float(node.attrs.get("alpha", 1.0))
    return [(tuple(a), F32)]


def _rope_eval(node, xs):
    """numpy RoPE on the canonical attributes (the C kernel's loop, vectorised)."""
    a = node.attrs
    x = np.asarray(xs[0], np.float64)
    shape = x.shape
    x = x if a["layout4d"] else x.reshape(shape[0], shape[1], a["heads"], a["head"]) \
        .transpose(0, 2, 1, 3)                                  # -> [B, H, S, D]
    cos, sin = np.asarray(xs[1], np.float64), np.asarray(xs[2], np.float64)
    if len(xs) > 3 and xs[3] is not None:
        cos, sin = cos[xs[3]], sin[xs[3]]                       # [B, S, half]
    cos, sin = cos[:, None], sin[:, None]
    rot, y = a["rot"], x.copy()
    i1 = np.arange(0, rot, 2) if a["interleaved"] else np.arange(rot // 2)
    i2 = i1 + 1 if a["interleaved"] else i1 + rot // 2
    x1, x2 = x[..., i1], x[..., i2]
    y[..., i1], y[..., i2] = cos * x1 - sin * x2, sin * x1 + cos * x2
    y = y if a["layout4d"] else y.transpose(0, 2, 1, 3).reshape(shape)
    return [y.astype(np.float32)]


@register("RotaryEmbedding", _rope_eval, dtypes=("float32", "int64"))
def _rope(node, g):
    x, cos, sin = (in_shape(node, g, i) for i in range(3))
    a = node.attrs
    pos = opt_input(node, 3)
    if len(x) == 4:
        heads, head = x[1], x[3]
    elif len(x) == 3:
        heads = int(a.get("num_heads", 0))
        if heads <= 0 or x[2] % heads:
            raise bad(node, f"3-D input {list(x)} needs num_heads dividing its last axis")
        head = x[2] // heads
    else:
        raise bad(node, f"input rank {len(x)}: 3 or 4 expected")
    rot = int(a.get("rotary_embedding_dim", 0)) or head
    if rot % 2 or rot > head:
        raise bad(node, f"rotary_embedding_dim {rot} must be even and at most head size {head}")
    batch, seq = x[0], (x[2] if len(x) == 4 else x[1])
    want = (None, rot // 2) if pos else (batch, seq, rot // 2)
    if tuple(cos) != tuple(sin) or len(cos) != (2 if pos else 3) or cos[-1] != rot // 2 or \
            (not pos and tuple(cos) != want):
        raise bad(node, f"cos/sin caches {list(cos)}, {list(sin)}: expected "
                        f"{'[max_position, ' + str(rot // 2) + ']' if pos else list(want)}")
    if pos and tuple(in_shape(node, g, 3)) != (batch, seq):
        raise bad(node, f"position_ids {list(in_shape(node, g, 3))}: expected [{batch}, {seq}]")
    if any(g.t(node.inputs[i]).dtype != F32 for i in range(3)):
        raise bad(node, "only float32 input and caches are supported")
    a.update(heads=heads, head=head, rot=rot, interleaved=int(a.get("interleaved", 0)),
             layout4d=len(x) == 4)
    return [(tuple(x), F32)]
