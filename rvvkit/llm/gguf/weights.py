"""GGUF tensors as the weights rvvkit's kernels take, without re-quantizing.

ggml stores a weight of a linear layer as [N rows of K]: row n holds output n's K inputs, cut
into blocks along K. That is MatMulNBits' B (rvvkit/ops/llm/nbits.py), so each block format
maps onto it by reordering codes and widening scales, value for value:
- Q4_0: 32 codes of 4 bits, a float16 scale d; w = (q - 8) d. Codes j and j + 16 share byte j
  (j in the low nibble): MatMulNBits wants codes 2i and 2i + 1 in byte i.
- Q4_1: as Q4_0 with a float16 offset m: w = q d + m, a float zero point -m / d.
- Q8_0: 32 signed bytes, a float16 d; w = q d: the unsigned code q + 128 with zero point 128.
- Q5_0: Q4_0's nibbles plus a 32-bit word of fifth bits (bit j for code j), w = (q - 16) d:
  8-bit codes q + 112 (zero point 128). Q5_1: with an offset m, w = q d + m: 8-bit codes q
  with the float zero point -m / d.
- Q6_K: super-blocks of 256 in 16 blocks of 16 with an int8 scale each, a float16 d;
  w = d scale (q - 32), q of 6 bits: 8-bit codes q + 96 (zero point 128) in blocks of 16.
- Q4_K: super-blocks of 256 in 8 blocks of 32 with 6-bit scales and offsets, float16 d and
  dmin; w = d sc q - dmin m: 4-bit codes with the scale d sc and the float zero point
  dmin m / (d sc).
- F32, F16, BF16: float weights (float32 in the artifact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ...errors import ModelError
from ...ops.llm import nbits

# bytes of one block and the values it holds, per ggml type rvvkit converts
BLOCKS = {"Q4_0": (18, 32), "Q4_1": (20, 32), "Q5_0": (22, 32), "Q5_1": (24, 32),
          "Q8_0": (34, 32), "Q4_K": (144, 256), "Q6_K": (210, 256)}
FLOATS = ("F32", "F16", "BF16")
SUPPORTED = tuple(BLOCKS) + FLOATS


@dataclass
class Blocked:
    """Rows of a block-quantized weight in MatMulNBits' terms, codes unpacked."""
    bits: int
    block: int
    codes: np.ndarray                   # uint8 [rows, blocks, block]
    scales: np.ndarray                  # float32 [rows, blocks]
    zeros: Optional[np.ndarray] = None  # float32 [rows, blocks]; None: 2^(bits-1)

    def packed(self) -> np.ndarray:
        """B [rows, blocks, block * bits / 8]."""
        return nbits.pack_codes(self.codes, self.bits)

    def dequantized(self) -> np.ndarray:
        zp = float(1 << (self.bits - 1)) if self.zeros is None else self.zeros[..., None]
        w = (self.codes.astype(np.float32) - zp) * self.scales[..., None]
        return w.reshape(len(self.codes), -1).astype(np.float32)


