"""C lowerings of the decoder blocks (semantics: rvvkit/ops/llm.py)."""
from __future__ import annotations

import math

from ..ir import Graph, Node
from ..ops.cache_write import CACHE_WRITE
from ..ops.gather_block_quantized import GBQ
from ..ops.registry import lowering, opt_input
from .kernel import Lowered
from .kernels.llm import cache_write, gather_bq, gqa, rmsnorm
from .kernels.nbits_f32 import matmul_nbits_f32
from .kernels.nbits_int8 import matmul_nbits_i8

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


@lowering(MS + "MatMulNBits")
def _matmul_nbits(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    rows = math.prod(g.t(n.inputs[0]).shape[:-1])
    if a["int8_act"]:
        return matmul_nbits_i8(rows, a["K"], a["N"], a["bits"], a["block_size"], a["zp_kind"],
                               bool(opt_input(n, 5)))
    return matmul_nbits_f32(rows, a["K"], a["N"], a["bits"], a["block_size"], a["zp_kind"],
                            bool(opt_input(n, 5)))


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


@lowering(GBQ)
def _gather_bq(n: Node, g: Graph) -> Lowered:
    a, idx = n.attrs, g.t(n.inputs[1])
    return gather_bq(idx.size, a["rows"], a["K"], a["bits"], a["block_size"], idx.dtype.name)
