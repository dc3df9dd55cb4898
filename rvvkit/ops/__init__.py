"""The operator table. Importing this package registers every supported operator; importing
rvvkit.codegen.lower attaches the C lowerings to the same entries.

One module per family of operators (`nn`, `elementwise`, `movement`, `reduce`...), the activation
table (`activations*.py`), and two sub-packages: `quant/` (the integer operators of quantized
models) and `llm/` (decoder blocks, caches and 4/8-bit weights)."""
from . import (activations, activations_math, arith, elementwise, logic,  # noqa: F401
               movement, nn, norm, reduce, sequence, shape)  # (registration side effects)
from . import activations_modern  # noqa: F401,E402  (HardSwish, Gelu, SiLU... rows)
from . import grid  # noqa: F401,E402  (GridSample)
from . import pool_extra, transformer_extra  # noqa: F401,E402  (LpPool, Det, SwiGLU, RoPE)
from . import quant  # noqa: F401,E402  (integer conv/matmul, Q/DQ, QLinear*, float islands)
from . import llm  # noqa: F401,E402  (RMSNorm, MatMulNBits, GQA, cache writes, 4/8-bit tables)
from .registry import REGISTRY, OpDef

__all__ = ["REGISTRY", "OpDef"]
