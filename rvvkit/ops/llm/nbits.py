"""Block-wise weight-only quantization in onnxruntime's MatMulNBits layout (com.microsoft).

One place for the format, read by the operator's semantics (ops/llm/blocks.py), the test-model
generator (zoo/llm.py) and `rvvkit quantize`:
- a weight W [K, N] (MatMul's B) is stored transposed, column n of W as row n of B;
- each row is cut into blocks of `block` values along K (the last block zero-padded);
- B [N, blocks, block * bits / 8] uint8 holds the codes, two per byte at 4 bits (the element
  of even index in the low nibble), one per byte at 8 bits;
- scales [N, blocks] float; zero points either packed like B ([N, ceil(blocks * bits / 8)]
  uint8) or absent, meaning 2^(bits-1);
- w[k, n] = (code - zero_point) * scale of (n, k // block).

Scales may be rounded up to bfloat16 values (`bf16_scales`): still float32 in the file, so
onnxruntime reads them unchanged, but exact in 16 bits, which the artifact then stores (4.5
instead of 5 bits a weight at block 32, as llama.cpp's Q4_0)."""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np


def blocks_of(k: int, block: int) -> int:
    return -(-k // block)


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """[..., n] uint8 codes (< 2^bits) -> [..., n * bits / 8] bytes (n even at 4 bits)."""
    codes = codes.astype(np.uint8)
    if bits == 8:
        return codes
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def unpack_codes(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The inverse of pack_codes, keeping the first `count` codes of the last axis."""
    packed = np.asarray(packed, np.uint8)
    if bits == 8:
        return packed[..., :count]
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), np.uint8)
    out[..., 0::2] = packed & 0x0F
    out[..., 1::2] = packed >> 4
    return out[..., :count]


def bf16_ceil(x: np.ndarray) -> np.ndarray:
    """Positive finite float32 values rounded up to the nearest bfloat16 value (a scale rounded
    up keeps every code of its block in range)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    up = np.where(u & 0xFFFF, (u + 0x10000) & 0xFFFF0000, u).astype(np.uint32)
    return up.view(np.float32)


def is_bf16(x: np.ndarray) -> bool:
    """Every value is exactly a bfloat16 (the low 16 bits of its float32 are zero)."""
    x = np.asarray(x)
    return x.dtype == np.float32 and x.size > 0 and \
        not (np.ascontiguousarray(x).view(np.uint32) & 0xFFFF).any()


def is_f16(x: np.ndarray) -> bool:
    """Every value is exactly a finite float16: what a float16 model's scales are after the
    frontend widened them to float32."""
    x = np.asarray(x)
    if x.dtype != np.float32 or x.size == 0:
        return False
    with np.errstate(over="ignore"):
        exact = np.array_equal(x.astype(np.float16).astype(np.float32), x)
    return exact and bool(np.isfinite(x).all())


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of bfloat16-exact float32 values."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def quantize(w: np.ndarray, bits: int = 4, block: int = 32, zero_points: bool = False,
             bf16_scales: bool = False) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """Quantize W [K, N] float to (B, scales, packed zero points or None); `bf16_scales`:
    each scale rounded up to a bfloat16 value before the codes are taken."""
    if bits not in (4, 8) or block < 16 or block & (block - 1):
        raise ValueError(f"bits {bits} / block {block}: 4 or 8 bits, a power-of-two block >= 16")
    w = np.asarray(w, np.float32)
    k, n = w.shape
    nb = blocks_of(k, block)
    rows = np.zeros((n, nb * block), np.float32)
    rows[:, :k] = w.T
    rows = rows.reshape(n, nb, block)
    top = (1 << bits) - 1
    if zero_points:
        lo = np.minimum(rows.min(axis=2), 0.0)
        hi = np.maximum(rows.max(axis=2), 0.0)
        scale = np.where(hi > lo, (hi - lo) / top, 1.0).astype(np.float32)
        zp = np.clip(np.rint(-lo / scale), 0, top).astype(np.uint8)
    else:
        amax = np.abs(rows).max(axis=2)
        half = 1 << (bits - 1)
        scale = np.where(amax > 0, amax / (half - 0.5 if bits == 4 else half - 1), 1.0)
        scale = scale.astype(np.float32)
        zp = np.full((n, nb), half, np.uint8)
    if bf16_scales:
        scale = bf16_ceil(scale)
        if zero_points:
            zp = np.clip(np.rint(-lo / scale), 0, top).astype(np.uint8)
    codes = np.clip(np.rint(rows / scale[:, :, None]) + zp[:, :, None], 0, top)
    b = pack_codes(codes.astype(np.uint8), bits)
    packed_zp = None
    if zero_points:
        pad = (-nb) % (8 // bits) if bits == 4 else 0
        packed_zp = pack_codes(np.concatenate([zp, np.zeros((n, pad), np.uint8)], 1), bits)
    return b, scale, packed_zp


def zero_points_of(zero_points: Optional[np.ndarray], n: int, nb: int, bits: int
                   ) -> np.ndarray:
    """The zero points as float [N, blocks]: packed uint8, float per block, or None (the
    default 2^(bits-1))."""
    if zero_points is None:
        return np.full((n, nb), float(1 << (bits - 1)), np.float32)
    z = np.asarray(zero_points)
    if z.dtype == np.uint8:
        return unpack_codes(z.reshape(n, -1), bits, nb).astype(np.float32)
    return z.astype(np.float32).reshape(n, nb)


def dequantize(b: np.ndarray, scales: np.ndarray, zero_points: Optional[np.ndarray],
               k: int, n: int, bits: int, block: int) -> np.ndarray:
    """W [K, N] float32 from MatMulNBits' B, scales and zero points (packed uint8, float per
    block, or None)."""
    nb = blocks_of(k, block)
    codes = unpack_codes(np.asarray(b).reshape(n, nb, -1), bits, block).astype(np.float32)
    scale = np.asarray(scales, np.float32).reshape(n, nb)
    zp = zero_points_of(zero_points, n, nb, bits)
    w = (codes - zp[:, :, None]) * scale[:, :, None]
    return np.ascontiguousarray(w.reshape(n, nb * block)[:, :k].T)


def matmul_int8_act(a: np.ndarray, b: np.ndarray, scales: np.ndarray,
                    zero_points: Optional[np.ndarray], k: int, n: int, bits: int,
                    block: int) -> np.ndarray:
    """A [.., K] @ W as onnxruntime computes it at accuracy_level 4: each block of each row
    of A quantized to int8 (scale amax / 127; as MLAS, the values times 127 / amax rounded to
    nearest even), integer sums per block, then scaled."""
    a = np.asarray(a, np.float32)
    nb = blocks_of(k, block)
    rows = np.zeros((int(np.prod(a.shape[:-1])), nb * block), np.float32)
    rows[:, :k] = a.reshape(-1, k)
    rows = rows.reshape(-1, nb, block)
    amax = np.abs(rows).max(axis=2)
    sa = amax / np.float32(127)
    inv = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0)
    q = np.clip(np.rint(rows * inv.astype(np.float32)[:, :, None]), -128, 127)
    codes = unpack_codes(np.asarray(b).reshape(n, nb, -1), bits, block).astype(np.float64)
    zp = zero_points_of(zero_points, n, nb, bits).astype(np.float64)
    dot = np.einsum("mbk,nbk->mnb", q, codes - zp[:, :, None])
    y = (dot * sa[:, None, :] * np.asarray(scales, np.float64).reshape(n, nb)[None]).sum(-1)
    return y.astype(np.float32).reshape(a.shape[:-1] + (n,))
