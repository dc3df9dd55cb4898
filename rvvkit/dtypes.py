"""The tensor element types rvvkit computes with, as one table: numpy dtype, C type, the ONNX
TensorProto code (what the plan ABI reports per input/output) and the .npy descriptor the C
runner reads and writes. Every other module asks here instead of spelling a type itself.

Buffers (arena, weights blob) are counted in 4-byte words: a float32 takes one, an int64 two,
two float16s, four bools or int8s share one. Every tensor starts on a 64-byte boundary, so a
pointer cast to the tensor's C type is always aligned.

float16 and float64 are storage types: only Cast and the graph's I/O see them
(frontend/stored_floats.py computes every other operation on them in float32); kernels see
float16 as its IEEE bits (rvk_half: C has no portable half)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str       # numpy name, as in the artifact's meta
    ctype: str      # C element type of kernel parameters
    onnx: int       # onnx.TensorProto.DataType code
    npy: str        # numpy .npy descriptor (little-endian)
    size: int       # bytes per element

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.name)


TABLE: Dict[str, DType] = {d.name: d for d in (
    DType("float32", "float", 1, "<f4", 4),
    DType("float16", "rvk_half", 10, "<f2", 2),   # stored and moved; computed as float32
    DType("float64", "double", 11, "<f8", 8),      # likewise (frontend/stored_floats.py)
    DType("int64", "int64_t", 7, "<i8", 8),
    DType("int32", "int32_t", 6, "<i4", 4),
    DType("int8", "int8_t", 3, "|i1", 1),
    DType("uint8", "uint8_t", 2, "|u1", 1),
    DType("bool", "rvk_bool", 9, "|b1", 1),
)}
FLOAT32 = TABLE["float32"]
NAMES = tuple(TABLE)
# what kernels compute on; the stored-only types reach nothing but Cast and the graph's I/O
STORED_ONLY = ("float16", "float64")
COMPUTED = tuple(n for n in NAMES if n not in STORED_ONLY)


def of(dtype) -> DType:
    """The table row of a numpy dtype (or its name); KeyError for an unsupported one."""
    return TABLE[np.dtype(dtype).name]


def supported(dtype) -> bool:
    try:
        return np.dtype(dtype).name in TABLE
    except TypeError:
        return False


def words(n_elems: int, dtype) -> int:
    """4-byte words holding n_elems elements of dtype (rounded up)."""
    return -(-int(n_elems) * of(dtype).size // 4)


def as_words(data: np.ndarray) -> np.ndarray:
    """The raw bytes of `data` (C order), zero-padded to whole words, viewed as float32 words:
    how typed constants travel in the float32 weights blob with their bits intact."""
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    pad = -raw.size % 4
    if pad:
        raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
    return raw.view(np.float32)
