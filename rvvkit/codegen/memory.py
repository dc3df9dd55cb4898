"""Static memory planning: every intermediate buffer gets an offset in one arena, and buffers
whose lifetimes do not overlap share memory."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

ALIGN = 16  # floats: 64-byte alignment keeps every buffer on a cache line / vector boundary


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class Interval:
    key: str
    size: int    # floats
    first: int   # first step at which the buffer is live (written)
    last: int    # last step that reads it


def lower_bound(intervals: List[Interval]) -> int:
    """Peak of simultaneously live floats: no plan can use less."""
    if not intervals:
        return 0
    steps = max(i.last for i in intervals) + 1
    live = [0] * (steps + 1)
    for iv in intervals:
        live[iv.first] += align(iv.size)
        live[iv.last + 1] -= align(iv.size)
    peak = acc = 0
    for d in live:
        acc += d
        peak = max(peak, acc)
    return peak


def plan(intervals: List[Interval], fixed: Optional[Dict[str, int]] = None
         ) -> Tuple[Dict[str, int], int]:
    """Greedy by size: place the largest buffers first, each at the lowest offset that does not
    collide with an already placed buffer whose lifetime overlaps. Returns offsets and total.
    Intervals named in `fixed` keep the offset given there (a session's cache, which a second
    plan of the same artifact must find where the first one left it)."""
    fixed = fixed or {}
    placed: List[Tuple[int, int, Interval]] = [
        (fixed[iv.key], fixed[iv.key] + align(iv.size), iv)
        for iv in intervals if iv.key in fixed]
    offsets: Dict[str, int] = {iv.key: off for off, _, iv in placed}
    total = max([end for _, end, _ in placed], default=0)
    for iv in sorted(intervals, key=lambda i: (-i.size, i.first, i.key)):
        if iv.key in fixed:
            continue
        size = align(iv.size)
        clashes = sorted((o, e) for o, e, other in placed
                         if other.first <= iv.last and iv.first <= other.last)
        off = 0
        for o, e in clashes:
            if off + size <= o:
                break
            off = max(off, e)
        placed.append((off, off + size, iv))
        offsets[iv.key] = off
        total = max(total, off + size)
    return offsets, total
