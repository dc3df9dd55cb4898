"""SwiGLU (y = a * sigmoid(alpha * a) * b, element-wise) and RotaryEmbedding (per batch row
and position: the cos/sin row, chosen by position_ids when given, rotates the pairs
(j, j + rot/2) or (2j, 2j + 1) of every head; the tail past `rot` is copied)."""
from __future__ import annotations

from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop

declare_spec("swiglu", ("n", "alpha"))
declare_spec("rope", ("x_shape", "rows", "heads", "head", "rot", "interleaved", "layout4d",
                      "positions"))


def swiglu_expr(alpha: float, i: str) -> str:
    """y[i] from a[i], b[i] (one C/CUDA statement)."""
    return (f"y[{i}] = a[{i}] / (1.0f + rvk_expf({flt(-alpha)} * a[{i}])) * b[{i}];")


def swiglu(n: int, alpha: float) -> Lowered:
    """Params: a, b, y (same shape, n elements)."""
    spec = make_spec("swiglu", n=int(n), alpha=float(alpha))
    body = f"    for (long i = 0; i < {n}; ++i) {swiglu_expr(alpha, 'i')}\n"
    return Lowered(Kernel("swiglu", (Param("a"), Param("b"), Param("y", False)), body,
                          spec=spec))


def rope(x_shape, rows: int, heads: int, head: int, rot: int, interleaved: bool,
         layout4d: bool, positions: bool) -> Lowered:
    """Params: x, cos, sin, [position_ids (int64)], y. `rows`: cache rows (max_position when
    positions are given, else batch * seq). A position outside the cache is a data error."""
    xs = tuple(int(v) for v in x_shape)
    batch, seq = xs[0], (xs[2] if layout4d else xs[1])
    half = rot // 2
    # element strides of batch, position and head in x (the head's elements are contiguous);
    # one loop over the (batch, position) rows, which position_ids and the caches index
    sb, ss, sh = ((heads * seq * head, head, seq * head) if layout4d
                  else (seq * heads * head, heads * head, head))
    i1, i2 = ("2 * j", "2 * j + 1") if interleaved else ("j", f"j + {half}")
    if positions:
        row = f"const long long r = pos[bs];\nif (r < 0 || r >= {rows}) RVK_DATA_ERROR;"
    else:
        row = "const long long r = bs;"
    # one position per batch row (a decoding step): s is 0, the row is the batch index
    where = "const long long b = bs;" if seq == 1 else \
        f"const long long b = bs / {seq}, s = bs % {seq};"
    offset = f"b * {sb} + h * {sh}" if seq == 1 else f"b * {sb} + s * {ss} + h * {sh}"
    tail = f"\nfor (long long d = {rot}; d < {head}; ++d) y[o + d] = x[o + d];" \
        if rot < head else ""   # the dimensions past the rotated ones, copied
    per_head = f"""const long long o = {offset};
for (long long j = 0; j < {half}; ++j) {{
    const float x1 = x[o + {i1}], x2 = x[o + {i2}];
    y[o + {i1}] = cr[j] * x1 - sr[j] * x2;
    y[o + {i2}] = sr[j] * x1 + cr[j] * x2;
}}{tail}"""
    per_row = f"""{where}
{row}
const float *__restrict cr = cosc + r * {half};
const float *__restrict sr = sinc + r * {half};
{loop("h", 0, heads, per_head, "long long")}"""
    body = indent(loop("bs", 0, batch * seq, per_row, "long long", flat=True)) + \
        "\n    RVK_DATA_OK;\n"
    params = [Param("x"), Param("cosc"), Param("sinc")] + \
        ([Param("pos", dtype="int64")] if positions else []) + [Param("y", False)]
    spec = make_spec("rope", x_shape=xs, rows=rows, heads=heads, head=head, rot=rot,
                     interleaved=bool(interleaved), layout4d=bool(layout4d),
                     positions=bool(positions))
    return Lowered(Kernel("rope", tuple(params), body, spec=spec, status=True))
