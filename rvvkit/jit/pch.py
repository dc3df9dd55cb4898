"""A precompiled form of the CUDA emulator header for g++, made once per compiler, flags and
header content in the JIT cache: the C++ standard headers the emulator pulls in are most of a
small model's compile time under it (0.6 of 1.0 s of CPU for a one-kernel model), and every
`--on cuda-emu` build force-includes it.

g++ takes `X.h.gch` in place of `X.h` when it sits beside it and was built with compatible
flags, and silently reads `X.h` itself otherwise, so a missing or stale precompiled header
costs time, never correctness; any failure to make one falls back to the header as it is."""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import List, Sequence

from . import cache
from .build import compile_timeout, run_compiler
from .compilers import Compiler

log = logging.getLogger("rvvkit.jit")


def header_flags(flags: Sequence[str], header: str) -> List[str]:
    """The unit's flags made into the header's: no -include of it, no linking, C++ header."""
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
            continue
        if f == "-include":
            skip = True
            continue
        if f in ("-shared", header):
            continue
        out.append("c++-header" if f == "c++" else f)
    return out


def precompiled(header: Path, compiler: Compiler, flags: Sequence[str]) -> Path:
    """The header to force-include with `flags` (which name it through "{header}"): for g++,
    a copy of it in the cache beside its precompiled form; else `header` itself."""
    if compiler.family != "gcc" or not compiler.is_cxx or not cache.cache_enabled():
        return header
    text = header.read_bytes()
    hflags = header_flags(flags, "{header}")
    parts = [text, str(compiler.path).encode(), compiler.version.encode(),
             *(a.encode() for a in compiler.argv), *(f.encode() for f in hflags)]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:32]
    home = cache.cache_dir() / "pch" / key
    copy = home / header.name
    if (home / f"{header.name}.gch").is_file():
        return copy
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=home.parent))
        shutil.copyfile(header, work / header.name)
        cmd = list(compiler.argv) + hflags + [header.name, "-o", f"{header.name}.gch"]
        rc, text_out = run_compiler(cmd, work, compile_timeout())
        if rc != 0:
            log.info("no precompiled emulator header (%s): %s", rc, text_out.strip()[:500])
            shutil.rmtree(work, ignore_errors=True)
            return header
        try:
            os.rename(work, home)   # atomic: a concurrent build that came first wins
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
    except OSError as exc:
        log.info("no precompiled emulator header: %s", exc)
        return header
    return copy if (home / f"{header.name}.gch").is_file() else header
