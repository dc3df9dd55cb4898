"""The programs rvvkit starts on this machine end with it: compilers (host JIT, cross, nvcc),
QEMU running the C runner, probes. Every one runs through run() here, which

- starts it in a process group of its own (shared with its lifeline only), so that killing
  the group ends it and whatever it started (a compiler driver's cc1, as and ld);
- records the group while it runs, so that end() (called by the `rvvkit` command's signal
  handlers, rvvkit.cli.signals) kills every running child at once, whichever thread waits
  for it;
- pairs it with a lifeline: a small `sh` that reads a pipe whose other end only rvvkit holds
  and kills the group when the read ends, that is when rvvkit is gone however it died
  (SIGKILL, the OOM killer), where no handler of ours runs.

Not prctl(PR_SET_PDEATHSIG): it needs a preexec_fn, which is unsafe with threads (rvvkit
compiles on a thread pool and keeps keepalive threads), it fires when the forking *thread*
ends rather than the process, and it reaches the direct child only, not cc1 or ld.

After end(), rvvkit is on its way out: run() starts nothing new, and each thread learns of it
once, as Terminated from run() or check() (which the board's command loop calls,
rvvkit.runtime.remote). Terminated is a KeyboardInterrupt, so the cleanup that Ctrl-C runs
(kill the board's process group, remove temp dirs, close connections) runs for every signal."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, Mapping, Optional, Sequence, Set, Tuple

# The process groups end() kills: each child's while it runs. Plain set operations, no lock:
# end() runs in a signal handler, which may interrupt this very thread while it holds one
# (a set's add, discard and copy are atomic under the GIL).
_groups: Set[int] = set()
_told: Set[int] = set()  # threads that have heard of the ending
_ending = 0  # the signal rvvkit is ending on; 0 while it is not

# $1: what to kill (0: its own process group; -N: group N) once the pipe on stdin closes.
_LIFELINE = 'read -r _; kill -KILL "$1" 2>/dev/null'
_JOIN_GROUP = sys.version_info >= (3, 11)  # Popen(process_group=...)


class Terminated(KeyboardInterrupt):
    """rvvkit is ending on signal `signum` (SIGTERM, SIGINT, SIGHUP; SIGPIPE: stdout's reader
    went away). A KeyboardInterrupt, so every path that cleans up after Ctrl-C runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"ending on {signal.Signals(self.signum).name}"


def ending() -> int:
    """The signal rvvkit is ending on, 0 while it is not."""
    return _ending


def end(signum: int) -> None:
    """rvvkit is ending on `signum`: kill every child now running, with its group, and make
    run() start no more. Safe in a signal handler and from any thread; the first signal is
    the one that counts."""
    global _ending
    if not _ending:
        _ending = signum
    for pgid in list(_groups):
        _kill_group(pgid)


def check() -> None:
    """Terminated, the first time the calling thread asks after end(); nothing otherwise,
    so that a thread cleaning up after hearing of it (removing a board's temp dir) may."""
    ident = threading.get_ident()
    if _ending and ident not in _told:
        _told.add(ident)
        raise Terminated(_ending)


def track(pgid: int) -> None:
    """Kill process group `pgid` at end() until untrack() (rvvkit.conformance.forked's children)."""
    _groups.add(pgid)


def untrack(pgid: int) -> None:
    _groups.discard(pgid)


def run(argv: Sequence[str], *, cwd=None, env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None, merge_stderr: bool = False,
        on_stdout: Optional[Callable[[bytes], None]] = None) -> subprocess.CompletedProcess:
    """subprocess.run(argv, stdin=DEVNULL, capture_output=True) for a child that ends with
    rvvkit (stderr into stdout with `merge_stderr`). OSError when it cannot start;
    subprocess.TimeoutExpired after `timeout` seconds, the child killed with its group;
    Terminated when rvvkit is ending. `on_stdout` sees stdout's bytes as they come (the
    whole of it is still returned); whatever it raises kills the child and propagates."""
    if _ending:
        _told.add(threading.get_ident())
        raise Terminated(_ending)
    proc, lifeline = _start(list(argv), cwd=cwd, env=None if env is None else dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE)
    try:
        if _ending:  # end() came before the group was recorded
            _kill_group(lifeline.group)
        out, err = (proc.communicate(timeout=timeout) if on_stdout is None else
                    _stream(proc, timeout, on_stdout))
    except BaseException as exc:  # a timeout, Ctrl-C, a signal: never leave the child running
        _kill_group(lifeline.group)
        out, err = proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):  # what it said before it was killed
            exc.output, exc.stderr = out, err
        raise
    finally:
        lifeline.cut()
    check()  # killed by end() from another thread: this one learns of it here
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _stream(proc, timeout: Optional[float], on_stdout) -> Tuple[bytes, bytes]:
    """communicate() that hands stdout's bytes to on_stdout as they arrive."""
    deadline = None if timeout is None else time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    with selectors.DefaultSelector() as sel:
        for pipe, buf in ((proc.stdout, out), (proc.stderr, err)):
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
                sel.register(pipe, selectors.EVENT_READ, buf)
        while sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout, bytes(out), bytes(err))
            for key, _ in sel.select(left):
                chunk = os.read(key.fileobj.fileno(), 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if key.data is out:
                    on_stdout(chunk)
    proc.wait()
    return bytes(out), bytes(err)


def _start(argv, **popen_args):
    """(the child, its lifeline), the child's group recorded for end(). Python 3.11 can start
    a child in a given process group: the lifeline's, started first, so that no moment
    passes without one. Before 3.11 the child gets a session of its own and its lifeline
    follows (a SIGKILL in the milliseconds between leaves the child running)."""
    if _JOIN_GROUP:
        lifeline = _Lifeline(None)
        try:
            return subprocess.Popen(argv, process_group=lifeline.group, **popen_args), lifeline
        except BaseException:  # a signal's Terminated may come once the child exists
            _kill_group(lifeline.group)
            lifeline.cut()
            raise
    proc = subprocess.Popen(argv, start_new_session=True, **popen_args)
    try:
        return proc, _Lifeline(proc.pid)
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise


class _Lifeline:
    """`sh` waiting for EOF on a pipe that only rvvkit writes to, then killing the child's
    process group: its own (`group` None: the child joins it) or `group`."""

    def __init__(self, group: Optional[int]):
        read_end, self._write_end = os.pipe()  # not inherited by other children (PEP 446)
        target = "0" if group is None else f"-{group}"  # dash's kill takes no `--`
        try:
            self.proc = subprocess.Popen(
                ["/bin/sh", "-c", _LIFELINE, "rvvkit-lifeline", target], stdin=read_end,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                **({"process_group": 0} if group is None else {"start_new_session": True}))
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)
        self.group = self.proc.pid if group is None else group
        _groups.add(self.group)

    def cut(self) -> None:
        """The child is done: end the lifeline without letting it kill anything."""
        _groups.discard(self.group)
        self.proc.kill()
        self.proc.wait()
        os.close(self._write_end)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reset() -> None:
    """Forget the ending: for a caller that goes on after handling it, such as
    `rvvkit.cli.main()` called from Python."""
    global _ending
    _told.clear()
    _ending = 0


def _after_fork() -> None:
    """A forked child's parent's children and ending are not its own."""
    _groups.clear()
    reset()


os.register_at_fork(after_in_child=_after_fork)

__all__ = ["Terminated", "check", "end", "ending", "reset", "run", "track", "untrack"]
