"""File operations on a board over SFTP, and the choice, once per connection, between SFTP and
the exec channel (rvvkit.runtime.exec_files) for servers that have no SFTP: Dropbear without
an sftp-server binary, or an sshd_config without a `Subsystem sftp` line.

Both classes answer the same calls (put, get, size, mkdir, rename, remove_tree, close) with the
same meaning, so Board does not care which one it holds."""
from __future__ import annotations

import io
import logging
import stat

from ..errors import ExecutionError

log = logging.getLogger("rvvkit.ssh")


class SftpFiles:
    kind = "sftp"

    def __init__(self, board, sftp):
        self.board, self.sftp = board, sftp

    def put(self, data: bytes, path: str) -> None:
        with self.board._net(f"uploading {path}"):
            # confirm=True: stat the file afterwards and compare sizes.
            self.sftp.putfo(io.BytesIO(data), path, file_size=len(data), confirm=True)

    def get(self, path: str) -> bytes:
        buf = io.BytesIO()
        with self.board._net(f"downloading {path}"):
            self.sftp.getfo(path, buf)
        return buf.getvalue()

    def size(self, path: str) -> int:
        with self.board._net(f"stat {path}"):
            try:
                return int(self.sftp.stat(path).st_size or 0)
            except FileNotFoundError:
                return -1

    def mkdir(self, path: str, mode: int = 0o777) -> None:
        with self.board._net(f"creating {path}"):
            self.sftp.mkdir(path, mode=mode)  # fails if the name exists

    def rename(self, src: str, dst: str) -> bool:
        try:
            self.sftp.rename(src, dst)        # SFTP rename never replaces
            return True
        except OSError:
            if self.board.alive():
                return False
            raise ExecutionError(f"{self.board.label}: {self.board.lost_text()} renaming "
                                 f"{src}") from None

    def remove_tree(self, path: str) -> None:
        """A few round trips, no shell started."""
        try:
            entries = self.sftp.listdir_attr(path)
        except FileNotFoundError:
            return
        for entry in entries:
            child = f"{path}/{entry.filename}"
            if stat.S_ISDIR(entry.st_mode or 0):
                self.remove_tree(child)
            else:
                self.sftp.remove(child)
        self.sftp.rmdir(path)

    def close(self) -> None:
        try:
            self.sftp.close()
        except Exception:  # closing a dead channel: nothing left to do
            pass


def open_files(board):
    """SftpFiles, or ExecFiles where SFTP is refused (or the board's transfer option says
    exec). A server without SFTP refuses the subsystem request ("Channel closed") or starts
    nothing that speaks SFTP (EOF during the version exchange); either way the connection
    itself stays up, which is what tells "no SFTP here" from "the board went away"."""
    from .exec_files import ExecFiles
    mode = board.cfg.transfer
    if mode != "exec":
        try:
            sftp = board.client.open_sftp()
            sftp.get_channel().settimeout(board.cfg.command_timeout)
            log.info("%s: file transfers over SFTP", board.label)
            return SftpFiles(board, sftp)
        except board.net_errors as exc:
            if not board.alive():
                raise ExecutionError(f"{board.label}: opening SFTP failed: "
                                     f"{board.lost_text()}") from None
            if mode == "sftp":
                raise ExecutionError(f"{board.label}: opening SFTP failed: {exc or type(exc)}"
                                     " (transfer = \"sftp\"; use transfer=auto or exec for a "
                                     "server without SFTP)") from None
            why = f"SFTP unavailable ({str(exc).strip() or type(exc).__name__})"
    else:
        why = "transfer = exec"
    files = ExecFiles(board)
    log.info("%s: %s: file transfers over the exec channel (cat, checked with %s)",
             board.label, why, files.hasher if files.hasher != "none" else "sizes only")
    return files
