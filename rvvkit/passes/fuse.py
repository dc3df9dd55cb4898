"""Fusion: a residual Add into the convolution that feeds it, an activation into its
producer's epilogue, a bias Add into the MatMul before it (as a Gemm). Each saves one full
pass over an activation tensor. Results are the node's typed fields (`residual`, `act`,
`fused`), read by the lowerings."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..ir import Graph, Node, Tensor
from ..ops import REGISTRY
from ..ops.activations import act_of
from ..ops.elementwise import CHANNEL_AFFINE


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


# The packed GEMM's largest k-block (codegen/kernels/gemm/tiling.py KC_MAX; passes sit below
# codegen, so tests/unit/passes/test_matmul_bias.py holds the two equal)
KC_MAX = 640


def _bias_of(g: Graph, name: str, n: int) -> Optional[np.ndarray]:
    """A float constant of n values along the last axis only ([n], [1, n], [1, 1, n], ...)."""
    if not g.is_const(name) or g.t(name).dtype != np.float32:
        return None
    shape = g.t(name).shape
    ok = len(shape) >= 1 and shape[-1] == n and all(d == 1 for d in shape[:-1])
    return np.asarray(g.const(name), np.float32).reshape(n) if ok else None


def _addends(g: Graph, add: Node):
    """(product, addend) readings of an Add; a 2-D ChannelAffine (what to_affine made of a
    bias Add on [M, N]) of unit scale reads as its input plus its shift."""
    if add.op == "Add":
        return [tuple(add.inputs), tuple(add.inputs[::-1])]
    x, scale, shift = add.inputs
    ones = g.is_const(scale) and bool(np.all(np.asarray(g.const(scale)) == 1.0))
    return [(x, shift)] if ones and len(g.t(x).shape) == 2 else []


def _reshaped(g: Graph, src: str, shape: Tuple[int, ...], out: Optional[str] = None) -> Node:
    """A Reshape of `src` to `shape` (a new output tensor unless `out` is given)."""
    target = g.fresh_name(f"{src}/shape")
    g.add_const(target, np.array(shape, np.int64))
    if out is None:
        out = g.fresh_name(f"{src}/rows")
        g.add_tensor(Tensor(out, tuple(shape), g.t(src).dtype))
    return Node("Reshape", out, [src, target], [out])


def fuse_matmul_bias(g: Graph) -> None:
    """MatMul(x [..., M, K], W [K, N]) + b [N], K over several k-blocks -> Gemm over x's rows
    (x's leading axes flattened into M by Reshapes, which cost nothing) adding b, and the Add's
    activation, in its epilogue: the projection then writes y once instead of writing it and
    passing over it again (ViT-B's projections and MLP, K = 768 and 3072). Runs after
    fuse_activations, so a GELU already fused into the Add moves into the Gemm with it."""
    producers, consumers = g.producers(), g.consumers()
    for add in list(g.nodes):
        if add.op not in ("Add", CHANNEL_AFFINE) or len(add.inputs) != 2 + (add.op != "Add") \
                or add.residual:
            continue
        for via, other in _addends(g, add):
            mm = producers.get(via)
            if mm is None or mm.op != "MatMul" or mm.act is not None or \
                    not _single_use(g, via, consumers) or not g.is_const(mm.inputs[1]):
                continue
            x, w, y = (g.t(t).shape for t in (mm.inputs[0], mm.inputs[1], add.outputs[0]))
            # only products of several k-blocks: one of a single k-block stores its full tiles
            # straight into y (gemm/emit.py), which an addend in its epilogue would forgo
            # (0.4 % more modelled K1 time for a 64 x 256 x 512 projection, neutral on x86)
            bias = _bias_of(g, other, w[-1]) if len(w) == 2 and w[0] > KC_MAX else None
            if bias is None or len(x) < 2 or g.is_const(mm.inputs[0]) or \
                    y != g.t(via).shape or (len(x) > 2 and add.outputs[0] in g.outputs):
                continue
            _to_gemm(g, mm, add, bias, x, w)
            producers, consumers = g.producers(), g.consumers()
            break


def _to_gemm(g: Graph, mm: Node, add: Node, bias: np.ndarray, x, w) -> None:
    b = g.fresh_name(f"{mm.name}/bias")
    g.add_const(b, bias)
    a, y = mm.inputs[0], add.outputs[0]
    before, after = [], []
    if len(x) > 2:   # x's rows flattened in, y's shape restored: both Reshapes are aliases
        before = [_reshaped(g, a, (int(np.prod(x[:-1])), x[-1]))]
        a = before[0].outputs[0]
        rows = g.add_tensor(Tensor(g.fresh_name(f"{mm.name}/rows"), (g.t(a).shape[0], w[1]),
                                   np.dtype(np.float32))).name
        after = [_reshaped(g, rows, g.t(y).shape, out=y)]
        y = rows
    gemm = Node("Gemm", mm.name, [a, mm.inputs[1], b], [y], {}, act=add.act,
                fused=mm.fused + [(add.op, add.name)] + add.fused)
    REGISTRY["Gemm"].infer(gemm, g)
    at = g.nodes.index(add)
    g.nodes[at:at + 1] = before + [gemm] + after
    g.remove_nodes([mm])
