"""One SSH connection to a board (paramiko): host-key checking, shell commands with timeouts
that kill what they started on the board, keepalives that notice a vanished board within
seconds (rvvkit.runtime.keepalive), and file transfers over SFTP or, on servers without it, the
exec channel (rvvkit.runtime.sftp_files, exec_files). Every failure becomes an rvvkit error
naming the board.

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

from .. import children
from ..errors import ExecutionError
from .boards import BoardConfig
from .keepalive import Keepalive
from .paramiko_import import paramiko_module
from .ssh_connect import connect

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


def _pass_on(out: bytearray, seen: int, on_out) -> None:
    """Hand on_out what `out` gained past `seen`, leaving out the pid line sh() prints first
    (until that line is complete, nothing)."""
    first = out.find(b"\n") + 1
    start = max(seen, first)
    if first and start < len(out):
        on_out(bytes(out[start:]))


@dataclass
class RawResult:
    rc: int
    out: bytes
    err: bytes


class Board:
    housekeeping_timeout = HOUSEKEEPING_TIMEOUT_S

    def __init__(self, cfg: BoardConfig):
        self.cfg = cfg
        self.label = cfg.label
        self.net_errors = _NET_ERRORS + (paramiko_module().SSHException,)
        self._files = None
        self.keepalive = None
        self.cache_in_use = []  # board cache entries this connection uses (never evicted)
        self._connect()
        try:
            self.machine, self.root, self.env = self._facts()
        except BaseException:
            self.close()
            raise
        # A wrapper that runs riscv64 programs (qemu-riscv64) makes any machine an RVV board.
        self.arch = cfg.arch or ("riscv64" if "riscv64" in cfg.wrapper else self.machine)

    def _connect(self) -> None:
        self.client = connect(self.cfg)
        self.transport = self.client.get_transport()
        self.keepalive = Keepalive(self.transport, self.label, self.cfg.keepalive_interval,
                                   self.cfg.keepalive_count_max)

    def reconnect(self) -> None:
        """A fresh connection in place of a dropped one. Only for the moment before any file
        operation (the transfer probe): nothing on the board or here refers to the old one."""
        self.keepalive.stop()
        self.client.close()
        self._connect()

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
        except self.net_errors as exc:
            gone = self.transport is None or not self.transport.is_active()
            raise ExecutionError(f"{self.label}: {what} failed: "
                                 f"{self.lost_text() if gone else exc}") from None

    def alive(self) -> bool:
        return self.transport is not None and self.transport.is_active()

    def sh(self, script: str, *, timeout: float, what: str, on_out=None) -> Result:
        """Run shell text on the board and wait for it. A command still running after
        `timeout` seconds is killed on the board, with everything it started, and raises
        ExecutionError; so does a connection lost meanwhile. `on_out` sees its stdout's
        bytes as they come (after the shell's pid line)."""
        res = self.run(script, timeout=timeout, what=what, on_out=on_out)
        return Result(res.rc, res.out.decode("utf-8", "replace"),
                      res.err.decode("utf-8", "replace"))

    def run(self, script: str, *, stdin: bytes = b"", timeout: float, what: str,
            on_out=None) -> RawResult:
        """sh() with bytes: `stdin` is written to the command (then EOF), its output comes
        back undecoded. The exec-channel file transfers stream through here."""
        transport = self.client.get_transport()
        with self._net(what):
            chan = self._open_channel(transport, what)
            # sshd starts the command in a new session (setsid), so the shell's pid, printed
            # first, is the process group of all it starts: `kill -- -pid` reaches all.
            # `exit $?` last stops bash from exec-ing the last command, so a signal that
            # kills the command comes back as an exit code (128+N), not a missing status.
            chan.exec_command(f"echo $$\n{script}\nexit $?")
        out, err, pause = bytearray(), bytearray(), 0.001
        deadline = time.monotonic() + timeout

        def take_out() -> None:
            """The channel's stdout so far, what is new handed to on_out."""
            seen = len(out)
            out.extend(chan.recv(1 << 20))
            if on_out is not None:
                _pass_on(out, seen, on_out)
        try:
            if stdin:
                # A write blocked on a vanished board is woken by the keepalive closing the
                # transport; `timeout` bounds a board that is alive but does not read.
                chan.settimeout(timeout)
                try:
                    chan.sendall(stdin)
                except self.net_errors:
                    # The command may have ended without reading it all (a full disk): its
                    # exit status and stderr, read below, say more than "socket closed".
                    if not transport.is_active():
                        raise ExecutionError(f"{self.label}: {what} failed: "
                                             f"{self.lost_text()}") from None
            with self._net(what):
                chan.shutdown_write()  # EOF: `cat > file` ends, a reading command sees none
            while True:
                children.check()  # rvvkit is ending (a signal): Terminated, handled below
                with self._net(what):
                    if chan.recv_ready():
                        take_out()
                        self.keepalive.saw_data()
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
                        take_out()
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
        except KeyboardInterrupt:  # Ctrl-C or a signal must not leave the command running there
            self._kill(self._pid_soon(chan, out))
            raise
        finally:
            chan.close()
        if chan.exit_status == -1:
            if not transport.is_active():
                raise ExecutionError(f"{self.label}: {self.lost_text()} during {what}")
            raise ExecutionError(f"{self.label}: {what} ended without an exit status")
        return RawResult(chan.exit_status, bytes(out).partition(b"\n")[2], bytes(err))

    def _open_channel(self, transport, what: str):
        """A new session channel, tried again while the connection is up and connect_timeout
        has not passed: a loaded server can drop a channel it has just opened (seen once in
        a CI run: Dropbear, "Unable to open channel." with the transport still active). No
        command has started on a channel that failed to open, so trying again is safe."""
        deadline = time.monotonic() + self.cfg.connect_timeout
        pause = 0.1
        while True:
            try:
                return transport.open_session(
                    timeout=max(deadline - time.monotonic(), 0.1))
            except self.net_errors as exc:
                if not transport.is_active() or time.monotonic() + pause > deadline:
                    raise
                log.info("%s: %s: opening a channel failed (%s); trying again", self.label,
                         what, exc)
                time.sleep(pause)
                pause *= 2

    def _pid_soon(self, chan, out: bytearray) -> bytes:
        """The command's pid, read for a few seconds more when it has not come yet (an
        interruption right after the start: the command may be running all the same)."""
        deadline = time.monotonic() + KILL_TIMEOUT_S
        with contextlib.suppress(*self.net_errors):
            while not (pid_of(out) or chan.exit_status_ready()) and time.monotonic() < deadline:
                if chan.recv_ready():
                    out += chan.recv(1 << 20)
                else:
                    time.sleep(0.01)
        return pid_of(out)

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
        except self.net_errors as exc:  # the timeout is reported anyway
            log.warning("%s: could not kill process group %s: %s", self.label, pid_s, exc)

    def lost_text(self) -> str:
        """How a dropped connection is named in errors: with the keepalive's reason if it
        gave the board up."""
        why = self.keepalive.lost if self.keepalive else ""
        return f"connection lost ({why or 'the board or its SSH server went away'})"

    # -- files: SFTP, or the exec channel where the server has none (rvvkit.runtime.sftp_files)

    @property
    def files(self):
        if self._files is None:  # decided once per connection, on the first file operation
            from .sftp_files import open_files
            self._files = open_files(self)
        return self._files

    def mktemp(self, prefix: str) -> str:
        """A fresh private directory under <workdir>/tmp (mkdir fails if the name exists,
        and the name is random: no round trip to ask for a free one)."""
        path = f"{self.root}/tmp/{prefix}{uuid.uuid4().hex[:16]}"
        self.files.mkdir(path, mode=0o700)
        return path

    def remove(self, path: str) -> None:
        """Best effort recursive removal of one of our directories (under the work root,
        nothing else). Used in finally blocks, so it never raises and never masks the error
        being handled; a dead connection leaves the directory behind."""
        if not path.startswith(self.root + "/") or not self.alive():
            return
        try:
            with self._net(f"removing {path}"):
                self.files.remove_tree(path)
        except ExecutionError as exc:
            log.warning("%s: could not remove %s: %s", self.label, path, exc)

    def put(self, data: bytes, path: str) -> None:
        self.files.put(data, path)

    def get(self, path: str) -> bytes:
        return self.files.get(path)

    def size(self, path: str) -> int:
        """Size of a file on the board, -1 when it does not exist."""
        return self.files.size(path)

    def mkdir(self, path: str) -> None:
        self.files.mkdir(path)

    def rename(self, src: str, dst: str) -> bool:
        """Atomic rename; False when dst exists (never replaces)."""
        return self.files.rename(src, dst)

    def close(self) -> None:
        if self.keepalive is not None:
            self.keepalive.stop()
        if self._files is not None:
            self._files.close()
        self.client.close()

    def describe(self) -> Dict[str, str]:
        return {"address": self.cfg.address, "uname -m": self.machine, "runs": self.arch,
                "wrapper": self.cfg.wrapper or "-", "workdir": self.root,
                "transfer": f"{self.files.kind} (transfer = {self.cfg.transfer})"}
