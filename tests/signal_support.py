"""What the signal tests share (tests/host, qemu and ssh test_*signals.py): start `rvvkit` as a
user does, wait until it runs the child a test is about, end rvvkit by a signal or by closing
the pipe it writes to, and list what it started that is still there.

What rvvkit started is found by a marker: a variable in its environment, which every local
child inherits however it is re-parented once rvvkit is gone, and which a board's wrapper
(`env RVVKIT_TEST_MARKER=...`) puts into the runner's environment and its shell's command
line there. Waits poll with generous limits: CI runs two tests at once on two cores."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Dict, Optional, Sequence

MARKER_VAR = "RVVKIT_TEST_MARKER"
RVVKIT = [sys.executable, "-m", "rvvkit"]

# How each test ends rvvkit, and the exit status it must give: 128 + the signal's number.
ENDINGS = {"SIGTERM": 143, "SIGINT": 130, "SIGHUP": 129, "closed-pipe": 141}
# Inferences in a run that must still be running when the test ends it: hours even where one
# takes microseconds (a tiny model on a native board).
LONG_REPEAT = 10 ** 9
START_TIMEOUT_S = 300.0   # compiling first, on a loaded machine
EXIT_TIMEOUT_S = 30.0     # rvvkit is done in well under a second; this is for CI load
GONE_TIMEOUT_S = 10.0     # SIGKILLed children vanish at once; reaping may lag a little


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _zombie(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return not stat or stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]


def cmdline(pid: int) -> str:
    return _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace").strip()


def _default_endings() -> None:
    """In the child, before exec: SIGINT, SIGTERM and SIGHUP at their defaults, as for a
    command typed at a terminal. pytest may itself run with SIGINT ignored (a background job
    of a non-interactive shell, `cmd &`, inherits it so), and rvvkit rightly keeps a signal
    ignored from the start ignored, which would leave the SIGINT cases nothing to test."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


class Rvvkit:
    """One `rvvkit` command with a marker of its own ("{marker}" in `args` says it), stdout
    and stderr piped."""

    def __init__(self, args: Sequence, env: Optional[Dict[str, str]] = None,
                 ignored: Sequence[str] = ()):
        self.marker = f"rvvkit-test-{uuid.uuid4().hex}"
        full_env = dict(os.environ, **(env or {}), **{MARKER_VAR: self.marker})
        argv = [str(a).replace("{marker}", self.marker) for a in args]
        # Signals `ignored` from the start, as `nohup` does SIGHUP: a shell ignores them and
        # execs rvvkit, which inherits that.
        prefix = ["/bin/sh", "-c", f'trap "" {" ".join(ignored)}; exec "$@"', "sh"] \
            if ignored else []
        self.proc = subprocess.Popen(prefix + RVVKIT + argv, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=full_env,
                                     preexec_fn=_default_endings)

    def marked(self, *, by_command_line: bool = True) -> Dict[int, str]:
        """{pid: command line} of live processes other than rvvkit carrying the marker in
        their environment (or, with by_command_line, in their command line)."""
        tag = f"{MARKER_VAR}={self.marker}".encode()
        found = {}
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == self.proc.pid:
                continue
            pid = int(name)
            hit = tag in _read(f"/proc/{pid}/environ").split(b"\0") or (
                by_command_line and self.marker.encode() in _read(f"/proc/{pid}/cmdline"))
            if hit and not _zombie(pid):
                found[pid] = cmdline(pid)
        return found

    def wait_for_child(self, what: str) -> Dict[int, str]:
        """Wait until a process whose environment carries the marker and whose command line
        contains `what` runs; all such processes."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            found = {p: c for p, c in self.marked(by_command_line=False).items() if what in c}
            if found:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"rvvkit exited ({self.proc.returncode}) before running "
                                     f"{what!r}: {self.proc.stderr.read().decode()}")
            assert time.monotonic() < deadline, f"{what!r} never started"
            time.sleep(0.05)

    def end(self, how: str) -> None:
        """Send the signal named `how`, or close the reading end of rvvkit's stdout."""
        if how == "closed-pipe":
            self.proc.stdout.close()
        else:
            os.kill(self.proc.pid, getattr(signal, how))

    def finish(self) -> tuple:
        """(exit status, stderr, seconds it took to exit)."""
        t0 = time.monotonic()
        try:
            _, err = self.proc.communicate(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"rvvkit still running {EXIT_TIMEOUT_S:g} s after the "
                                 "signal") from None
        return self.proc.returncode, err.decode(errors="replace"), time.monotonic() - t0

    def leftovers(self) -> Dict[int, str]:
        """What still carries the marker once it has had time to go (nothing, we hope)."""
        deadline = time.monotonic() + GONE_TIMEOUT_S
        left = self.marked()
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = self.marked()
        return left

    def kill_leftovers(self) -> None:
        """After a failed test: leave no stray process for the tests that follow."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.marked():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def end_and_check(rvvkit: Rvvkit, how: str) -> str:
    """End `rvvkit` by `how`; assert its exit status, one quiet line at most on stderr, and
    that nothing it started outlives it. Returns its stderr."""
    try:
        rvvkit.end(how)
        code, err, _ = rvvkit.finish()
        assert code == ENDINGS[how], (code, err)
        assert "Traceback" not in err and "Exception ignored" not in err, err
        tail = err.splitlines()[-1:] if how != "closed-pipe" else []
        last = [ln for ln in err.splitlines() if "interrupted" in ln or "terminated" in ln]
        assert last == tail, err  # one line, the last one, says why (none for a pipe)
        left = rvvkit.leftovers()
        assert not left, f"still running after rvvkit ended by {how}: {left}"
        return err
    finally:
        rvvkit.kill_leftovers()
