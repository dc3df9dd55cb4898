"""CUDA forms of the integer convolution and matrix product (kernels/qconv.py, qmatmul.py)."""
from __future__ import annotations

from .serial import serial_generator

serial_generator("qconv", "qmatmul")
