"""Graph rewrites on the IR, run in a fixed order by `optimize`: constant folding, affine and
BatchNorm folding, activation and residual fusion, pattern fusion (LayerNorm, GELU, SiLU:
patterns.py; unmasked attention: attention.py), quantized graphs to integer ops (`qdq.py`,
`quant.py`), cache rewrites for decoders (`kv_cache.py`, `cached_attention.py`), dead-code
removal."""
from __future__ import annotations

from ..ir import Graph
from .attention import fuse_attention
from .dce import remove_dead
from .fold import fold_constants
from .fuse import fuse_activations, fuse_matmul_bias, fuse_residual
from .patterns import fuse_patterns
from .quant import lower_quantized
from .simplify import canonical_gemm, merge_affines, remove_identities, to_affine


def optimize(g: Graph, level: int = 2) -> Graph:
    """level 0: only what lowering needs; 1: + affine folding; 2: + fusion."""
    lower_quantized(g)   # first: it reads DequantizeLinear groups before anything fuses them
    fold_constants(g)
    remove_identities(g)
    canonical_gemm(g)
    if level >= 1:   # before to_affine: patterns see Mul/Add/Div by constants as written
        fuse_patterns(g)
        fuse_attention(g)
    to_affine(g)
    if level >= 1:
        merge_affines(g)
    if level >= 2:
        fuse_residual(g)
        fuse_activations(g)
        fuse_matmul_bias(g)
    remove_dead(g)
    return g


__all__ = ["optimize", "fold_constants", "remove_dead"]
