"""One SSH connection to a board (paramiko): host-key checking, shell commands with timeouts
that kill what they started on the board, and SFTP transfers. Every failure becomes an rvvkit
error naming the board.

    board = Board(board_config("ssh://k1-board"))
    res = board.sh("uname -a", timeout=10, what="uname")

Commands are POSIX shell text (the SSH protocol carries one string, run by the user's login
shell), built from argv lists with shlex quoting."""
from __future__ import annotations

import contextlib
import logging
import shlex
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Dict, Iterator

from ..errors import ExecutionError
from .boards import BoardConfig
from .ssh_connect import connect, paramiko_module

log = logging.getLogger("rvvkit.ssh")

KILL_TIMEOUT_S = 5.0
EOF_GRACE_S = 2.0  # after the exit status, how long to wait for the output's end
HOUSEKEEPING_TIMEOUT_S = 60.0  # mkdir, rm, probes: quick everywhere, bounded in any case
_NET_ERRORS = (OSError, EOFError, socket.timeout)  # paramiko.SSHException added lazily


@dataclass
class Result:
    rc: int
    out: str
    err: str


def drained(chan, grace: float = EOF_GRACE_S) -> bool:
    """True once the channel has buffered output to read, or has had its EOF, or `grace`
    seconds pass after the exit status without either (a server that never sends EOF)."""
    deadline = time.monotonic() + grace
    while not (chan.eof_received or chan.recv_ready() or chan.recv_stderr_ready()):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.005)
    return chan.eof_received


def pid_of(out: bytearray) -> bytes:
    """The pid sh() makes the board print first, once its line is complete."""
    line, newline, _ = bytes(out).partition(b"\n")
    return line if newline else b""


