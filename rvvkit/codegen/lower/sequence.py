"""C lowerings of ConvTranspose, Einsum, the recurrent layers (RNN, GRU, LSTM) and Attention.
Attached to the operator table on import (by codegen/lower/core.py)."""
from __future__ import annotations

from ...ir import Graph, Node
from ...ops.registry import lowering
from ..kernel import Lowered
from ..kernels.llm import attention as attk
from ..kernels.conv import transpose as convt
from ..kernels.math import einsum as einsumk
from ..kernels.gemm import packed as gemmk
from ..kernels.rnn import layers as rnnk


def _shape(g: Graph, name: str):
    return g.t(name).shape


@lowering("ConvTranspose")
def _conv_transpose(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    has_bias = len(n.inputs) > 2 and bool(n.inputs[2])
    fn = convt.conv_transpose_gemm if g.is_const(n.inputs[1]) else convt.conv_transpose
    return fn(_shape(g, n.inputs[0]), _shape(g, n.inputs[1]), _shape(g, n.outputs[0]),
              group=a["group"], strides=a["strides"], pads=a["pads"], dilations=a["dilations"],
              bias=has_bias)


@lowering("RNN", "GRU", "LSTM")
def _rnn(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    xs = _shape(g, n.inputs[0])
    seq, batch = (xs[0], xs[1]) if a["layout"] == 0 else (xs[1], xs[0])
    inputs = [bool(i) for i in (list(n.inputs) + [""] * 8)[:8]]
    outputs = [bool(o) for o in (list(n.outputs) + [""] * 3)[:3]]
    return rnnk.rnn(n.op, seq, batch, xs[2], a["hidden"], a["ndirs"],
                    a["direction"] == "reverse", a["layout"], a["acts"], a["clip"], a["lbr"],
                    inputs, outputs, g.is_const(n.inputs[1]) and g.is_const(n.inputs[2]))


def _as_matmul(terms, out: str, dims, shapes):
    """(nb, M, N, K, a_trans, b_trans) when a two-operand einsum is a batched matrix product
    with at most one letter each for m, n, k (batch letters leading, in the same order, no
    broadcasting), else None."""
    if len(terms) != 2:
        return None
    ta, tb = terms
    if len(set(ta)) != len(ta) or len(set(tb)) != len(tb):
        return None
    if any(tuple(s) != tuple(dims[c] for c in t) for t, s in zip(terms, shapes)):
        return None   # a broadcast (size-1) axis
    batch = "".join(c for c in out if c in ta and c in tb)
    ms = [c for c in ta if c not in tb]
    ns = [c for c in tb if c not in ta]
    ks = [c for c in ta if c in tb and c not in out]
    if len(ms) > 1 or len(ns) > 1 or len(ks) > 1 or any(c not in out for c in ms + ns):
        return None
    m, n, k = "".join(ms), "".join(ns), "".join(ks)
    if out != batch + m + n or ta[:len(batch)] != batch or tb[:len(batch)] != batch:
        return None
    a_rest, b_rest = ta[len(batch):], tb[len(batch):]
    if a_rest not in (m + k, k + m) or b_rest not in (k + n, n + k):
        return None
    size = (lambda s: dims[s] if s else 1)
    nb = 1
    for c in batch:
        nb *= dims[c]
    return nb, size(m), size(n), size(k), a_rest != m + k, b_rest != k + n


@lowering("Einsum")
def _einsum(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    shapes = [_shape(g, i) for i in n.inputs]
    mm = _as_matmul(a["terms"], a["out_term"], a["dims"], shapes)
    if mm is not None:
        nb, m, nn, k, at, bt = mm
        return gemmk.matmul_t(nb, m, nn, k, at, bt)
    return einsumk.einsum(a["terms"], a["out_term"], shapes, _shape(g, n.outputs[0]),
                          a["dims"])


@lowering("Attention")
def _attention(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    ins = list(n.inputs) + [""] * 7
    outs = list(n.outputs) + [""] * 4
    mask = ins[3]
    cfg = attk.Attn(dims=a["dims"], rank=len(_shape(g, ins[0])), scale=a["scale_val"],
                    softcap=a["softcap"], is_causal=bool(a["is_causal"]),
                    mask_shape=tuple(_shape(g, mask)) if mask else None,
                    mask_dtype=g.t(mask).dtype.name if mask else None, past=a["past"],
                    present=bool(outs[1]), window=tuple(a["window"]), nonpad=bool(ins[6]),
                    qk_mode=a["qk_mode"] if outs[3] else -1)
    sq, total = a["dims"][3:5]
    # GEMM form unless one head's score matrix would be a huge workspace (> 64 MiB), or one
    # queries read a cache of run-time live length (the direct form reads only the live keys)
    if sq * total > (16 << 20) or (cfg.nonpad and not cfg.present):
        return attk.attention(cfg)
    return attk.attention_gemm(cfg)
