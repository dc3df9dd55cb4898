"""The operator table. Importing this package registers every supported operator; importing
rvvkit.codegen.lower attaches the C lowerings to the same entries."""
from . import (activations, activations_math, arith, elementwise, logic,  # noqa: F401
               movement, nn, norm, reduce, sequence, shape)  # (registration side effects)
from . import activations_modern  # noqa: F401,E402  (HardSwish, Gelu, SiLU... rows)
from . import grid  # noqa: F401,E402  (GridSample)
from . import pool_extra, transformer_extra  # noqa: F401,E402  (LpPool, Det, SwiGLU, RoPE)
from . import quant, quant_internal  # noqa: F401,E402  (integer conv/matmul)
from . import quant_linear  # noqa: F401,E402  (Q/DQ and the QLinear element-wise family)
from . import quant_island  # noqa: F401,E402  (DQ + DQ -> Q float islands in one pass)
from . import llm  # noqa: F401,E402  (RMSNorm, MatMulNBits, GroupQueryAttention)
from . import cache_write  # noqa: F401,E402  (caches that grew by Concat, kept in place)
from . import gather_block_quantized  # noqa: F401,E402  (4/8-bit token embeddings)
from .registry import REGISTRY, OpDef

__all__ = ["REGISTRY", "OpDef"]
