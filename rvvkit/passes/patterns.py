"""(being written) Pattern fusion: decomposed LayerNorm, GELU from Erf, SiLU, HardSwish."""
from __future__ import annotations

from ..ir import Graph


def fuse_patterns(g: Graph) -> Graph:
    return g
