"""The decoder forms the LLM benchmarks (bench_llm.py, bench_llm_host.py) build, in one place."""
from __future__ import annotations

from rvvkit.zoo import llm as zoo_llm

# as `rvvkit quantize --weights intN --block 32 --accuracy 4 --embeddings` writes them: scales
# bfloat16-exact (stored in 16 bits), the token table quantized too (stored once when tied)
COUNT_FORMS = {"int4": dict(bits=4, block=32, accuracy=4, bf16_scales=True),
               "int8": dict(bits=8, block=32, accuracy=4, bf16_scales=True),
               # the same decoders written in float16 (the builder's GPU precision), quantized
               # alike: llama.cpp's peer is the same GGUF
               "int4_f16": dict(bits=4, block=32, accuracy=4, bf16_scales=True, half=True),
               "int8_f16": dict(bits=8, block=32, accuracy=4, bf16_scales=True, half=True)}


def count_model(cfg):
    """The decoder of `cfg` with its token table quantized like its weights."""
    from rvvkit.llm.quantize import quantize_model
    return quantize_model(zoo_llm.decoder(cfg), cfg.bits, cfg.block, embeddings=True)[0]