def _f16(raw: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(raw).view(np.float16).astype(np.float32)[..., 0]


def _low_high(qs: np.ndarray) -> np.ndarray:
    """Bytes [.., 16] holding codes j (low nibble) and j + 16 (high) -> codes [.., 32]."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


def _q4_0(b: np.ndarray) -> Blocked:
    return Blocked(4, 32, _low_high(b[..., 2:]), _f16(b[..., 0:2]))


def _q4_1(b: np.ndarray) -> Blocked:
    d, m = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    with np.errstate(divide="ignore", invalid="ignore"):
        zeros = np.where(d != 0, -m / d, 0.0).astype(np.float32)
    d, zeros = _offset_only(d, zeros, m)
    return Blocked(4, 32, _low_high(b[..., 4:]), d, zeros)


def _five_bits(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Codes [.., 32] of 5 bits: qs's nibbles (as Q4_0's) and bit j of the little-endian
    32-bit word qh [.., 4] as code j's fifth."""
    word = np.ascontiguousarray(qh).view("<u4")           # [.., 1]
    high = (word >> np.arange(32, dtype=np.uint32)) & 1     # [.., 32]
    return _low_high(qs) | (high.astype(np.uint8) << 4)


def _q5_0(b: np.ndarray) -> Blocked:
    return Blocked(8, 32, _five_bits(b[..., 2:6], b[..., 6:]) + 112, _f16(b[..., 0:2]))


def _q5_1(b: np.ndarray) -> Blocked:
    d, m = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    with np.errstate(divide="ignore", invalid="ignore"):
        zeros = np.where(d != 0, -m / d, 0.0).astype(np.float32)
    d, zeros = _offset_only(d, zeros, m)
    # 8-bit codes are read less 128 by the kernels: a zero point in the code's own terms
    return Blocked(8, 32, _five_bits(b[..., 4:8], b[..., 8:]), d, zeros)


def _q8_0(b: np.ndarray) -> Blocked:
    codes = (b[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return Blocked(8, 32, codes, _f16(b[..., 0:2]))


def _q6_k(b: np.ndarray) -> Blocked:
    rows, supers = b.shape[:2]
    ql, qh = b[..., 0:128], b[..., 128:192]
    scales, d = b[..., 192:208].view(np.int8).astype(np.float32), _f16(b[..., 208:210])
    q = np.empty((rows, supers, 256), np.uint8)
    for half in range(2):          # each half of 128 values: 64 bytes of ql, 32 of qh
        low = ql[..., 64 * half:64 * half + 64]
        high = qh[..., 32 * half:32 * half + 32]
        for quarter in range(4):   # 32 values: a nibble of 32 ql bytes, 2 bits of each qh
            nib = low[..., 32 * (quarter & 1):32 * (quarter & 1) + 32]
            nib = (nib & 0x0F) if quarter < 2 else (nib >> 4)
            top = (high >> (2 * quarter)) & 0x03
            at = 128 * half + 32 * quarter
            q[..., at:at + 32] = nib | (top << 4)
    codes = (q + 96).reshape(rows, supers * 16, 16)
    scale = (d[..., None] * scales).reshape(rows, supers * 16)
    return Blocked(8, 16, codes, scale.astype(np.float32))


def _q4_k_scales(s: np.ndarray):
    """12 bytes [.., 12] -> (scales, offsets) [.., 8] of 6 bits each."""
    lo, mid, hi = s[..., 0:4], s[..., 4:8], s[..., 8:12]
    sc = np.concatenate([lo & 0x3F, (hi & 0x0F) | ((lo >> 6) << 4)], axis=-1)
    mn = np.concatenate([mid & 0x3F, (hi >> 4) | ((mid >> 6) << 4)], axis=-1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _q4_k(b: np.ndarray) -> Blocked:
    rows, supers = b.shape[:2]
    d, dmin = _f16(b[..., 0:2]), _f16(b[..., 2:4])
    sc, mn = _q4_k_scales(b[..., 4:16])
    qs = b[..., 16:144].reshape(rows, supers, 4, 32)   # 4 runs of 64 values, 32 bytes each
    codes = np.stack([qs & 0x0F, qs >> 4], axis=3).reshape(rows, supers * 8, 32)
    scale = (d[..., None] * sc).reshape(rows, -1)
    offset = (dmin[..., None] * mn).reshape(rows, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        zeros = np.where(scale != 0, offset / scale, 0.0).astype(np.float32)
    scale, zeros = _offset_only(scale.astype(np.float32), zeros, -offset)
    return Blocked(4, 32, codes, scale, zeros)


def _offset_only(scale: np.ndarray, zeros: np.ndarray, value: np.ndarray):
    """Blocks whose scale is 0 but whose offset is not hold one value for every code: a
    scale 2^-24 of that value's size with the zero point that lands on it (codes up to 15 then
    move it by < 1e-6 of itself)."""
    lost = (scale == 0) & (value != 0)
    if lost.any():
        tiny = (np.abs(value) * 2.0 ** -24).astype(np.float32)
        scale = np.where(lost, tiny, scale).astype(np.float32)
        zeros = np.where(lost, -value / np.where(lost, tiny, 1), zeros).astype(np.float32)
    return scale, zeros


_CONVERT = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0,
            "Q4_K": _q4_k, "Q6_K": _q6_k}


def blocked(kind: str, shape, data, name: str = "") -> Blocked:
    """A block-quantized GGUF tensor [rows, K] in MatMulNBits' terms."""
    size, count = BLOCKS[kind]
    rows, k = shape
    if k % count:
        raise ModelError(f"tensor {name}: {k} columns are not whole {kind} blocks of {count}")
    raw = np.ascontiguousarray(data).view(np.uint8).reshape(rows, k // count, size)
    return _CONVERT[kind](raw)


def floats(kind: str, shape, data) -> np.ndarray:
    """A float GGUF tensor as float32 [rows, columns]."""
    raw = np.ascontiguousarray(data).view(np.uint8).reshape(shape[0], -1)
    if kind == "F32":
        return raw.view(np.float32).copy()
    if kind == "F16":
        return raw.view(np.float16).astype(np.float32)
    return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
