"""The standalone C runner (runtime_c/runner.c): its source as one translation unit, and
building it (and an artifact's kernels) for a target compiler through the JIT cache.

The runner is compiled by the very compiler chosen for the kernels, with the same flags minus
-shared, so one compiler choice (RVVKIT_COMPILER / TVM_RVV_COMPILER) decides both. That compiler
may be a C++ driver (riscv64-linux-gnu-g++ compiles .c as C++), so runner.c and its headers are
kept valid as C11 and as C++11, like the generated code, rather than guessing the C driver that
matches a C++ one."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from ..jit import Compiler, compile_flags, compile_source
from ..resources import runtime_c_file

RUNNER_NAME = "rvvkit_runner"
# Exit codes of the runner, as documented at the top of runner.c.
EXIT_CODES = {0: "ok", 2: "usage error", 3: "bad artifact", 4: "bad inputs",
              5: "kernel load failure", 6: "runtime failure", 7: "data out of range"}
DATA_EXIT = 7   # a step's kernel found an index out of range (its step is on stderr)
LINK_FLAGS = ("-ldl",)  # dlopen lives in libdl before glibc 2.34 (older boards)

_LOCAL_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_.-]+\.h)"[ \t]*$', re.MULTILINE)


def runner_source() -> str:
    """runner.c with its local headers inlined, recursively and each once (#line keeps
    diagnostics pointing at the real files): a self-contained unit, so the compile cache's key,
    the source text, covers the headers too, and a board needs just this one file."""
    return _inline("runner.c", set())


def _inline(name: str, seen: set) -> str:
    text = runtime_c_file(name).read_text(encoding="utf-8")
    out, pos = [], 0
    for m in _LOCAL_INCLUDE.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        if m.group(1) in seen:  # include guards would drop it anyway
            continue
        seen.add(m.group(1))
        line_after = text.count("\n", 0, m.end()) + 2  # the line following the #include
        out += [f'#line 1 "{m.group(1)}"\n', _inline(m.group(1), seen),
                f'#line {line_after} "{name}"']
    out.append(text[pos:])
    return "".join(out)


def build_runner(compiler: Compiler, *, use_cache: Optional[bool] = None,
                 isa: Optional[str] = None) -> Path:
    """The runner executable for `compiler` (cached by source, compiler and flags), for the
    ISA profile `isa` on riscv64 (None: plain RVV)."""
    return compile_source(runner_source(), compiler,
                          compile_flags(compiler, shared=False, isa=isa),
                          name=RUNNER_NAME, kind="exe", link_flags=list(LINK_FLAGS),
                          use_cache=use_cache)


def build_kernels(c_source: str, compiler: Compiler, *,
                  use_cache: Optional[bool] = None, isa: Optional[str] = None) -> Path:
    """An artifact's C source as a shared object the runner can dlopen (isa: as build_runner)."""
    return compile_source(c_source, compiler, compile_flags(compiler, isa=isa), name="model",
                          kind="so", use_cache=use_cache)


def describe_exit(returncode: int) -> str:
    """'exited with code 3 (bad artifact)' / 'was killed by signal SIGSEGV (11)'."""
    if returncode < 0:
        import signal
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "signal"
        return f"was killed by signal {name} ({-returncode})"
    meaning = EXIT_CODES.get(returncode)
    return f"exited with code {returncode}" + (f" ({meaning})" if meaning else "")
