"""Plain-text tables for the CLI (no dependency: users run this over SSH on small boards)."""
from __future__ import annotations

from typing import List, Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]],
          align: str = "") -> str:
    """A left/right aligned table; `align` holds 'l' or 'r' per column (default: numbers right)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def side(i: int, sample: str) -> str:
        if align:
            return align[i]
        return "r" if sample.replace(".", "", 1).replace("-", "", 1).replace("%", "").isdigit() \
            else "l"

    def fmt(row: List[str]) -> str:
        out = []
        for i, c in enumerate(row):
            s = side(i, cells[0][i] if cells else c)
            out.append(c.rjust(widths[i]) if s == "r" else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [fmt(list(headers)), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
