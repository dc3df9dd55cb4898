"""File operations over the SSH exec channel, for boards whose server has no SFTP (Dropbear
without an sftp-server binary, an sshd_config without `Subsystem sftp`). Only POSIX shell
tools that busybox has too: cat, wc, mv, ln, mkdir, rm, tr, basename, and one sha256 tool.

Uploads stream the bytes into `cat > <path>.part-<random>` over the command's stdin; the board
then measures what it received (size, sha256) and moves the part file into place only if both
match what was sent, so a truncated or corrupted upload never appears under its real name.
Downloads are `cat`, followed by the board's size and sha256 of the file on stderr, compared
with what arrived. The sha256 tool is found once per connection (sha256sum, `openssl dgst`,
`busybox sha256sum`); without any, transfers are checked by size only, with one warning."""
from __future__ import annotations

import hashlib
import logging
import re
import shlex
import time
import uuid

from ..errors import ExecutionError

log = logging.getLogger("rvvkit.ssh")
HASHERS = {"sha256sum": "sha256sum", "openssl": "openssl dgst -sha256",
           "busybox": "busybox sha256sum", "none": ":"}
_PROBE = ("if command -v sha256sum >/dev/null 2>&1; then echo sha256sum\n"
          "elif command -v openssl >/dev/null 2>&1; then echo openssl\n"
          "elif busybox sha256sum </dev/null >/dev/null 2>&1; then echo busybox\n"
          "else echo none; fi")
