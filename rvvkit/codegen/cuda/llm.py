"""CUDA forms of the decoder kernels (codegen/kernels/llm/blocks.py): RMS normalisation and
MatMulNBits run one GPU thread per part of the C kernel (rows; groups of output columns);
GroupQueryAttention, the cache writes and the quantized gathers, which check their run-time
lengths and indices, run serially for now."""
from __future__ import annotations

from .serial import parts_generator, serial_generator

parts_generator("rmsnorm", "matmul_nbits_f32", "matmul_nbits_i8")
serial_generator("gqa", "cache_write", "gather_bq")
