"""The operators of language models as onnxruntime-genai and the exporters write them.

- `blocks.py`: SimplifiedLayerNormalization (RMSNorm), SkipSimplifiedLayerNormalization,
  MatMulNBits and GroupQueryAttention (com.microsoft);
- `cache_write.py`: rvvkit.CacheWrite, a key/value cache grown by Concat kept in place;
- `gather_block_quantized.py`: com.microsoft.GatherBlockQuantized, 4/8-bit token embeddings;
- `nbits.py`: the block-wise 4/8-bit weight format they share with `rvvkit quantize` and the
  kernels (rvvkit/codegen/kernels/llm/)."""
from . import blocks  # noqa: F401  (registration side effects)
from . import cache_write  # noqa: F401
from . import gather_block_quantized  # noqa: F401
