"""The column layout both MatMulNBits kernels (nbits_f32.py, nbits_int8.py) run on, made from
onnxruntime's MatMulNBits format (rvvkit/ops/llm/nbits.py) at build time, and the kernel they share
around their bodies.

Row k of block blk holds the codes of every output column, so that a vector runs along
columns: at 4 bits two per byte, column j in the low nibble and column j + ceil(N/2) in the
high one (both halves of the output contiguous); at 8 bits one per byte as int8 (code - 128:
signed products, the zero point shifted alike). Parts (threads) are groups of PAIRS byte
columns, and everything a part reads is stored together, in the order it reads it (a
decoding step streams its weights from DRAM once, so this sets its pace): the codes as
`panels` (a part's rows of PAIRS bytes, one after another), the scales and zero points as
`panel_order` (per part, per block, its columns' values). Scales that are all bfloat16
values (`rvvkit quantize` rounds them so), or all float16 values (a float16 model's), are
stored as their 16-bit patterns instead and widened as they are read (`scale_kind`)."""
from __future__ import annotations

from textwrap import dedent
from typing import Dict

import numpy as np

from ... import half, rvv, x86
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, make_spec
from ...loops import loop
from ...parallel import split_of
from ....ops.llm import nbits

PAIRS = 64   # byte columns (column pairs at 4 bits) per part


def relayout_codes(b: np.ndarray, k: int, n: int, bits: int, block: int) -> np.ndarray:
    """B [N, blocks, bytes] -> [blocks * block, width] bytes."""
    nb = nbits.blocks_of(k, block)
    codes = nbits.unpack_codes(np.asarray(b).reshape(n, nb, -1), bits, block)  # [N, nb, blk]
    rows = codes.reshape(n, nb * block).T                                       # [K', N]
    if bits == 8:
        return np.ascontiguousarray((rows.astype(np.int16) - 128).astype(np.int8))
    half = (n + 1) // 2
    hi = np.zeros((rows.shape[0], half), np.uint8)
    hi[:, :n - half] = rows[:, half:]
    return np.ascontiguousarray(rows[:, :half] | (hi << 4)).astype(np.uint8)


