"""The build cache on a board (runner-<key>/ and kernels-<key>/ under its work dir, filled by
rvvkit.runtime.remote_jit): its size cap with least-recently-used eviction, and emptying it
(`rvvkit boards clean`).

Recency is an entry's mtime: a cache hit touches the entry, a new entry is fresh from its
build. Eviction runs on the board, as one small POSIX shell script after each new entry, so it
costs one round trip whatever the cache holds: newest first, add up `du -sk`, remove every
older entry once the total passes the cap. Entries the current session uses are never
removed, even if they alone pass the cap; another session's entry can be (a later run of that
session then fails and the next session rebuilds it), which a cap well above one model's
objects makes rare."""
from __future__ import annotations

import logging
import shlex
from typing import Tuple

from ..errors import ExecutionError

log = logging.getLogger("rvvkit.ssh")
ENTRY_GLOBS = ("runner-*", "kernels-*")

_EVICT = """cd {root} || exit 0
cap={cap_k}; total=0; n=0
for d in $(ls -dt {globs} 2>/dev/null); do
  [ -d "$d" ] || continue
  s=$(du -sk "$d" 2>/dev/null | cut -f1); s=${{s:-0}}
  case " {keep} " in *" $d "*) total=$((total + s)); continue ;; esac
  if [ $((total + s)) -gt "$cap" ]; then rm -rf "$d" && n=$((n + 1)) && echo "$d $s"
  else total=$((total + s)); fi
done
echo "kept $total"
"""

_CLEAN = """cd {root} || {{ echo "0 0"; exit 0; }}
n=0; k=0
for d in {globs}; do
  [ -d "$d" ] || continue
  s=$(du -sk "$d" 2>/dev/null | cut -f1)
  rm -rf "$d" && n=$((n + 1)) && k=$((k + ${{s:-0}}))
done
echo "$n $k"
"""


def lookup(board, entry: str, name: str) -> bool:
    """Whether entry/name is in the cache (a non-empty file); a hit marks the entry used now
    and in use by this connection's session. One round trip for both."""
    res = board.sh(f"[ -s {shlex.quote(entry + '/' + name)} ] || exit 1\n"
                   f"touch {shlex.quote(entry)}", timeout=board.housekeeping_timeout,
                   what="looking up the cache")
    if res.rc == 0:
        board.cache_in_use.append(entry)
    return res.rc == 0


def evict(board) -> Tuple[int, int]:
    """Remove least recently used entries until the cache fits board.cfg.cache_size bytes
    (0: no cap), keeping those this connection uses (board.cache_in_use) whatever their age.
    Returns (entries removed, KiB kept). Never raises: a failed eviction only leaves the
    cache bigger."""
    cap = board.cfg.cache_size
    if cap <= 0:
        return 0, -1
    names = " ".join(p.rsplit("/", 1)[-1] for p in board.cache_in_use)
    script = _EVICT.format(root=shlex.quote(board.root), cap_k=max(1, cap >> 10),
                           globs=" ".join(ENTRY_GLOBS), keep=names)
    try:
        res = board.sh(script, timeout=board.housekeeping_timeout, what="cache eviction")
    except ExecutionError as exc:
        log.warning("%s: cache eviction failed: %s", board.label, exc)
        return 0, -1
    lines = res.out.split("\n")
    removed = [ln for ln in lines if ln and not ln.startswith("kept ")]
    kept = next((int(ln.split()[1]) for ln in lines if ln.startswith("kept ")
                 and ln.split()[1].isdigit()), -1)
    if removed:
        log.info("%s: cache over %d MiB: removed %d least recently used entries (%s)",
                 board.label, cap >> 20, len(removed), ", ".join(r.split()[0] for r in removed))
    return len(removed), kept


def clean(board) -> Tuple[int, int]:
    """Empty the board's build cache: (entries removed, KiB freed). Temporary dirs of
    sessions that may be running are left alone."""
    res = board.sh(_CLEAN.format(root=shlex.quote(board.root), globs=" ".join(ENTRY_GLOBS)),
                   timeout=board.housekeeping_timeout, what="emptying the cache")
    parts = res.out.split()
    if res.rc != 0 or len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ExecutionError(f"{board.label}: emptying the cache in {board.root} failed: "
                             f"{res.err.strip() or res.out.strip()}")
    return int(parts[0]), int(parts[1])
