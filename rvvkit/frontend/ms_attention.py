"""onnxruntime's MultiHeadAttention (com.microsoft), as onnxruntime-genai's builder writes a
float16 CPU decoder (`-p fp16 -e cpu`): 3-D query, key and value [batch, length, heads x head]
(the key and value made from the caches by repeat_kv), an additive attention bias
[batch, heads, new, total], no past inputs, no packing. The frontend writes it out as the
standard ops it means,

    q, k, v -> Reshape [0, 0, H, -1] -> Transpose (0, 2, 1, 3)
    p = Softmax(MatMul(q, Transpose(k, (0, 1, 3, 2))) * scale + bias, last axis)
    y = Reshape(Transpose(MatMul(p, v), (0, 2, 1, 3)), [0, 0, -1])

so that passes/cached_attention.py makes it the one Attention over the live prefix of the
caches that the other exports get. Other uses of the op are left as they are (and refused)."""
from __future__ import annotations

from typing import Optional

from .proto_facts import Facts, attr

MHA = "MultiHeadAttention"


def _plain(node) -> bool:
    """The form above: q, k, v given, no bias/padding mask/past/present, not causal."""
    ins = list(node.input) + [""] * (8 - len(node.input))
    return (node.domain == "com.microsoft" and node.op_type == MHA and all(ins[:3]) and
            not any(ins[3:5]) and not any(ins[6:8]) and len(node.output) == 1 and
            not attr(node, "unidirectional", 0) and attr(node, "num_heads", 0))


def _three_d(facts: Facts, node) -> bool:
    """q, k and v are known to be 3-D [batch, length, heads x head] (4-D BNSH or packed
    forms are left alone)."""
    return all(facts.rank(x) == 3 for x in node.input[:3])


def _scale(facts: Facts, node) -> Optional[float]:
    """The attribute, else 1 / sqrt(head) where the query's width is stated."""
    scale = attr(node, "scale", 0.0)
    if scale:
        return float(scale)
    wide, heads = facts.width(node.input[0]), attr(node, "num_heads")
    return (wide / heads) ** -0.5 if wide and wide % heads == 0 else None


def expand(proto):
    """proto with each plain MultiHeadAttention written out as standard ops (a copy; the
    model itself is left alone)."""
    from onnx import helper, numpy_helper
    import numpy as np
    facts = Facts(proto)   # read only where a plain node asks
    scales = {i: _scale(facts, n) for i, n in enumerate(proto.graph.node)
              if _plain(n) and _three_d(facts, n)}
    scales = {i: s for i, s in scales.items() if s}
    if not scales:
        return proto
    out = type(proto)()
    out.CopyFrom(proto)
    nodes = []
    for i, node in enumerate(out.graph.node):
        if i not in scales:
            nodes.append(node)
            continue
        heads, scale = attr(node, "num_heads"), scales[i]
        base = f"{node.name or f'mha{i}'}/expanded"

        def const(name, value):
            out.graph.initializer.append(numpy_helper.from_array(value, f"{base}/{name}"))
            return f"{base}/{name}"
        split = const("split_heads", np.asarray([0, 0, heads, -1], np.int64))
        merge = const("merge_heads", np.asarray([0, 0, -1], np.int64))
        factor = const("scale", np.asarray(scale, np.float32))

        def heads_first(x: str, tag: str) -> str:
            nodes.append(helper.make_node("Reshape", [x, split], [f"{base}/{tag}_split"]))
            nodes.append(helper.make_node("Transpose", [f"{base}/{tag}_split"], [f"{base}/{tag}4"],
                                          perm=[0, 2, 1, 3]))
            return f"{base}/{tag}4"
        q, kk, v = (heads_first(x, t) for x, t in zip(node.input[:3], "qkv"))
        nodes += [helper.make_node("Transpose", [kk], [f"{base}/kt"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", [q, f"{base}/kt"], [f"{base}/scores"]),
                  helper.make_node("Mul", [f"{base}/scores", factor], [f"{base}/scaled"])]
        last = f"{base}/scaled"
        if len(node.input) > 5 and node.input[5]:
            nodes.append(helper.make_node("Add", [last, node.input[5]], [f"{base}/biased"]))
            last = f"{base}/biased"
        nodes += [helper.make_node("Softmax", [last], [f"{base}/probs"], axis=3),
                  helper.make_node("MatMul", [f"{base}/probs", v], [f"{base}/heads"]),
                  helper.make_node("Transpose", [f"{base}/heads"], [f"{base}/rows"],
                                   perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"{base}/rows", merge], [node.output[0]],
                                   name=node.name)]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
