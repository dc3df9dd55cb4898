"""The on-disk cache of compiled objects: where it lives, what its key covers, how entries are
published atomically and evicted.

Layout: <cache>/<key[:2]>/<key>/{<name>.c | <name>.cu, <name>.so | <name>, <object>.sha256,
cmd.txt}; the cache directory is 0700 and checked, the digest checked before an object is
returned (cache_trust.py); failed
builds keep their source under <cache>/failed/<key>/. An entry is built in a temp dir beside its
final place and renamed into it, so a reader (another thread or process) sees a whole entry or
none.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Dict, Iterable, Optional, Sequence

from . import cache_trust as trust
from .compilers import Compiler

# Bump when the layout, the key or the build command's shape changes: old entries become misses.
CACHE_SCHEMA = 1
KINDS = {"so": ".so", "exe": ""}
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
SUFFIXES = (".c", ".cu")
_TRUE = ("1", "true", "yes", "on")


def cache_dir() -> Path:
    """$RVVKIT_CACHE_DIR, else $XDG_CACHE_HOME/rvvkit, else ~/.cache/rvvkit."""
    explicit = os.environ.get("RVVKIT_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "rvvkit"


def cache_enabled() -> bool:
    """False when $RVVKIT_NO_CACHE is 1/true/yes/on."""
    return os.environ.get("RVVKIT_NO_CACHE", "").strip().lower() not in _TRUE


def check_name(name: str, kind: str) -> None:
    # name becomes a file name inside the entry; keep it to a plain, portable one.
    if not _NAME_RE.match(name):
        raise ValueError(f"invalid unit name {name!r}: use letters, digits, '_', '.', '-'")
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of {sorted(KINDS)}")


def check_suffix(suffix: str) -> None:
    if suffix not in SUFFIXES:
        raise ValueError(f"unknown source suffix {suffix!r}; expected one of {SUFFIXES}")


def artifact_name(name: str, kind: str) -> str:
    return name + KINDS[kind]


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def key_material(source: str, compiler: Compiler, flags: Sequence[str], *, name: str = "model",
                 kind: str = "so", extra_sources: Iterable[os.PathLike] = (),
                 link_flags: Sequence[str] = (), suffix: str = ".c",
                 depends: Iterable[os.PathLike] = ()) -> Dict[str, object]:
    """Everything the cache key covers, as a JSON-able dict (shown by `rvvkit doctor`)."""
    extras = [[Path(p).name, _sha256_bytes(Path(p).read_bytes())] for p in extra_sources]
    # suffix and depends enter only when used, so the keys of plain C builds (here and on
    # boards, rvvkit.runtime.remote_jit) stay what they were.
    optional: Dict[str, object] = {}
    if suffix != ".c":
        optional["suffix"] = suffix
    deps = [[Path(p).name, _sha256_bytes(Path(p).read_bytes())] for p in depends]
    if deps:
        optional["depends"] = deps
    return {
        **optional,
        "schema": CACHE_SCHEMA,
        "source_sha256": _sha256_bytes(source.encode("utf-8")),
        "compiler": compiler.identity(),
        "machine": compiler.machine,
        "flags": list(flags),
        "link_flags": list(link_flags),
        "extra_sources": extras,
        "kind": kind,
        "name": name,
    }


def cache_key(source: str, compiler: Compiler, flags: Sequence[str], **kw) -> str:
    """sha256 over key_material(); same arguments, same key, on any machine."""
    blob = json.dumps(key_material(source, compiler, flags, **kw), sort_keys=True)
    return _sha256_bytes(blob.encode("utf-8"))


def entry_dir(key: str, root: Optional[Path] = None) -> Path:
    return (root or cache_dir()) / key[:2] / key


def failed_dir(key: str, root: Optional[Path] = None) -> Path:
    return (root or cache_dir()) / "failed" / key


_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"MZ")


def is_valid_artifact(path: Path) -> bool:
    """A non-empty file that starts like an object file; anything else is a cache miss."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    if not head:
        return False
    return not sys.platform.startswith("linux") or head.startswith(_MAGIC)


def new_build_dir(key: str, name: str, use_cache: bool) -> Path:
    """A fresh private dir to build in: beside the entry (same filesystem, so the final rename
    is atomic) when caching, a plain temp dir otherwise."""
    if not use_cache:
        return Path(tempfile.mkdtemp(prefix=f"rvvkit-{name}-"))
    root = cache_dir()
    trust.secure_root(root)
    trust.sweep(root)
    parent = entry_dir(key).parent
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=trust.build_dir_prefix(key), dir=parent))


def lookup(key: str, artifact: str) -> Optional[Path]:
    """The entry's object when it exists and is the one rvvkit built (cache_trust.verified);
    an entry that fails the check is evicted, so the caller rebuilds it."""
    trust.secure_root(cache_dir())
    path = entry_dir(key) / artifact
    if not is_valid_artifact(path):
        return None
    if trust.verified(path):
        return path
    _move_aside_and_delete(path.parent)
    return None


def _move_aside_and_delete(path: Path) -> None:
    # Rename first (atomic) so no reader ever sees a half-deleted directory, then delete.
    trash = path.with_name(f".trash-{path.name[:16]}-{uuid.uuid4().hex[:8]}")
    try:
        os.replace(path, trash)
    except FileNotFoundError:
        return  # someone else removed it already
    shutil.rmtree(trash, ignore_errors=True)


def evict(artifact: os.PathLike) -> None:
    """Drop the cache entry holding `artifact` (e.g. it built but fails to load)."""
    entry = Path(artifact).resolve().parent
    if entry.is_dir() and entry.parent.parent == cache_dir().resolve():
        _move_aside_and_delete(entry)


def publish(build_dir: Path, key: str, artifact: str) -> Path:
    """Rename build_dir into the entry for key; return the artifact path inside the entry.

    If another process published first, its entry wins and ours is discarded; a broken entry
    in the way is evicted. Renaming a directory onto a non-empty one fails, which is what makes
    this safe without locks.
    """
    final = entry_dir(key)
    for _ in range(5):
        try:
            os.replace(build_dir, final)
            return final / artifact
        except OSError:
            if is_valid_artifact(final / artifact) and trust.verified(final / artifact):
                shutil.rmtree(build_dir, ignore_errors=True)
                return final / artifact
            _move_aside_and_delete(final)
    raise OSError(f"could not publish cache entry {final}")


def keep_failure(build_dir: Path, key: str) -> Path:
    """Move a failed build under <cache>/failed/<key> so its source outlives the call."""
    dest = failed_dir(key)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        _move_aside_and_delete(dest)
    try:
        os.replace(build_dir, dest)
    except OSError:  # a concurrent failure of the same unit got there first: keep its copy
        shutil.rmtree(build_dir, ignore_errors=True)
    return dest
