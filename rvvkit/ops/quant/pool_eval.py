"""numpy QLinearAveragePool (folding constant inputs only; the kernels are in
codegen/kernels/quant/pool.py): onnxruntime dequantizes the input to float32, sums each window
in row order, divides by the tap count (with count_include_pad: the kernel's size), and
quantizes as rint_even(avg / y_scale + y_zp)."""
from __future__ import annotations

import numpy as np

from . import numerics as qm


def qavgpool(node, x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """`table`: the dequantized value of each input byte (quant_linear.avgpool_table), as the
    kernel receives it."""
    a, q = node.attrs, node.attrs["q"]
    deq = table[x.view(np.uint8).astype(np.int64)]
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pl) = a["kernel"], a["strides"], a["pads"][:2]
    ho, wo = a["out_hw"]
    y = np.zeros((n, c, ho, wo), np.float32)
    for i in range(ho):
        h0, h1 = max(i * sh - pt, 0), min(i * sh - pt + kh, h)
        for j in range(wo):
            w0, w1 = max(j * sw - pl, 0), min(j * sw - pl + kw, w)
            acc = np.zeros((n, c), np.float32)
            for hh in range(h0, h1):
                for ww in range(w0, w1):
                    acc = (acc + deq[:, :, hh, ww]).astype(np.float32)
            cnt = kh * kw if a.get("count_include_pad", 0) else (h1 - h0) * (w1 - w0)
            y[:, :, i, j] = (acc / np.float32(cnt)).astype(np.float32)
    v = ((y / np.float32(q[3])).astype(np.float32) + np.float32(q[4])).astype(np.float32)
    return qm.round_even_sat(v, x.dtype)