class Board:
    def __init__(self, cfg: BoardConfig):
        self.cfg = cfg
        self.label = cfg.label
        self._net_errors = _NET_ERRORS + (paramiko_module().SSHException,)
        self._sftp = None
        self.client = connect(cfg)
        self.transport = self.client.get_transport()
        try:
            self.machine, self.root, self.env = self._facts()
        except BaseException:
            self.client.close()
            raise
        # A wrapper that runs riscv64 programs (qemu-riscv64) makes any machine an RVV board.
        self.arch = cfg.arch or ("riscv64" if "riscv64" in cfg.wrapper else self.machine)

    def _facts(self):
        """(uname -m, absolute work dir, the board's RVVKIT_* settings) in one round trip."""
        root = self.cfg.workdir
        if root == "~" or root.startswith("~/"):  # $HOME, not a literal ~, on the board
            root_sh = '"$HOME"' + (shlex.quote(root[1:]) if len(root) > 1 else "")
        else:
            root_sh = shlex.quote(root)
        res = self.sh(f"uname -m\nmkdir -p {root_sh}/tmp && cd {root_sh} && pwd -P\n"
                      'printf "%s\\n" "${RVVKIT_COMPILER-}" "${TVM_RVV_COMPILER-}" '
                      '"${RVVKIT_CFLAGS-}"', timeout=HOUSEKEEPING_TIMEOUT_S,
                      what="reading the board's settings")
        lines = res.out.split("\n")
        if res.rc != 0 or len(lines) < 5:
            raise ExecutionError(f"{self.label}: cannot create the work directory {root!r}: "
                                 f"{res.err.strip() or res.out.strip()}")
        env = dict(zip(("RVVKIT_COMPILER", "TVM_RVV_COMPILER", "RVVKIT_CFLAGS"), lines[2:5]))
        return lines[0].strip(), lines[1].strip(), env

    # -- commands ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _net(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._net_errors as exc:
            gone = self.transport is None or not self.transport.is_active()
            raise ExecutionError(f"{self.label}: {what} failed: "
                                 f"{'connection lost' if gone else exc}") from None

    def alive(self) -> bool:
        return self.transport is not None and self.transport.is_active()

    def sh(self, script: str, *, timeout: float, what: str) -> Result:
        """Run shell text on the board and wait for it. A command still running after
        `timeout` seconds is killed on the board, with everything it started, and raises
        ExecutionError; so does a connection lost meanwhile."""
        transport = self.client.get_transport()
        with self._net(what):
            chan = transport.open_session(timeout=self.cfg.connect_timeout)
            # sshd starts the command in a new session (setsid), so the shell's pid, printed
            # first, is the process group of all it starts: `kill -- -pid` reaches all.
            # `exit $?` last stops bash from exec-ing the last command, so a signal that
            # kills the command comes back as an exit code (128+N), not a missing status.
            chan.exec_command(f"echo $$\n{script}\nexit $?")
        out, err, pause = bytearray(), bytearray(), 0.001
        deadline = time.monotonic() + timeout
        try:
            while True:
                with self._net(what):
                    if chan.recv_ready():
                        out += chan.recv(1 << 16)
                        pause = 0.001
                        continue
                    if chan.recv_stderr_ready():
                        err += chan.recv_stderr(1 << 16)
                        pause = 0.001
                        continue
                if not transport.is_active() or (chan.exit_status_ready()
                                                  and (chan.eof_received or drained(chan))):
                    # sshd may send the exit status before the last output it read from the
                    # command (seen: a 5-line answer cut to 2): output is complete only at
                    # the channel's EOF, which `drained` waits for briefly.
                    while chan.recv_ready():
                        out += chan.recv(1 << 16)
                    while chan.recv_stderr_ready():
                        err += chan.recv_stderr(1 << 16)
                    break
                if time.monotonic() > deadline:
                    self._kill(pid_of(out))
                    raise ExecutionError(
                        f"{self.label}: {what} did not finish within {timeout:g} s and was "
                        f"killed on the board (raise command_timeout to allow longer)\n"
                        f"command: {script.strip()}")
                time.sleep(pause)
                pause = min(2 * pause, 0.02)
        except KeyboardInterrupt:  # Ctrl-C here must not leave the command running there
            self._kill(pid_of(out))
            raise
        finally:
            chan.close()
        if chan.exit_status == -1:
            if not transport.is_active():
                raise ExecutionError(f"{self.label}: connection lost during {what} "
                                     f"(the board or its SSH server went away)")
            raise ExecutionError(f"{self.label}: {what} ended without an exit status")
        text = bytes(out).decode("utf-8", "replace")
        return Result(chan.exit_status, text.partition("\n")[2],
                      bytes(err).decode("utf-8", "replace"))

    def _kill(self, pid: bytes) -> None:
        if not pid.strip().isdigit() or int(pid) <= 1:
            return
        pid_s = pid.strip().decode()
        try:
            chan = self.client.get_transport().open_session(timeout=KILL_TIMEOUT_S)
            chan.exec_command(f"kill -KILL -- -{pid_s} 2>/dev/null || kill -KILL {pid_s}")
            end = time.monotonic() + KILL_TIMEOUT_S
            while not chan.exit_status_ready() and time.monotonic() < end:
                time.sleep(0.01)
            chan.close()
        except self._net_errors as exc:  # the timeout is reported anyway
            log.warning("%s: could not kill process group %s: %s", self.label, pid_s, exc)

    def mktemp(self, prefix: str) -> str:
        """A fresh private directory under <workdir>/tmp (SFTP mkdir fails if the name
        exists, and the name is random: no shell round trip needed)."""
        path = f"{self.root}/tmp/{prefix}{uuid.uuid4().hex[:16]}"
        with self._net(f"creating {path}"):
            self.sftp.mkdir(path, mode=0o700)
        return path

    def remove(self, path: str) -> None:
        """Best effort recursive removal of one of our directories, over SFTP (a few round
        trips, no shell started). Used in finally blocks, so it never raises and never masks
        the error being handled; a dead connection leaves the directory behind."""
        if not path.startswith(self.root + "/") or not self.alive():
            return
        try:
            self._remove_tree(path)
        except (*self._net_errors, ExecutionError) as exc:
            log.warning("%s: could not remove %s: %s", self.label, path, exc)

    def _remove_tree(self, path: str) -> None:
        import stat
        try:
            entries = self.sftp.listdir_attr(path)
        except FileNotFoundError:
            return
        for entry in entries:
            child = f"{path}/{entry.filename}"
            if stat.S_ISDIR(entry.st_mode or 0):
                self._remove_tree(child)
            else:
                self.sftp.remove(child)
        self.sftp.rmdir(path)

    # -- files ---------------------------------------------------------------------------------

    @property
    def sftp(self):
        if self._sftp is None:
            with self._net("opening SFTP"):
                self._sftp = self.client.open_sftp()
                self._sftp.get_channel().settimeout(self.cfg.command_timeout)
        return self._sftp

    def put(self, data: bytes, path: str) -> None:
        import io
        with self._net(f"uploading {path}"):
            self.sftp.putfo(io.BytesIO(data), path, file_size=len(data), confirm=True)

    def get(self, path: str) -> bytes:
        import io
        buf = io.BytesIO()
        with self._net(f"downloading {path}"):
            self.sftp.getfo(path, buf)
        return buf.getvalue()

    def size(self, path: str) -> int:
        """Size of a file on the board, -1 when it does not exist."""
        try:
            return int(self.sftp.stat(path).st_size or 0)
        except FileNotFoundError:
            return -1
        except self._net_errors as exc:
            raise ExecutionError(f"{self.label}: stat {path} failed: {exc}") from None

    def mkdir(self, path: str) -> None:
        with self._net(f"creating {path}"):
            self.sftp.mkdir(path)

    def rename(self, src: str, dst: str) -> bool:
        """Atomic rename; False when dst exists (SFTP rename never replaces)."""
        try:
            self.sftp.rename(src, dst)
            return True
        except OSError:
            if self.alive():
                return False
            raise ExecutionError(f"{self.label}: connection lost renaming {src}") from None

    def close(self) -> None:
        try:
            if self._sftp is not None:
                self._sftp.close()
        except self._net_errors:
            pass
        self.client.close()

    def describe(self) -> Dict[str, str]:
        return {"address": self.cfg.address, "uname -m": self.machine, "runs": self.arch,
                "wrapper": self.cfg.wrapper or "-", "workdir": self.root}
