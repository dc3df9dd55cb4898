"""How the int8 GEMM kernels split a product into parts for the thread pool.

The int8 GEMM core (qgemm.py) runs on its caller's thread. The kernels that call it (qconv.py,
qmatmul.py) run on the pool in parts that are blocks of the output, `part_blocks` rows by
columns of each product, one core call per part: a part widens (and, in qmatmul, flips) only
its own columns of B, so splitting columns redoes nothing but A's widening on AVX2 (about
1 / columns more); rows are split too only where the columns give too few parts (each row
block widens its columns again). The K sum is never split and the sums are exact integers, and
part bounds depend on the shapes alone, so every output is the same for every thread count."""
from __future__ import annotations

import math
import re
from typing import Sequence, Tuple

from ...loops import cdiv

PART_COLS = 128    # columns per part: whole AVX2 panels (16), RVV e16/m1 strips to VLEN 1024
PART_ROWS = 64     # rows per part when rows are split: whole vectors along m to VLEN 1024
PARTS = 16         # parts a product should offer (threads to keep busy) before rows split


def _round_up(v: int, step: int) -> int:
    return -(-v // step) * step


def part_blocks(m: int, n: int, outer: int = 1) -> Tuple[int, int]:
    """(rows, columns) of a part of an M x N int8 product, of which the kernel computes
    `outer` independent ones (images, groups, batch steps). Columns come in even blocks of
    about PART_COLS, a multiple of 16 (the portable tile's AVX2 panels); rows stay whole
    unless outer x column blocks is below PARTS, then they split in multiples of PART_ROWS
    (each row block widens its column block again, and flips it in qmatmul: a few per cent
    of the product's instructions). Sizes depend on the shapes alone, never on the thread count."""
    cols = cdiv(n, PART_COLS)
    nb = min(n, _round_up(cdiv(n, cols), 16))
    have = outer * cdiv(n, nb)
    mb = m
    if have < PARTS and m >= 2 * PART_ROWS:
        splits = min(cdiv(PARTS, have), m // PART_ROWS)
        mb = min(m, _round_up(cdiv(m, splits), PART_ROWS))
    return mb, nb


def part_span(first: str, count: str, index: str, size: int, total: int) -> str:
    """Statement declaring `first` and `count` of the block of `size` (of `total`) at part
    index `index`; the whole when one block holds it."""
    if size >= total:
        return f"const long {first} = 0, {count} = {total};"
    return (f"const long {first} = {index} * {size}, "
            f"{count} = {total} - {first} < {size} ? {total} - {first} : {size};")


def part_indices(dims: Sequence[Tuple[str, int]], body: str, var: str = "u") -> str:
    """Statements declaring the indices `dims` ((name, count), outermost first) of part `var`
    that `body` uses (an index of count 1 is 0)."""
    out, inner = [], 1
    for name, count in reversed(dims):
        if re.search(rf"\b{name}\b", body):
            if count == 1:
                expr = "0"
            else:
                expr = var if inner == 1 else f"{var} / {inner}"
                expr += f" % {count}" if inner * count < math.prod(c for _, c in dims) else ""
            out.append(f"const long {name} = {expr};")
        inner *= count
    return "\n".join(reversed(out))
