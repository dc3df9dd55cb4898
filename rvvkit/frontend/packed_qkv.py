"""onnxruntime-genai's builder packs Q, K and V into one projection on CPU by default: its
GroupQueryAttention takes them as one `query` input [batch, seq, (heads + 2 kv_heads) x head]
with the key and value inputs empty. rvvkit's GroupQueryAttention takes them apart, so the
frontend splits the packed input along its last axis (an ONNX Split before the node) and
everything after (the kernels, the cache passes, the prefill plan) sees the unpacked form."""
from __future__ import annotations

from typing import Optional

from .proto_facts import Facts, attr

GQA = "GroupQueryAttention"


def packed(node) -> bool:
    return node.op_type == GQA and (len(node.input) < 3 or not node.input[1]
                                    and not node.input[2])


def head_size(facts: Facts, node) -> Optional[int]:
    """A GroupQueryAttention's head size from its query's width over its heads (the query,
    key and value heads when they come packed)."""
    heads, kv = attr(node, "num_heads"), attr(node, "kv_num_heads")
    wide = facts.width(node.input[0])
    if not (heads and kv and wide):
        return None
    total = heads + (2 * kv if packed(node) else 0)
    return wide // total if wide % total == 0 else None


def unpack(proto):
    """proto with every packed GroupQueryAttention fed by a Split of its query input (the
    model is copied first; one whose widths cannot be read is left as it is, and the op then
    says what it needs)."""
    from onnx import helper, numpy_helper
    import numpy as np
    facts = Facts(proto)   # read only where a packed node asks
    heads = {i: head_size(facts, n) for i, n in enumerate(proto.graph.node) if packed(n)}
    heads = {i: hd for i, hd in heads.items() if hd}
    if not heads:
        return proto
    out = type(proto)()
    out.CopyFrom(proto)
    opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 13)
    nodes = []
    for i, node in enumerate(out.graph.node):
        if i in heads:
            hd = heads[i]
            sizes = [attr(node, "num_heads") * hd] + [attr(node, "kv_num_heads") * hd] * 2
            base = f"{node.name or f'gqa{i}'}/unpacked"
            parts = [f"{base}/q", f"{base}/k", f"{base}/v"]
            if opset >= 13:
                out.graph.initializer.append(
                    numpy_helper.from_array(np.asarray(sizes, np.int64), f"{base}/sizes"))
                nodes.append(helper.make_node("Split", [node.input[0], f"{base}/sizes"], parts,
                                              name=f"{base}/split", axis=-1))
            else:
                nodes.append(helper.make_node("Split", [node.input[0]], parts,
                                              name=f"{base}/split", axis=-1, split=sizes))
            rest = list(node.input[3:])
            del node.input[:]
            node.input.extend(parts + rest)
        nodes.append(node)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
