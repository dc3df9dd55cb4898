"""ISA profiles: which RISC-V extensions a build may use, as data (toolchain/isa/*.toml), and
what follows from a profile in one place each: the compiler's architecture flags, and QEMU's
-cpu properties for counting (QEMU 7.2, which runs what it is given) and for checking (the
QEMU of [qemu.check], which traps every extension the -cpu leaves out).

    k1 = profile("k1")
    k1.arch_flags(compiler)              # -march=rv64gcv_zfh_zvfh_... for its family
    k1.qemu_props("qemu7")               # ",Zfh=true,zba=true,..."
    k1.qemu_props("qemu10")              # every extension QEMU 10 knows, on or off
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..errors import RvvkitError
from ..resources import load_toml, toolchain_dir
from . import targets

DEFAULT = "rv64gcv"   # plain RVV 1.0: what every RVV board runs


@dataclass(frozen=True)
class IsaProfile:
    name: str
    summary: str
    extensions: Tuple[str, ...]           # beyond RV64GC
    flags: Dict[str, Tuple[str, ...]]     # compiler family (or family+major) -> arch flags

    def arch_flags(self, family: str, version: str = "") -> Tuple[str, ...]:
        """The architecture flags for a compiler of `family` whose `--version` line is
        `version`: the profile's own for that family and major version, else for the family,
        else the target's plain-RVV flags (a profile without [flags] is plain RVV)."""
        major = re.search(r"version (\d+)", version)
        for key in ([f"{family}{major.group(1)}"] if major else []) + [family]:
            if key in self.flags:
                return self.flags[key]
        if self.flags:
            return self.flags.get("gcc", ())
        return targets.riscv().family_flags(family).arch

    def qemu_props(self, qemu: str) -> str:
        """The -cpu properties of this profile for `qemu` ("qemu7" or "qemu10"), to append to
        the target's -cpu string. qemu7 turns on what it can name; qemu10 names every
        extension it knows, on or off, so nothing outside the profile can run."""
        spelling: Dict[str, str] = targets.riscv().get("isa", qemu)
        props = []
        for ext, prop in spelling.items():
            on = ext in self.extensions
            if prop and (on or qemu != "qemu7"):
                props.append(f"{prop}={'true' if on else 'false'}")
        return "".join("," + p for p in props)


def run_suffix(name: Optional[str], checked: bool) -> str:
    """What follows a run's path in a label or table: "" for plain RVV, " k1", " k1 (checked)"."""
    shown = name if name and name != DEFAULT else ""
    text = f"{shown or DEFAULT} (checked)" if checked else shown
    return f" {text}" if text else ""


@functools.lru_cache(maxsize=None)
def profile(name: Optional[str] = None) -> IsaProfile:
    """An ISA profile by name (toolchain/isa/<name>.toml); None: the plain-RVV default."""
    name = name or DEFAULT
    path = toolchain_dir() / "isa" / f"{name}.toml"
    if not path.is_file():
        raise RvvkitError(f"no ISA profile {name!r} (known: {', '.join(profile_names())}); "
                          f"profiles are toolchain/isa/*.toml")
    data: Dict[str, Any] = load_toml(path)
    exts = tuple(str(e).lower() for e in data.get("extensions", ()))
    if "v" not in exts:
        raise RvvkitError(f"{path}: an RVV profile must list the vector extension 'v'")
    flags = {k: tuple(v) for k, v in dict(data.get("flags", {})).items()}
    return IsaProfile(str(data.get("name", name)), str(data.get("summary", "")), exts, flags)


def profile_names() -> List[str]:
    return sorted(p.stem for p in (toolchain_dir() / "isa").glob("*.toml"))


def check_qemu_path() -> Path:
    """Where scripts/setup.sh puts the checking QEMU ([qemu.check]): the user's cache."""
    facts = targets.riscv().get("qemu", "check")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rvvkit" / f"qemu-{facts['version']}" / "qemu-riscv64"


def check_qemu() -> str:
    """The checking QEMU: $RVVKIT_QEMU_CHECK, else the one setup.sh fetched (its hash checked).
    RvvkitError saying how to get it when there is none."""
    named = os.environ.get("RVVKIT_QEMU_CHECK", "").strip()
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise RvvkitError(f"$RVVKIT_QEMU_CHECK={named!r} is not an executable file: name "
                              "a qemu-riscv64 10.0 or newer, or unset it to use the one "
                              "scripts/setup.sh fetches")
        return named
    path = check_qemu_path()
    if not path.is_file():
        raise RvvkitError(f"no checking QEMU at {path}: `bash scripts/setup.sh` fetches it "
                          "(qemu-user 10.0 from bookworm-backports), or set RVVKIT_QEMU_CHECK")
    stat = path.stat()
    if _sha256(str(path), stat.st_size, stat.st_mtime_ns) != \
            targets.riscv().get("qemu", "check", "sha256"):
        raise RvvkitError(f"{path} is not the checking QEMU scripts/setup.sh fetched (its "
                          "sha256 differs): remove it and run the set-up again")
    return str(path)


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """The file's hash, read once per process while its size and time stay the same: every
    checked session asks, and the binary is tens of megabytes."""
    del size, mtime_ns   # the cache key only
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
