"""Precompiled kernels inside the artifact, for targets that cannot compile: boards shipped
without a compiler (Buildroot images, vendor TinaLinux), a host without cc.

`rvvkit build --precompile riscv64,x86_64` (or `rvvkit pack`) compiles the artifact's C with
the selected compiler and stores, per target triple, the kernels as `.rvvkit.so.<triple>` and
the C runner as `.rvvkit.runner.<triple>` (boards run the runner), each checksummed like every
section (that side is precompile.py; this module reads the sections back).
meta["precompiled"][triple] records how they were built, as the compile cache keys an object:
compiler identity, flags, cache key, and the VLEN the code assumes (None: any).

Executors JIT-compile by default and fall back to these when the target has no compiler, or
use them first when asked (`prefer_precompiled`, `--prefer-precompiled`,
RVVKIT_PREFER_PRECOMPILED=1); they say which they used. The objects are written to a private
directory of the session, never into the shared compile cache: an artifact's claim about what
it was built from must not become another model's cache hit."""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

from .container import Artifact
from ..errors import ArtifactError, RvvkitError

KERNELS_PREFIX = ".rvvkit.so."
RUNNER_PREFIX = ".rvvkit.runner."
_ALIASES = {"riscv64": "riscv64", "rv64": "riscv64", "rvv": "riscv64", "x86_64": "x86_64",
            "amd64": "x86_64", "x86-64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
_TRUE = ("1", "true", "yes", "on")


def arch_of(name: str) -> str:
    """'riscv64', 'x86_64', 'aarch64' from an arch, a triple or `uname -m`; else RvvkitError."""
    head = name.strip().lower().split("-")[0]
    if head == "host":
        head = platform.machine().lower()
    if head not in _ALIASES:
        raise RvvkitError(f"unknown target {name!r} for precompiled kernels: use riscv64 or "
                          f"this machine's {platform.machine()}")
    return _ALIASES[head]


def prefer_from_env(prefer: Optional[bool]) -> bool:
    if prefer is not None:
        return bool(prefer)
    return os.environ.get("RVVKIT_PREFER_PRECOMPILED", "").strip().lower() in _TRUE


def available(art: Artifact) -> Dict[str, str]:
    """{arch: triple} of the precompiled kernels the artifact carries."""
    out = {}
    for triple, entry in (art.meta.get("precompiled") or {}).items():
        if isinstance(entry, dict) and KERNELS_PREFIX + triple in art.extra:
            out[str(entry.get("arch"))] = triple
    return out


def missing(art: Artifact, arch: str, why: str = "") -> ArtifactError:
    have = ", ".join(sorted(available(art))) or "none"
    return ArtifactError(f"{why + '; ' if why else ''}the artifact carries no precompiled "
                         f"kernels for {arch} (it has: {have}); add them with `rvvkit pack "
                         f"ARTIFACT --precompile {arch}`")


def label(art: Artifact, triple: str) -> str:
    compiler = str(art.meta["precompiled"][triple].get("compiler", ""))
    lines = compiler.splitlines()
    version = lines[1] if len(lines) > 1 else compiler
    return f"precompiled {triple} kernels ({version.strip()[:60]})"


def materialize(art: Artifact, arch: str, dest: Path) -> Tuple[Path, Path, str]:
    """(kernels path, runner path, a label) written under `dest` for `arch`; ArtifactError
    naming the way out when the artifact has none."""
    triple = available(art).get(arch)
    if triple is None:
        raise missing(art, arch)
    dest.mkdir(parents=True, exist_ok=True)
    so, runner = dest / f"model-{triple}.so", dest / f"rvvkit_runner-{triple}"
    so.write_bytes(art.extra[KERNELS_PREFIX + triple])
    if RUNNER_PREFIX + triple in art.extra:
        runner.write_bytes(art.extra[RUNNER_PREFIX + triple])
        runner.chmod(0o700)
    return so, runner, label(art, triple)


def bytes_for(art: Artifact, arch: str) -> Tuple[bytes, Optional[bytes], str]:
    """(kernels, runner or None, label) for `arch`, for executors that upload them."""
    triple = available(art).get(arch)
    if triple is None:
        raise missing(art, arch)
    return (art.extra[KERNELS_PREFIX + triple], art.extra.get(RUNNER_PREFIX + triple),
            label(art, triple))


def choose(session, arch: str, prefer: Optional[bool], jit: Callable[[], object]):
    """For a local executor: ("jit", jit()) when compiling works and precompiled kernels are
    not preferred, else (label, (kernels path, runner path)) written into a private directory
    removed with `session`. A missing compiler with no precompiled kernels for `arch` is
    CompilerNotFound naming both ways out."""
    import logging
    import shutil
    import tempfile
    import weakref
    from ..errors import CompilerNotFound
    art = session.artifact
    if not prefer_from_env(prefer):
        try:
            return "jit", jit()
        except CompilerNotFound as exc:
            if arch not in available(art):
                raise CompilerNotFound(f"{exc}; or run precompiled kernels: `rvvkit pack "
                                       f"ARTIFACT --precompile {arch}`") from None
            logging.getLogger("rvvkit").warning(
                "%s: no compiler (%s); running the artifact's %s", session.executor,
                str(exc).splitlines()[0][:120], label(art, available(art)[arch]))
    elif arch not in available(art):
        raise missing(art, arch, "precompiled kernels were asked for")
    tmp = Path(tempfile.mkdtemp(prefix="rvvkit-precompiled-"))
    weakref.finalize(session, shutil.rmtree, str(tmp), True)
    so, runner, text = materialize(art, arch, tmp)
    return text, (so, runner)
