"""Fusion: a residual Add into the convolution that feeds it, and an activation into its
producer's epilogue. Both save one full pass over an activation tensor."""
from __future__ import annotations

from ..codegen.act import Act
from ..ir import Graph, Node

# Ops whose lowering takes an activation epilogue (MatMul's does not).
ACT_PRODUCERS = ("Conv", "Gemm", "ChannelAffine", "Add", "Sub", "Mul", "Div", "Sum")


def activation_of(g: Graph, n: Node):
    if n.op == "Relu":
        return Act("relu")
    if n.op == "Clip":
        lo, hi = n.attrs["bounds"]
        return Act("relu") if (lo == 0 and hi == float("inf")) else Act("clip", (lo, hi))
    if n.op == "LeakyRelu":
        return Act("leaky_relu", (float(n.attrs.get("alpha", 0.01)),))
    if n.op == "Sigmoid":
        return Act("sigmoid")
    if n.op == "Tanh":
        return Act("tanh")
    return None


def _single_use(g: Graph, name: str, consumers) -> bool:
    return len(consumers.get(name, [])) == 1 and name not in g.outputs


def fuse_residual(g: Graph) -> None:
    for add in list(g.nodes):
        if add.op not in ("Add", "Sum") or len(add.inputs) != 2 or add.attrs.get("_act"):
            continue
        producers, consumers = g.producers(), g.consumers()
        out_shape = g.t(add.outputs[0]).shape
        if any(g.t(i).shape != out_shape for i in add.inputs):
            continue
        cands = [(g.nodes.index(producers[i]), i) for i in add.inputs
                 if i in producers and producers[i].op == "Conv"
                 and not producers[i].attrs.get("_act") and not producers[i].attrs.get("_residual")
                 and _single_use(g, i, consumers)]
        if not cands:
            continue
        _, via = max(cands)  # the later conv: extends the other operand's lifetime least
        conv = producers[via]
        other = add.inputs[1] if add.inputs[0] == via else add.inputs[0]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
        conv.inputs = [conv.inputs[0], conv.inputs[1], bias, other]
        conv.attrs["_residual"] = True
        conv.outputs = [add.outputs[0]]
        # The conv moves to the Add's place: there both its inputs and the residual exist.
        g.nodes.remove(conv)
        g.nodes[g.nodes.index(add)] = conv


def fuse_activations(g: Graph) -> None:
    producers, consumers = g.producers(), g.consumers()
    for n in list(g.nodes):
        act = activation_of(g, n)
        if act is None or g.is_const(n.inputs[0]):
            continue
        p = producers.get(n.inputs[0])
        if (p is None or p.op not in ACT_PRODUCERS or p.attrs.get("_act")
                or not _single_use(g, n.inputs[0], consumers)):
            continue
        if g.t(p.outputs[0]).dtype != g.t(n.outputs[0]).dtype:
            continue
        p.attrs["_act"] = act
        p.outputs = [n.outputs[0]]
        g.remove_nodes([n])
        producers, consumers = g.producers(), g.consumers()
