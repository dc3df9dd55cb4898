"""What makes a cache entry safe to dlopen: a cache directory only its owner can write, an
object whose sha256 the entry recorded when rvvkit built it, and no leftovers of builds that
were killed.

Why: `dlopen` runs an object's constructors, so whoever can put a file into the cache runs code
as the next rvvkit user. The directory check keeps others out; the recorded digest turns a file
planted or damaged in place (by a tool, a full disk, a copy of someone's cache) into a miss that
is rebuilt, never into code that runs."""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Set

from ..errors import RvvkitError

log = logging.getLogger("rvvkit.jit")

DIGEST_SUFFIX = ".sha256"
STALE_AFTER_S = 24 * 3600  # a build dir whose process we cannot see is dropped after a day
_checked: Set[str] = set()
_swept: Set[str] = set()


class CacheError(RvvkitError):
    """The compile cache cannot be trusted (permissions, owner) or created."""


def secure_root(root: Path) -> None:
    """Creates `root` 0700, or checks an existing one: a directory, owned by this user and
    writable by no one else (group/other read bits are dropped, not refused: harmless).
    Checked once per process and path."""
    key = str(root)
    if key in _checked:
        return
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = root.stat()
    except OSError as e:
        raise CacheError(f"cannot create the compile cache {root}: {e.strerror or e} "
                         "(set RVVKIT_CACHE_DIR to a writable directory)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"compile cache {root} is not a directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheError(f"compile cache {root} is owned by uid {st.st_uid}, not by you (uid "
                         f"{os.getuid()}): its objects would run as you; use your own "
                         "directory (RVVKIT_CACHE_DIR)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(f"compile cache {root} is writable by others (mode "
                         f"{stat.S_IMODE(st.st_mode):04o}): anyone could plant code that rvvkit "
                         f"then loads; run `chmod 700 {root}` or set RVVKIT_CACHE_DIR")
    if stat.S_IMODE(st.st_mode) != 0o700:
        try:
            os.chmod(root, 0o700)
        except OSError:
            pass  # readable by others is no risk to integrity; keep going
    _checked.add(key)


def digest_path(obj: Path) -> Path:
    return obj.with_name(obj.name + DIGEST_SUFFIX)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record(obj: Path) -> None:
    """Writes the digest beside a freshly built object (before the entry is published)."""
    digest_path(obj).write_text(file_sha256(obj) + "\n", encoding="ascii")


def verified(obj: Path) -> bool:
    """True when `obj` has the digest its entry recorded. An entry without one (planted, or
    from an older rvvkit) or with another is not trusted."""
    try:
        want = digest_path(obj).read_text(encoding="ascii").strip()
        ok = len(want) == 64 and file_sha256(obj) == want
    except (OSError, UnicodeDecodeError):
        return False
    if not ok:
        log.warning("cache entry %s does not match the digest recorded when it was built: "
                    "rebuilding it", obj.parent)
    return ok


def build_dir_prefix(key: str) -> str:
    """A build dir's name carries its builder's pid, so that a sweep can tell a live build
    from the leftover of a killed one."""
    return f".tmp-{key[:16]}-{os.getpid()}-"


def _owner_gone(name: str, st: os.stat_result) -> bool:
    parts = name.split("-")
    pid = int(parts[2]) if len(parts) > 3 and parts[2].isdigit() else 0
    if pid > 0:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
    return time.time() - st.st_mtime > STALE_AFTER_S


def sweep(root: Path) -> int:
    """Removes build dirs of processes that no longer run and half-deleted `.trash-` dirs;
    once per process and root. Returns how many went."""
    if str(root) in _swept or not root.is_dir():
        return 0
    _swept.add(str(root))
    removed = 0
    for prefix in os.scandir(root):
        if not prefix.is_dir(follow_symlinks=False) or len(prefix.name) != 2:
            continue
        for entry in os.scandir(prefix.path):
            if not entry.name.startswith((".tmp-", ".trash-")):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name.startswith(".trash-") or _owner_gone(entry.name, st):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed += 1
    if removed:
        log.info("removed %d leftover build director%s from %s", removed,
                 "y" if removed == 1 else "ies", root)
    return removed
