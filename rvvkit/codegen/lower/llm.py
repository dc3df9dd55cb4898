"""C lowerings of the decoder blocks (semantics: rvvkit/ops/llm/blocks.py)."""
from __future__ import annotations

import math

import numpy as np

from ...ir import Graph, Node
from ...ops.llm.cache_write import CACHE_WRITE
from ...ops.llm.gather_block_quantized import GBQ
from ...ops.registry import lowering, opt_input
from ..kernel import Lowered
from ..kernels.llm.gather_bq import gather_bq
from ..kernels.llm.blocks import cache_write, gqa, rmsnorm
from ..kernels.llm.nbits_f32 import matmul_nbits_f32
from ..kernels.llm.nbits_int8 import matmul_nbits_i8
from ..kernels.llm.nbits_layout import scale_kind

MS = "com.microsoft."


@lowering("SimplifiedLayerNormalization")
def _sln(n: Node, g: Graph) -> Lowered:
    shape = g.t(n.inputs[0]).shape
    return rmsnorm(math.prod(shape[:-1]), shape[-1], n.attrs["epsilon"], False, False, False)


@lowering(MS + "SkipSimplifiedLayerNormalization")
def _skip_sln(n: Node, g: Graph) -> Lowered:
    shape = g.t(n.inputs[0]).shape
    sum_out = len(n.outputs) > 3 and bool(n.outputs[3])
    return rmsnorm(math.prod(shape[:-1]), shape[-1], n.attrs["epsilon"], True,
                   bool(opt_input(n, 3)), sum_out)


def _scales(n: Node, g: Graph) -> str:
    """How the scales (input 2) are stored: 16 bits when they are constants that are all
    bfloat16 or all float16 values (nbits_layout.scale_kind)."""
    return scale_kind(g.const(n.inputs[2])) if g.is_const(n.inputs[2]) else "float32"


@lowering(MS + "MatMulNBits")
def _matmul_nbits(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    rows = math.prod(g.t(n.inputs[0]).shape[:-1])
    kernel = matmul_nbits_i8 if a["int8_act"] else matmul_nbits_f32
    return kernel(rows, a["K"], a["N"], a["bits"], a["block_size"], a["zp_kind"],
                  bool(opt_input(n, 5)), _scales(n, g))


@lowering(MS + "GroupQueryAttention")
def _gqa(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    q = g.t(n.inputs[0]).shape
    cos = g.t(n.inputs[7]).shape if a["rotary"] else (0, 0)
    return gqa(q[0], q[1], a["heads"], a["kv_heads"], a["head"], a["max_seq"],
               bool(a["rotary"]), cos[1], bool(a["interleaved"]), a["scale"],
               bool(a.get("kv_state")), cos[0])


@lowering(CACHE_WRITE)
def _cache_write(n: Node, g: Graph) -> Lowered:
    b, h, max_seq, head = g.t(n.inputs[0]).shape
    return cache_write(b, h, max_seq, head, n.attrs["seq"])


def _same_const(g: Graph, x: str, y: str) -> bool:
    if x == y:
        return True
    a, b = g.const(x), g.const(y)
    return a.dtype == b.dtype and a.size == b.size and np.array_equal(a.reshape(-1),
                                                                      b.reshape(-1))


def _shares_a_head(n: Node, g: Graph) -> bool:
    """A MatMulNBits of `g` multiplies by the table `n` gathers from (an LM head tied to the
    embedding, quantized alike): the same codes and scales, no zero points."""
    a = n.attrs
    for m in g.nodes:
        b = m.attrs
        if m.op == MS + "MatMulNBits" and (b["N"], b["K"], b["bits"], b["block_size"]) == \
                (a["rows"], a["K"], a["bits"], a["block_size"]) and not opt_input(m, 3) and \
                all(g.is_const(m.inputs[i]) for i in (1, 2)) and \
                _same_const(g, m.inputs[1], n.inputs[0]) and \
                _same_const(g, m.inputs[2], n.inputs[2]):
            return True
    return False


def gather_layout(n: Node, g: Graph) -> str:
    """How a GatherBlockQuantized's table is stored: as the tied LM head reads it, or by
    rows. A graph that lost its head (a decoder's prefill plan) keeps what the full graph
    chose, pinned in attrs["layout"], so that both plans share one table."""
    return n.attrs.get("layout") or ("columns" if _shares_a_head(n, g) else "rows")


@lowering(GBQ)
def _gather_bq(n: Node, g: Graph) -> Lowered:
    a, idx = n.attrs, g.t(n.inputs[1])
    layout = gather_layout(n, g)
    return gather_bq(idx.size, a["rows"], a["K"], a["bits"], a["block_size"], idx.dtype.name,
                     layout, _scales(n, g))
