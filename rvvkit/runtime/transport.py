"""Where the C runner's files live and how its command runs, for RunnerSession: a local
process (QEMU on this machine) or a board's shell over SSH.

A transport knows nothing of the runner's options or of QEMU: it makes and removes run dirs,
moves bytes in and out of them, and runs one command in one of them."""
from __future__ import annotations

import shlex
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import List, Union

from .. import children

Command = Union[List[str], str]  # an argv list (local) or POSIX shell text (a board)


@dataclass
class RawRun:
    """One finished runner process: what ran, what it printed, how long it took."""
    argv: Command
    returncode: int
    stdout: str
    stderr: str
    wall_seconds: float
    workdir: Union[Path, str]

    @property
    def command_text(self) -> str:
        return self.argv if isinstance(self.argv, str) else shlex.join(self.argv)


class LocalProcess:
    """Run dirs under a local directory; commands are argv lists, each in its own process
    group so that a timeout, Ctrl-C or a signal kills it and everything it started."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def new_dir(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="run-", dir=self.root))  # thread-safe name

    def runner_dir(self, rundir) -> str:
        """How the runner names the run dir: an absolute path (it runs elsewhere)."""
        return str(Path(rundir).resolve())

    def put(self, rundir, name: str, data: bytes) -> None:
        (Path(rundir) / name).write_bytes(data)

    def get(self, rundir, name: str) -> bytes:
        return (Path(rundir) / name).read_bytes()

    def remove(self, rundir) -> None:
        shutil.rmtree(rundir, ignore_errors=True)

    def execute(self, argv: List[str], rundir, timeout: float, on_stdout=None) -> RawRun:
        """Run `argv` in `rundir`; subprocess.TimeoutExpired (after killing it) on a timeout.
        It ends with rvvkit, whatever ends rvvkit (rvvkit.children). `on_stdout` sees its
        stdout's bytes as they come."""
        t0 = time.perf_counter()
        proc = children.run(argv, cwd=rundir, timeout=timeout, on_stdout=on_stdout)
        return RawRun(argv, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                      proc.stderr.decode("utf-8", "replace"), time.perf_counter() - t0,
                      Path(rundir))


class BoardShell:
    """Run dirs under the session's temp dir on a board; commands are shell text run there
    by rvvkit.runtime.remote.Board (which bounds them by a timeout of its own)."""

    def __init__(self, board, root: str):
        self.board = board
        self.root = root

    def new_dir(self) -> str:
        rundir = f"{self.root}/run-{uuid.uuid4().hex[:12]}"
        self.board.mkdir(rundir)
        return rundir

    def runner_dir(self, rundir) -> str:
        """The command runs inside the run dir, so the runner names it "."."""
        return "."

    def put(self, rundir, name: str, data: bytes) -> None:
        self.board.put(data, f"{rundir}/{name}")

    def get(self, rundir, name: str) -> bytes:
        return self.board.get(f"{rundir}/{name}")

    def remove(self, rundir) -> None:
        self.board.remove(rundir)

    def execute(self, command: str, rundir, timeout: float, on_stdout=None) -> RawRun:
        t0 = time.perf_counter()
        res = self.board.sh(f"cd {shlex.quote(rundir)} && {command}", timeout=timeout,
                            what="the run", on_out=on_stdout)
        return RawRun(command, res.rc, res.out, res.err, time.perf_counter() - t0, rundir)
