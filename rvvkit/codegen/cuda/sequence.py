"""CUDA forms of the kernel kinds of the sequence, 3-D and transposed-convolution families:
their C bodies run by one GPU thread (serial.py); correct everywhere, slow on big tensors.
(The Einsum forms that are batched matrix products use the GEMM's "matmul_t": cuda/gemm.py.)"""
from __future__ import annotations

# imported for their declare_spec calls (the kinds' spec keys)
from ..kernels import attention, conv3d, conv_transpose, einsum, rnn  # noqa: F401
from .serial import serial_generator

serial_generator("conv_nd", "pool_nd", "conv_transpose", "rnn", "einsum", "attention")
