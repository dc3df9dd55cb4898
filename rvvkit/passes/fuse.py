"""Fusion: a residual Add into the convolution that feeds it, and an activation into its
producer's epilogue. Both save one full pass over an activation tensor. Results are the
node's typed fields (`residual`, `act`, `fused`), read by the lowerings."""
from __future__ import annotations

from ..ir import Graph, Node
from ..ops import REGISTRY
from ..ops.activations import act_of


def _single_use(g: Graph, name: str, consumers) -> bool:
    return len(consumers.get(name, [])) == 1 and name not in g.outputs


def _absorb(into: Node, node: Node) -> None:
    """Record that `node` (and whatever it had absorbed) now computes inside `into`."""
    into.fused.append((node.op, node.name))
    into.fused.extend(node.fused)


def fuse_residual(g: Graph) -> None:
    for add in list(g.nodes):
        if add.op not in ("Add", "Sum") or len(add.inputs) != 2 or add.act is not None:
            continue
        producers, consumers = g.producers(), g.consumers()
        out_shape = g.t(add.outputs[0]).shape
        if any(g.t(i).shape != out_shape for i in add.inputs):
            continue
        cands = [(g.nodes.index(producers[i]), i) for i in add.inputs
                 if i in producers and producers[i].op == "Conv"
                 and producers[i].act is None and not producers[i].residual
                 and _single_use(g, i, consumers)]
        if not cands:
            continue
        _, via = max(cands)  # the later conv: extends the other operand's lifetime least
        conv = producers[via]
        other = add.inputs[1] if add.inputs[0] == via else add.inputs[0]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
        conv.inputs = [conv.inputs[0], conv.inputs[1], bias, other]
        conv.residual = True
        _absorb(conv, add)
        conv.outputs = [add.outputs[0]]
        # The conv moves to the Add's place: there both its inputs and the residual exist.
        g.nodes.remove(conv)
        g.nodes[g.nodes.index(add)] = conv


def fuse_activations(g: Graph) -> None:
    producers, consumers = g.producers(), g.consumers()
    for n in list(g.nodes):
        act = act_of(n)
        if act is None or g.is_const(n.inputs[0]):
            continue
        p = producers.get(n.inputs[0])
        if (p is None or not REGISTRY[p.op].act_epilogue or p.act is not None
                or not _single_use(g, n.inputs[0], consumers)):
            continue
        if g.t(p.outputs[0]).dtype != g.t(n.outputs[0]).dtype:
            continue
        p.act = act
        _absorb(p, n)
        p.outputs = [n.outputs[0]]
        g.remove_nodes([n])
        producers, consumers = g.producers(), g.consumers()
