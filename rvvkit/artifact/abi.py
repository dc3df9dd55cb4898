"""The plan ABI as declared once, in runtime_c/rvvkit_abi.h: its text (embedded by the C
emitter), its version number, its declarations for cffi, and the version check the executors
make on a loaded object."""
from __future__ import annotations

import functools
import re

from ..errors import ExecutionError
from ..resources import runtime_c_file

HEADER = "rvvkit_abi.h"
_VERSION_RE = re.compile(r"^#define RVVKIT_ABI_VERSION (\d+)\s*$", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def header_text() -> str:
    return runtime_c_file(HEADER).read_text(encoding="utf-8")


def _version() -> int:
    m = _VERSION_RE.search(header_text())
    if not m:
        raise ValueError(f"{runtime_c_file(HEADER)} defines no RVVKIT_ABI_VERSION")
    return int(m.group(1))


ABI_VERSION = _version()
STATUS_DATA = int(re.search(r"^#define RVVKIT_STATUS_DATA (\d+)", header_text(), re.M).group(1))


def failed_step(rc: int, cuda: bool = False):
    """The index of the step that found its data out of range, from a run's return code, or
    None when `rc` means something else (0, a CUDA error)."""
    if cuda:
        return rc - STATUS_DATA if rc >= STATUS_DATA else None
    return rc - 1 if rc > 0 else None


@functools.lru_cache(maxsize=1)
def cdef() -> str:
    """The header's declarations as cffi takes them: preprocessor lines dropped, and with them
    what only a C++ compiler sees (`#ifdef __cplusplus` blocks: the `extern "C" {` lines)."""
    out, frames = [], []  # per open conditional: [tests __cplusplus, hides its lines]
    for line in header_text().splitlines():
        text = line.strip()
        if text.startswith("#if"):
            cxx = text.split()[-1] == "__cplusplus"
            frames.append([cxx, cxx and not text.startswith("#ifndef")])
        elif text.startswith("#else") and frames:
            frames[-1][1] = frames[-1][0] and not frames[-1][1]
        elif text.startswith("#endif") and frames:
            frames.pop()
        elif not text.startswith("#") and not any(hide for _, hide in frames):
            out.append(line)
    return "\n".join(out) + "\n"


def check_version(lib, what: str) -> None:
    """ExecutionError unless the loaded object `lib` speaks this rvvkit's ABI version."""
    got = lib.rvvkit_abi_version()
    if got != ABI_VERSION:
        raise ExecutionError(
            f"{what} speaks plan ABI {got}, this rvvkit ABI {ABI_VERSION} (runtime_c/"
            "rvvkit_abi.h): rebuild the artifact with this rvvkit")
