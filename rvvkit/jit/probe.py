"""Ask a compiler what it is: resolved path, `--version`, `-dumpmachine`.

Probing forks a process per question, so results are memoised per (argv, PATH) for the life of
the process; PATH is part of the key because the same name can resolve elsewhere after a change.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Optional, Tuple

from .. import children

PROBE_TIMEOUT_S = 30

# Launchers that run the real compiler named after them; the compiler, not the launcher, is
# what decides the output, so it is the one whose path goes into the cache key.
WRAPPERS = frozenset({"ccache", "sccache", "distcc", "icecc"})


@dataclass(frozen=True)
class ProbeResult:
    path: str           # realpath of the compiler executable ("" when not found)
    version: str        # first line of `--version`
    version_text: str   # the whole `--version` output, to tell gcc from clang
    machine: str        # `-dumpmachine`, or "" when the compiler does not answer it
    error: str          # why the compiler is unusable; "" when it is usable


def compiler_exe_index(argv: Tuple[str, ...]) -> int:
    """Index in argv of the real compiler, skipping a launcher such as ccache."""
    if len(argv) > 1 and os.path.basename(argv[0]) in WRAPPERS:
        return 1
    return 0


def _run(argv: Tuple[str, ...]) -> Tuple[int, str]:
    # LC_ALL=C: the answers are parsed, so they must not be translated.
    env = dict(os.environ, LC_ALL="C")
    try:
        proc = children.run(argv, env=env, timeout=PROBE_TIMEOUT_S, merge_stderr=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def _which(name: str) -> str:
    found = shutil.which(name)
    return os.path.realpath(found) if found else ""


@functools.lru_cache(maxsize=64)
def _probe_cached(argv: Tuple[str, ...], path_env: str) -> ProbeResult:
    del path_env  # only part of the memo key
    exe = argv[compiler_exe_index(argv)]
    path = _which(exe)
    if not path:
        return ProbeResult("", "", "", "", f"{exe!r} not found on PATH")
    if argv[0] != exe and not _which(argv[0]):
        return ProbeResult("", "", "", "", f"{argv[0]!r} not found on PATH")
    rc, text = _run(argv + ("--version",))
    if rc != 0:
        return ProbeResult(path, "", text, "", f"`{' '.join(argv)} --version` failed: "
                                                  f"{text.strip()[:300]}")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    version = lines[0] if lines else ""
    rc, machine = _run(argv + ("-dumpmachine",))
    machine = machine.strip().splitlines()[0] if rc == 0 and machine.strip() else ""
    return ProbeResult(path, version, text, machine, "")


def probe(argv: Tuple[str, ...]) -> ProbeResult:
    return _probe_cached(tuple(argv), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=64)
def _print_path_cached(argv: Tuple[str, ...], option: str, path_env: str) -> str:
    del path_env  # only part of the memo key
    rc, text = _run(argv + (option,))
    lines = text.strip().splitlines() if rc == 0 else []
    return lines[-1].strip() if lines else ""


def print_path(argv: Tuple[str, ...], option: str) -> str:
    """The answer to `argv -print-prog-name=X` / `-print-file-name=X` when the driver found X
    (an absolute path that exists), else "" (drivers echo the bare name when they did not)."""
    found = _print_path_cached(tuple(argv), option, os.environ.get("PATH", ""))
    return found if os.path.isabs(found) and os.path.exists(found) else ""


def clear_probe_cache() -> None:
    """Forget memoised answers (after installing a compiler, or in tests)."""
    _probe_cached.cache_clear()
    _print_path_cached.cache_clear()


def target_from_argv(argv: Tuple[str, ...]) -> Optional[str]:
    """The value of a `--target=T` / `-target T` / `--target T` option, if argv carries one."""
    for i, arg in enumerate(argv):
        if arg.startswith("--target="):
            return arg.split("=", 1)[1]
        if arg in ("--target", "-target") and i + 1 < len(argv):
            return argv[i + 1]
    return None
