"""Formatting of Python values as C source: literals, identifiers and indentation."""
from __future__ import annotations

import math
import re
from typing import Dict

import numpy as np

INDENT = "    "   # the one indentation step of all generated C


def flt(x: float) -> str:
    """A float as a C `float` literal: the shortest decimal that parses back to the same
    float32 (so 0.1 prints as 0.1f, not as the 17 digits of its double widening)."""
    x = float(x)
    if math.isnan(x):
        return "NAN"
    if math.isinf(x):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    f = np.float32(x)
    pos = np.format_float_positional(f, unique=True, trim="0")
    sci = np.format_float_scientific(f, unique=True, trim="0")
    s = pos if len(pos) <= len(sci) else sci
    return f"{s}f" if not s.startswith("-") else f"({s}f)"


def ilist(values) -> str:
    return ", ".join(str(int(v)) for v in values)


def ident(text: str) -> str:
    """`text` as a C identifier fragment: every other character becomes `_`, and a leading
    digit gets a `_` before it."""
    s = re.sub(r"[^0-9A-Za-z_]", "_", text) or "_"
    return "_" + s if s[0].isdigit() else s


def unique_idents(texts: Dict[str, str], prefix: str) -> Dict[str, str]:
    """{key: prefix + ident(text)} for texts {key: text}, distinct keys getting distinct
    identifiers (a numeric suffix separates texts that sanitise alike)."""
    out: Dict[str, str] = {}
    used = set()
    for key, text in texts.items():
        base = prefix + ident(text)
        cand, i = base, 1
        while cand in used:
            i += 1
            cand = f"{base}_{i}"
        used.add(cand)
        out[key] = cand
    return out


def indent(text: str, levels: int = 1, directives: bool = False) -> str:
    """`text` with every non-empty line shifted right by `levels` steps; with `directives`,
    preprocessor lines (the RVV guards) stay in column 0, where every kernel has them."""
    pad = INDENT * levels
    return "\n".join(ln if directives and ln.startswith("#") else pad + ln if ln.strip() else ""
                     for ln in text.splitlines())
