"""GatherBlockQuantized (token embeddings at 4 or 8 bits): rows of a block-quantized table
dequantized as they are gathered, from one of two layouts of the same codes:
- "rows": the operator's own (data [rows, K * bits / 8], scales [rows, K / block]), each
  gathered row read contiguously;
- "columns": the MatMulNBits panels (nbits_layout.py) of a table that a MatMulNBits of
  the graph also multiplies by (an LM head tied to the embedding): the table's row v is the
  layout's column v, read with a stride. Both steps then take their weights from one copy in
  the artifact (the weights blob stores identical entries once); a gathered row is only K
  reads, so the stride costs nothing next to the LM head's pass over the whole table.
Scales that are all bfloat16 (or all float16) values are stored as 16 bits in either layout.
An index outside -rows .. rows - 1 is a data error."""
from __future__ import annotations

from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ....ops.llm import nbits
from .nbits_layout import (PAIRS, SCALE_HELPERS, at_column, panel_at, panels, relayout_scales, scale_at,
                           scale_param, stored_scales, width_of)

declare_spec("gather_bq", ("count", "rows", "K", "bits", "block", "index", "layout",
                           "scales"))


def _value(layout: str, rows: int, k: int, bits: int, block: int, scales: str) -> str:
    """C: element k of gathered row i as a float."""
    nb = nbits.blocks_of(k, block)
    if layout == "rows":
        code = f"(q[i * {k * bits // 8} + (k >> 1)] >> ((k & 1) * 4)) & 15" if bits == 4 \
            else f"q[i * {k} + k]"
        return f"(float)((int)({code}) - {1 << (bits - 1)}) * " \
               f"{scale_at(f'i * {nb} + k / {block}', scales)}"
    width = width_of(rows, bits)
    if bits == 4:   # column i: low nibbles of byte column i, or high ones of i - width
        code = (f"(i < {width} ? (q[{panel_at('k', 'i', k, block)}] & 15) : "
                f"(q[{panel_at('k', f'i - {width}', k, block)}] >> 4))")
        code = f"((int){code} - 8)"
    else:           # stored as code - 128 (int8)
        code = f"(int)q[{panel_at('k', 'i', k, block)}]"
    # column i's scale of block k / block, in panel_order
    col = f"(i < {width} ? i : i - {width})" if bits == 4 else "i"
    half = f"(i >= {width})" if bits == 4 else 0
    at = at_column(half, f"{col} % {PAIRS}", nb, bits, part=f"({col} / {PAIRS})",
                   blk=f"(k / {block})")
    return f"(float){code} * {scale_at(at, scales)}"


def gather_bq(count: int, rows: int, k: int, bits: int, block: int, index: str,
              layout: str = "rows", scales: str = "float32") -> Lowered:
    """Params: q (the codes in `layout`), indices (`index` dtype, `count` of them), scales,
    out [count, K]; the transforms from the operator's tensors to the layout."""
    spec = make_spec("gather_bq", count=count, rows=rows, K=k, bits=bits, block=block,
                     index=index, layout=layout, scales=scales)
    body = f"""    for (long r = 0; r < {count}; ++r) {{
        long i = (long)idx[r];
        if (i < 0) i += {rows};
        if (i < 0 || i >= {rows}) RVK_DATA_ERROR;
        float *__restrict o = out + r * {k};
        for (long k = 0; k < {k}; ++k)
            o[k] = {_value(layout, rows, k, bits, block, scales)};
    }}
    RVK_DATA_OK;
"""
    signed = layout == "columns" and bits == 8
    params = (Param("q", dtype="int8" if signed else "uint8"), Param("idx", dtype=index),
              scale_param(scales), Param("out", False))
    if layout == "columns":
        transforms = {0: lambda d: panels(d, k, rows, bits, block),
                      2: lambda s: relayout_scales(s, k, rows, block, bits)}
    else:
        transforms = {2: stored_scales} if scales != "float32" else {}
    return Lowered(Kernel("gather_bq", params, body, spec=spec, status=True, macs=count * k,
                          support=dict(SCALE_HELPERS[scales])), transforms)