def panels(b: np.ndarray, k: int, n: int, bits: int, block: int) -> np.ndarray:
    """B [N, blocks, bytes] -> the kernels' panels: relayout_codes's rows cut into parts of
    PAIRS byte columns (the last padded with zeros), each part's [blocks * block, PAIRS]
    stored whole, so that a part streams one contiguous stretch of the weights (a row of the
    full width apart from the next, every 64-byte line came from another DRAM page: the
    host's kernels ran at half the bandwidth)."""
    rows = relayout_codes(b, k, n, bits, block)
    kp, width = rows.shape
    wp = -(-width // PAIRS) * PAIRS
    padded = np.zeros((kp, wp), rows.dtype)
    padded[:, :width] = rows
    return np.ascontiguousarray(padded.reshape(kp, wp // PAIRS, PAIRS).transpose(1, 0, 2))


def panel_at(t: str, col: str, k: int, block: int) -> str:
    """C: the index in `panels` of the code of k-row `t`, byte column `col` (C expressions
    of type long)."""
    kp = nbits.blocks_of(k, block) * block
    return f"({col}) / {PAIRS} * {kp * PAIRS} + ({t}) * {PAIRS} + ({col}) % {PAIRS}"


def scale_kind(s: np.ndarray) -> str:
    """How scales `s` (float32 values) are stored: "bfloat16" or "float16" when every one is
    exactly such a value (16 bits each), else "float32"."""
    s = np.asarray(s)
    if nbits.is_bf16(s):
        return "bfloat16"
    return "float16" if nbits.is_f16(s) else "float32"


def stored_scales(s: np.ndarray) -> np.ndarray:
    """Scales as the weights blob holds them: float32, or the 16-bit patterns `scale_kind`
    names, as bytes (the blob holds typed bytes; scale_at/scale_load read them)."""
    s = np.ascontiguousarray(s, np.float32)
    kind = scale_kind(s)
    if kind == "bfloat16":
        return nbits.bf16_bits(s).view(np.uint8)
    return s.astype(np.float16).view(np.uint8) if kind == "float16" else s


def halves_of(bits: int) -> int:
    """Output columns per byte column: two at 4 bits (the nibbles), one at 8."""
    return 2 if bits == 4 else 1


def panel_order(v: np.ndarray, n: int, bits: int) -> np.ndarray:
    """Per-column values [blocks, N] -> [parts, blocks, halves, PAIRS]: a part's values of
    block blk (its low byte columns' PAIRS, then at 4 bits the high ones') beside its
    next block's, zeros for columns past N. Read in [blocks, N] order, a part took each
    block's scales from another DRAM page, and those misses (not the codes) set the pace of
    a decoding step."""
    width, h = width_of(n, bits), halves_of(bits)
    parts = -(-width // PAIRS)
    byte_col = np.arange(parts * PAIRS).reshape(parts, 1, PAIRS)
    col = np.concatenate([byte_col + i * width for i in range(h)], axis=1)
    col = np.where((byte_col < width) & (col < n), col, n)           # n: the zero column
    v = np.concatenate([v, np.zeros((v.shape[0], 1), v.dtype)], axis=1)
    return np.ascontiguousarray(v[:, col].transpose(1, 0, 2, 3))


def at_column(half, col: str, nb: int, bits: int, part: str = "part",
              blk: str = "blk") -> str:
    """C: the index in panel_order of block `blk`'s value for byte column `col` (0 ..
    PAIRS - 1) of part `part` (C expressions) and `half` (1: the high nibbles' columns; an
    int, or a C expression)."""
    h = halves_of(bits)
    at_half = f"{half * PAIRS}" if isinstance(half, int) else f"{half} * {PAIRS}"
    return f"{part} * {nb * h * PAIRS} + {blk} * {h * PAIRS} + {at_half} + {col}"


def relayout_scales(s: np.ndarray, k: int, n: int, block: int, bits: int) -> np.ndarray:
    """Scales [N, blocks] -> panel_order, stored as `stored_scales` says."""
    v = np.asarray(s, np.float32).reshape(n, -1).T
    return stored_scales(panel_order(v, n, bits).reshape(-1))


# 16-bit scales -> float. bfloat16: the 16 bits are the top half of the float32's; float16:
# codegen/half.py's conversion.
SCALE_HELPERS = {
    "bfloat16": {"hd_rvk_bf16": """\
static RVK_UNUSED RVK_HD inline float rvk_bf16(const uint8_t *p, long i) {
    uint16_t h;
    memcpy(&h, p + 2 * i, sizeof h);
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}"""},
    "float16": half.TO_FLOAT,
    "float32": {},
}


def scale_param(kind: str) -> Param:
    """The kernel parameter holding the scales: bytes of 16-bit patterns, or floats."""
    return Param("scales", dtype="float32" if kind == "float32" else "uint8")


def scale_at(index: str, kind: str) -> str:
    """C: the scale at element `index` of the stored scales (at_column)."""
    if kind == "bfloat16":
        return f"rvk_bf16(scales, {index})"
    if kind == "float16":   # the blob keeps every tensor 64-byte aligned: rvk_half-aligned
        return f"rvk_h2f(((const rvk_half *)(const void *)scales)[{index}])"
    return f"scales[{index}]"


def scale_load(index: str, kind: str) -> str:
    """RVV: an f32m4 vector (vl lanes) of the scales from element `index`."""
    if kind == "float32":
        return f"__riscv_vle32_v_f32m4(scales + {index}, vl)"
    h = ("__riscv_vzext_vf2_u32m4(__riscv_vle16_v_u16m2((const uint16_t *)(const void *)"
         f"(scales + 2 * ({index})), vl), vl)")
    if kind == "bfloat16":
        return f"__riscv_vreinterpret_v_u32m4_f32m4(__riscv_vsll_vx_u32m4({h}, 16, vl))"
    return "rvk_h2f_v(" + h + ", vl)"


def scale_support(kind: str) -> Dict[str, str]:
    """The helpers scale_at/scale_load of `kind` call."""
    return {**SCALE_HELPERS[kind], **(half.TO_FLOAT_RVV if kind == "float16" else {})}


def relayout_zero_points(z: np.ndarray, k: int, n: int, bits: int, block: int,
                         shift: float = 0.0) -> np.ndarray:
    """Zero points [N, blocks] -> panel_order floats, in the stored code's terms (at 8 bits
    the codes are stored less 128), less `shift` (what a kernel already took away)."""
    zf = nbits.zero_points_of(z, n, nbits.blocks_of(k, block), bits)
    return panel_order(zf.T - (128.0 if bits == 8 else 0.0) - shift, n, bits).reshape(-1)


def default_zero_point(bits: int) -> float:
    """The zero point in the stored code's terms when the model gives none."""
    return 8.0 if bits == 4 else 0.0


def width_of(n: int, bits: int) -> int:
    """Byte columns per row of the layout."""
    return (n + 1) // 2 if bits == 4 else n


def column_kernel(kind: str, m: int, k: int, n: int, bits: int, block: int, zp_kind: str,
                  bias: bool, setup: str, per_part: str, workspace: int, scales: str,
                  prologue: str = "", zp_shift: float = 0.0) -> Lowered:
    """The kernel around a body: `setup` (workspace pointers), then per part (j0..j1 byte
    columns) `per_part` (at no indentation: its own loops over the m rows). `prologue`: what
    every part reads from the workspace and none writes (the rows' block sums, their int8
    form), computed once per thread rather than once per part. Params: a [m, k], q
    (re-laid codes), scales (stored as `scales`, a scale_kind), [zp (less `zp_shift`)],
    [bias], y; the weights' transforms to the layout."""
    width, kp = width_of(n, bits), nbits.blocks_of(k, block) * block
    ctype = "uint8_t" if bits == 4 else "int8_t"
    spec: Dict = make_spec(kind, M=m, K=k, N=n, bits=bits, block=block, zp_kind=zp_kind,
                           bias=bias, pairs=PAIRS, scales=scales)
    reads = "    (void)a;   /* read by the prologue */\n" if prologue else ""
    body = f"""{reads}{setup}    for (long part = rvk_lo; part < rvk_hi; ++part) {{
        const long j0 = part * {PAIRS}, j1 = j0 + {PAIRS} < {width} ? j0 + {PAIRS} : {width};
        /* this part's panel (see panels) indexed by column: code (t, j) at qp[t * {PAIRS} + j] */
        const {ctype} *__restrict qp = q + part * {PAIRS * (kp - 1)};
{indent(per_part.rstrip(), 2, directives=True)}
    }}
"""
    split = split_of(-(-width // PAIRS), m * n * k)
    if split is None:
        body = "    const long rvk_lo = 0, rvk_hi = 1;\n" + body
    params = [Param("a"), Param("q", dtype="uint8" if bits == 4 else "int8"),
              scale_param(scales)] + \
        ([Param("zp")] if zp_kind else []) + ([Param("bias")] if bias else []) + \
        [Param("y", False)]
    transforms = {1: lambda b: panels(b, k, n, bits, block),
                  2: lambda s: relayout_scales(s, k, n, block, bits)}
    if zp_kind:
        transforms[3] = lambda z: relayout_zero_points(z, k, n, bits, block, zp_shift)
    return Lowered(Kernel(kind, tuple(params), body, spec=spec, split=split,
                          workspace=workspace, macs=m * n * k,
                          support={**rvv.header(), **x86.header(), **scale_support(scales)},
                          prologue=prologue, prologue_shared=bool(prologue)),
                   transforms)


def rows(body: str, stop: int, first: int = 0, step: int = 1) -> str:
    """C: `body` (at no indentation) for rows `long i` = first, first + step, .. < stop,
    through loops.loop (once with i fixed for a single row); nothing for none."""
    if stop <= first:
        return ""
    return loop("i", first, stop, body.rstrip(), "long", directives=True, step=step) + "\n"


def rvv_columns(n: int, bits: int, bias: bool, nb: int, per_block: str, rows: int = 1) -> str:
    """RVV: this part's byte columns j0..j1 strip-mined (vl at e8m1, so i16m2 / i32m4 / f32m4
    hold as many) for `rows` rows from row i, float outputs `o<r>lo` (and `o<r>hi`, the high
    columns at 4 bits) of row i + r started from the bias, `per_block` run for each block
    `blk`, then stored (the high half stops at N)."""
    width = width_of(n, bits)
    start = "__riscv_vle32_v_f32m4(bias + {col}, vl)" if bias else \
        "__riscv_vfmv_v_f_f32m4(0.0f, vl)"
    halves = [("lo", "j")] + ([("hi", f"j + {width}")] if bits == 4 else [])
    init = ", ".join(f"o{r}{h} = {start.format(col=col)}" for r in range(rows)
                     for h, col in halves)
    stores = []
    for r in range(rows):
        out = f"y + (i + {r}) * {n}" if r else f"y + i * {n}"
        stores.append(f"__riscv_vse32_v_f32m4({out} + j, o{r}lo, vl);")
        if bits == 4:
            stores.append(f"if (hi_n > 0) __riscv_vse32_v_f32m4({out} + {width} + j, o{r}hi, "
                          "(size_t)hi_n);")
    hi_n = "" if bits == 8 else f"""
    const long hi_n = j + (long)vl + {width} <= {n} ? (long)vl : {n} - {width} - j;"""
    store = "\n".join("    " + s for s in stores)
    return f"""for (long j = j0; j < j1; ) {{
    const size_t vl = __riscv_vsetvl_e8m1((size_t)(j1 - j));
    vfloat32m4_t {init};
    for (long blk = 0; blk < {nb}; ++blk) {{
{indent(dedent(per_block).rstrip(), 2, directives=True)}
    }}{hi_n}
{store}
    j += (long)vl;
}}
"""


def rvv_zero_point(zp_kind: str, bits: int, at: str, acc: str, asum: str,
                   default: float = None) -> str:
    """RVV: acc -= zero point (per column from index `at` (at_column), or `default`, else
    the format's) * asum, for block blk."""
    if zp_kind:
        return f"{acc} = __riscv_vfnmsac_vf_f32m4({acc}, {asum}, " \
               f"__riscv_vle32_v_f32m4(zp + {at}, vl), vl);"
    z = default_zero_point(bits) if default is None else default
    return f"{acc} = __riscv_vfsub_vf_f32m4({acc}, {z!r}f * {asum}, vl);" if z else ""


def portable_part(n: int, bits: int, bias: bool, nb: int, acc: str, span: str, first: str,
                  term: str, finish, vector: str = "", row: str = "i") -> str:
    """Portable C of one row over this part's byte columns j0..j1, in the RVV forms' order so
    that a compiler vectorises it along columns (AVX2 on a host): per block, sums `acc`
    (C type) of every column, then `finish(d, half)` (the C expression a column's output
    adds, from its sum `d` of byte column c of the part, `half` 1 for the high nibbles) per
    column. `span`: the block's k (`long t =
    ..; t < ..`), `first`: a statement per k (declaring `at`, the k-th activation), `term`:
    what one code (`code`, an int32_t or float C expression) adds to a sum. At 4 bits the
    high nibbles are the columns ceil(N/2) on (stopping at N). `vector`: statements that
    take the part's first `nv` byte columns (a long they declare) into y<half>[c] first, the
    portable loops doing the rest (an x86 form's whole vectors; see nbits_x86.py). `row`:
    the output row (C)."""
    width = width_of(n, bits)
    halves = [("lo", "0", "nj")] + ([("hi", str(width), "nh")] if bits == 4 else [])
    if bits == 4:
        codes = {"lo": "(qt[c] & 15)", "hi": "(qt[c] >> 4)"}
    else:
        codes = {"lo": "qt[c]"}
    steps = "\n".join(f"            d{h}[c] += {term.format(code=codes[h])};"
                       for h, _, _ in halves)
    start = "".join(f"for (long c = 0; c < {cnt}; ++c) y{h}[c] = "
                    f"{f'bias[j0 + {off} + c]' if bias else '0.0f'};\n"
                    for h, off, cnt in halves)
    c0 = "nv" if vector else "0"
    clear = "".join(f"    for (long c = {c0}; c < nj; ++c) d{h}[c] = 0;\n" for h, _, _ in halves)
    add = "".join(f"""    for (long c = {c0}; c < {cnt}; ++c)
        y{h}[c] += {finish(f"d{h}[c]", half)};
""" for half, (h, off, cnt) in enumerate(halves))
    store = "".join(f"for (long c = 0; c < {cnt}; ++c) y[{row} * {n} + j0 + {off} + c] = y{h}[c];\n"
                    for h, off, cnt in halves)
    hi = f"const long nh = j1 + {width} <= {n} ? nj : {n} - {width} - j0;\n" if bits == 4 else ""
    blocks = f"""for (long blk = 0; blk < {nb}; ++blk) {{
{clear}    for ({span}; ++t) {{
        {first}
        const {"uint8_t" if bits == 4 else "int8_t"} *__restrict qt = qp + t * {PAIRS} + j0;
        for (long c = {c0}; c < nj; ++c) {{
{steps}
        }}
    }}
{add}}}
"""
    if vector:   # the columns past the whole vectors, if any
        blocks = vector.rstrip() + "\nif (nv < nj) {\n" + indent(blocks.rstrip()) + "\n}\n"
    return f"""const long nj = j1 - j0;
{hi}float {", ".join(f"y{h}[{PAIRS}]" for h, _, _ in halves)};
{acc} {", ".join(f"d{h}[{PAIRS}]" for h, _, _ in halves)};
{start}{blocks}{store}"""
