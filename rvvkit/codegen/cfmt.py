"""Formatting of Python values as C literals."""
from __future__ import annotations

import math


def flt(x: float) -> str:
    """A float as a C `float` literal that round-trips exactly (9 significant digits)."""
    x = float(x)
    if math.isnan(x):
        return "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    s = repr(float(__import__("numpy").float32(x)))
    if "e" not in s and "." not in s:
        s += ".0"
    return f"{s}f" if not s.startswith("-") else f"({s}f)"


def ilist(values) -> str:
    return ", ".join(str(int(v)) for v in values)
