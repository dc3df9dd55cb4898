"""Turn a compiler's stderr into something a user can act on: the source lines it complains
about, with line numbers, so a CompileError is readable without opening the file."""
from __future__ import annotations

import os
import re
from typing import Optional

# "path:line:" or "path:line:col:" at the start of a line (gcc, clang and zig all use it), or
# "path(line): " (nvcc's CUDA front end; its host-compiler stage speaks gcc's form).
_LOC_RE = re.compile(r"^(?:(?P<file>[^\s:][^:\n]*):(?P<line>\d+)(?::\d+)?:"
                     r"|(?P<nvfile>[^\s:(][^:(\n]*)\((?P<nvline>\d+)\): )", re.MULTILINE)


def first_location(stderr: str, file_name: str) -> Optional[int]:
    """Line number of the first diagnostic that points into `file_name` (matched by basename)."""
    for m in _LOC_RE.finditer(stderr):
        path, line = (m.group("file"), m.group("line")) if m.group("file") is not None \
            else (m.group("nvfile"), m.group("nvline"))
        if os.path.basename(path) == file_name:
            return int(line)
    return None


def excerpt_around(source: str, line: int, context: int = 3) -> str:
    """Lines line-context .. line+context of source, numbered, the faulty one marked '>'."""
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    lo, hi = max(1, line - context), min(len(lines), line + context)
    width = len(str(hi))
    out = []
    for n in range(lo, hi + 1):
        mark = ">" if n == line else " "
        out.append(f"{mark} {n:>{width}} | {lines[n - 1]}")
    return "\n".join(out)


def source_excerpt(stderr: str, source: str, file_name: str, context: int = 3) -> str:
    line = first_location(stderr, file_name)
    return excerpt_around(source, line, context) if line is not None else ""

