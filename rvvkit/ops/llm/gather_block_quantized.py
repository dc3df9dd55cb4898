"""com.microsoft.GatherBlockQuantized: rows of a block-quantized table (a token embedding stored
at 4 or 8 bits, as onnxruntime-genai and `rvvkit quantize --embeddings` write it), dequantized
as they are gathered. The uint8 form, in MatMulNBits' conventions (rvvkit/ops/llm/nbits.py): data
[rows, K * bits / 8], two 4-bit codes per byte (the even one in the low nibble), scales
[rows, K / block], no zero points (the default 2^(bits-1)); gathered along axis 0, quantized
along the last axis. out[..., k] = (code(index, k) - zero point) * scale(index, k // block)."""
from __future__ import annotations

import numpy as np

from . import nbits
from ..registry import F32, bad, in_shape, opt_input, register

GBQ = "com.microsoft.GatherBlockQuantized"


def _dequantize(node, data: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Rows of the table [n, K] float32 from their codes [n, K * bits / 8] and scales."""
    a = node.attrs
    k, bits, block = a["K"], a["bits"], a["block_size"]
    codes = nbits.unpack_codes(data, bits, k).astype(np.float32)
    scale = np.repeat(np.asarray(scales, np.float32).reshape(len(data), -1), block,
                      axis=1)[:, :k]
    return ((codes - float(1 << (bits - 1))) * scale).astype(np.float32)


def _eval(node, xs):
    rows = xs[0].shape[0]
    idx = np.asarray(xs[1]).astype(np.int64)
    if idx.size and (idx.min() < -rows or idx.max() >= rows):
        raise ValueError(f"{node.name}: an index outside -{rows} .. {rows - 1}")
    # only the gathered rows are dequantized: a 0.5B model's table is 544 MB as float
    at = np.where(idx < 0, idx + rows, idx).reshape(-1)
    out = _dequantize(node, np.asarray(xs[0])[at], np.asarray(xs[2]).reshape(rows, -1)[at])
    return [out.reshape(idx.shape + (node.attrs["K"],))]


@register(GBQ, _eval, dtypes=("float32", "uint8", "int64", "int32"),
          data_error="an index is outside the table's rows")
def _gbq(node, g):
    a = node.attrs
    data, idx = in_shape(node, g, 0), in_shape(node, g, 1)
    bits, block = int(a.get("bits", 4)), int(a.get("block_size", 128))
    if int(a.get("gather_axis", 0)) != 0 or int(a.get("quantize_axis", 1)) not in (1, -1):
        raise bad(node, "only gather_axis 0 and quantize_axis 1 (the last) are supported")
    if len(data) != 2 or g.t(node.inputs[0]).dtype != np.uint8 or not g.is_const(node.inputs[0]):
        raise bad(node, f"data {list(data)}: a constant uint8 [rows, K * bits / 8] is needed "
                        "(the int4/uint4 element types are not supported)")
    if bits not in (4, 8) or block < 16 or block & (block - 1):
        raise bad(node, f"bits {bits}, block_size {block}: 4 or 8 bits, a power-of-two block "
                        ">= 16")
    if opt_input(node, 3):
        raise bad(node, "zero_points are not supported (the default 2^(bits-1) is)")
    k = data[1] * 8 // bits
    scales = in_shape(node, g, 2)
    if tuple(scales) != (data[0], nbits.blocks_of(k, block)) or \
            g.t(node.inputs[2]).dtype != F32 or not g.is_const(node.inputs[2]):
        raise bad(node, f"scales {list(scales)}: constant float32 [{data[0]}, "
                        f"{nbits.blocks_of(k, block)}] expected")
    if g.t(node.inputs[1]).dtype not in (np.int64, np.int32):
        raise bad(node, "indices must be int32 or int64")
    a.update(K=k, bits=bits, block_size=block, rows=int(data[0]))
    return [(tuple(idx) + (k,), F32)]