_MARK = "@@rvvkit-sum@@"
_HEX = re.compile(r"\b([0-9a-f]{64})\b")
MISMATCH_RC = 72                         # upload script: what arrived is not what was sent


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ExecFiles:
    kind = "exec"

    def __init__(self, board):
        self.board = board
        res = self._probe()
        self.hasher = res.out.strip() if res.out.strip() in HASHERS else "none"
        if self.hasher == "none":
            log.warning("%s: no sha256sum, openssl or busybox on the board: exec transfers "
                        "are checked by size only", board.label)

    def _probe(self):
        """The first command after a refused SFTP subsystem. Dropbear, busy, has been seen to
        refuse that one channel ("Channel closed") and then to drop the whole connection. The
        probe changes nothing on the board and no file operation has used the connection yet,
        so it is asked again (three tries), over a fresh connection if the old one went."""
        for attempt in range(3):
            try:
                return self.board.sh(_PROBE, timeout=self.board.housekeeping_timeout,
                                     what="finding sha256 tool")
            except ExecutionError as exc:
                lost = not self.board.alive()
                if attempt == 2 or not (lost or "Channel closed" in str(exc)):
                    raise
                log.info("%s: %s; asking again%s", self.board.label, exc,
                         " over a new connection" if lost else "")
                time.sleep(0.2 * (attempt + 1))
                if lost:
                    self.board.reconnect()
        raise AssertionError("unreachable")

    def _sum(self, var: str) -> str:
        """Shell text printing `<size> <sha256 or ->` of the file named by $var."""
        return (f'n=$(wc -c < "${var}" | tr -d " ")\n'
                f'h=$({HASHERS[self.hasher]} < "${var}" 2>/dev/null)\n'
                f'printf "{_MARK} %s %s\\n" "$n" "${{h:--}}"')

    def _parse(self, text: str):
        """(size, sha256 or "") from the _sum line in text; (-1, "") if there is none."""
        for line in text.splitlines():
            if line.startswith(_MARK):
                parts = line.split(None, 2)
                hexes = _HEX.findall(parts[2] if len(parts) > 2 else "")
                size = parts[1] if len(parts) > 1 else ""
                return (int(size) if size.isdigit() else -1), (hexes[0] if hexes else "")
        return -1, ""

    def _check(self, what: str, path: str, size: int, sha: str, got_size: int,
               got_sha: str) -> None:
        if got_size != size or (got_sha and self.hasher != "none" and got_sha != sha):
            raise ExecutionError(
                f"{self.board.label}: {what} {path} over the exec channel arrived damaged: "
                f"sent {size} bytes (sha256 {sha[:16]}...), received {got_size} bytes "
                f"(sha256 {(got_sha or 'unknown')[:16]}...)")

    def _send(self, data: bytes) -> bytes:
        """The bytes written to the channel (a seam for the tests' corruption)."""
        return data

    def put(self, data: bytes, path: str) -> None:
        size, sha = len(data), digest(data)
        part = f"{path}.part-{uuid.uuid4().hex[:12]}"
        check = f'[ "$n" = {size} ]'
        if self.hasher != "none":
            check += f' && case "$h" in *{sha}*) true ;; *) false ;; esac'
        script = (f"t={shlex.quote(part)}\n"
                  f'cat > "$t" || {{ rm -f "$t"; exit 71; }}\n{self._sum("t")}\n'
                  f'if {check}; then mv -f "$t" {shlex.quote(path)}\n'
                  f'else rm -f "$t"; exit {MISMATCH_RC}; fi')
        res = self.board.run(script, stdin=self._send(data), timeout=self._timeout(),
                             what=f"uploading {path}")
        if res.rc in (0, MISMATCH_RC):  # the board checked; check its report here too
            got_size, got_sha = self._parse(res.out.decode("utf-8", "replace"))
            self._check("upload of", path, size, sha, got_size, got_sha)
        if res.rc != 0:
            raise ExecutionError(f"{self.board.label}: uploading {path} failed (exit "
                                 f"{res.rc}): {self._text(res.err)}")

    def get(self, path: str) -> bytes:
        script = (f"f={shlex.quote(path)}\n"
                  '[ -f "$f" ] || { echo "$f: no such file" >&2; exit 73; }\n'
                  f'cat "$f" || exit 74\n{{ {self._sum("f")}; }} >&2')
        res = self.board.run(script, timeout=self._timeout(), what=f"downloading {path}")
        if res.rc != 0:
            raise ExecutionError(f"{self.board.label}: downloading {path} failed: "
                                 f"{self._text(res.err)}")
        data = bytes(res.out)
        want_size, want_sha = self._parse(res.err.decode("utf-8", "replace"))
        self._check("download of", path, want_size, want_sha, len(data),
                    digest(data) if want_sha else "")
        return data

    def size(self, path: str) -> int:
        p = shlex.quote(path)
        res = self._sh(f"if [ -d {p} ]; then echo 0\nelif [ -e {p} ]; then "
                       f"wc -c < {p} | tr -d ' '\nelse echo -1; fi", f"stat {path}")
        text = res.out.strip()
        if res.rc != 0 or not text.lstrip("-").isdigit():
            raise ExecutionError(f"{self.board.label}: stat {path} failed: "
                                 f"{res.err.strip() or text}")
        return int(text)

    def mkdir(self, path: str, mode: int = 0o777) -> None:
        res = self._sh(f"mkdir -m {mode:o} {shlex.quote(path)}", f"creating {path}")
        if res.rc != 0:  # as SFTP's mkdir: the name must not exist yet
            raise ExecutionError(f"{self.board.label}: creating {path} failed: "
                                 f"{res.err.strip()}")

    def rename(self, src: str, dst: str) -> bool:
        """Atomic, never replacing dst (as SFTP's rename): False when dst exists. `mv` into
        an existing directory would move src *inside* it, so a race lost between the test
        and the move is detected afterwards and undone."""
        s, d = shlex.quote(src), shlex.quote(dst)
        res = self._sh(f"[ -e {d} ] && exit 1\n"
                       f"if [ -d {s} ]; then mv {s} {d} || exit 2\n"
                       f'  b={d}/$(basename {s}); [ -e "$b" ] && {{ rm -rf "$b"; exit 1; }}\n'
                       f"else ln {s} {d} 2>/dev/null || {{ [ -e {d} ] && exit 1; "
                       f"mv {s} {d} || exit 2; }}\n  rm -f {s}\nfi\nexit 0",
                       f"renaming {src}")
        if res.rc not in (0, 1):
            raise ExecutionError(f"{self.board.label}: renaming {src} to {dst} failed: "
                                 f"{res.err.strip()}")
        return res.rc == 0

    def remove_tree(self, path: str) -> None:
        res = self._sh(f"rm -rf -- {shlex.quote(path)}", f"removing {path}")
        if res.rc != 0:
            raise ExecutionError(f"{self.board.label}: removing {path}: {res.err.strip()}")

    def close(self) -> None:
        pass

    # -- helpers ---------------------------------------------------------------------------

    def _sh(self, script: str, what: str):
        return self.board.sh(script, timeout=self.board.housekeeping_timeout, what=what)

    def _timeout(self) -> float:
        return self.board.cfg.command_timeout

    @staticmethod
    def _text(err: bytes) -> str:
        return err.decode("utf-8", "replace").strip()[-300:] or "no message"
