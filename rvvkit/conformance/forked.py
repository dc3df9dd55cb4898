"""Run callables in forked children, a few at a time, each reporting pass or the first lines
of why not: generated code that crashes or hangs fails its own case and nothing else (used by
rvvkit/conformance/suite.py).

A process that has initialised CUDA (a GPU session) cannot fork a child that uses it; such a
process starts its children from multiprocessing's fork server instead, a clean process
that never touched CUDA (the callables must then be picklable: a functools.partial of a
module-level function, not a lambda)."""
from __future__ import annotations

import faulthandler
import os
import select
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, Iterator, Optional, Tuple

from .. import children
from ..errors import ExecutionError
from ..runtime import cuda_state

# What every child needs, imported once (here, or by the fork server): a child's own imports
# (the whole code generator, cffi, onnxruntime) would cost seconds per case.
PRELOAD = ("rvvkit.builder", "rvvkit.conformance.backend", "rvvkit.conformance.suite",
           "rvvkit.runtime.host", "rvvkit.runtime.qemu", "rvvkit.runtime.cuda", "cffi",
           "onnxruntime")


@dataclass
class _Child:
    pid: int
    proc: Optional[object] = None   # the multiprocessing.Process of a fork-server child

    def reap(self) -> int:
        """Wait for it; the signal that ended it, or 0."""
        if self.proc is None:
            _, status = os.waitpid(self.pid, 0)
            signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        else:
            self.proc.join()
            signum = max(-(self.proc.exitcode or 0), 0)
        children.untrack(self.pid)
        return signum


def isolated(fn: Callable[[], None], timeout: float = 300) -> Tuple[bool, str]:
    """Run fn() in a forked child (a crash in generated code must not end the caller):
    (passed, first line of why not)."""
    ((_, passed, why),) = run_many([(None, fn)], jobs=1, timeout=timeout)
    return passed, why


def run_many(items: Iterable[Tuple[object, Callable[[], None]]], jobs: int = 1,
             timeout: float = 300) -> Iterator[Tuple[object, bool, str]]:
    """Run each (key, fn) in its own forked child, `jobs` at a time; yield (key, passed, why)
    as they finish. A child that crashes or runs past `timeout` seconds is a failure."""
    _import_before_fork()
    pending = iter(items)
    running: Dict[int, list] = {}  # read fd -> [key, child, deadline, data]
    try:
        yield from _drive(pending, running, jobs, timeout)
    finally:  # interrupted (Ctrl-C) or abandoned: end the children still running
        for rfd, (_, child, _, _) in running.items():
            _kill(child)
            os.close(rfd)


def _drive(pending, running: Dict[int, list], jobs: int, timeout: float):
    while True:
        while len(running) < jobs:
            item = next(pending, None)
            if item is None:
                break
            start = _serve if cuda_state.initialised_here() else _fork
            rfd, child = start(item[1])
            running[rfd] = [item[0], child, time.monotonic() + timeout, b""]
        if not running:
            return
        ready, _, _ = select.select(list(running), [], [], 1.0)
        for rfd in ready:
            chunk = os.read(rfd, 65536)
            if chunk:
                running[rfd][3] += chunk
                continue
            key, child, _, data = running.pop(rfd)
            os.close(rfd)
            signum = child.reap()
            if signum:
                yield key, False, f"crashed with signal {signum}"
            else:
                text = data.decode(errors="replace")
                yield key, text == "ok", text
        now = time.monotonic()
        for rfd in [fd for fd, r in running.items() if r[2] < now]:
            key, child, _, _ = running.pop(rfd)
            _kill(child)
            os.close(rfd)
            yield key, False, f"timeout after {timeout:.0f} s"


def _kill(child: _Child) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)  # with what it started (qemu, a compiler)
    except OSError:
        os.kill(child.pid, signal.SIGKILL)
    child.reap()


def _import_before_fork() -> None:
    import importlib
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional one (onnxruntime) that is absent
            pass


def _adopt(pid: int) -> None:
    """Its own group from the parent's side too (the child's setpgid may not have run yet), so
    that a signal's rvvkit.children.end() kills it from now on."""
    try:
        os.setpgid(pid, pid)
    except OSError:  # it has ended already, or is not our child (a fork server's)
        pass
    children.track(pid)


def _fork(fn: Callable[[], None]) -> Tuple[int, _Child]:
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid:
        os.close(wfd)
        _adopt(pid)
        return rfd, _Child(pid)
    os.close(rfd)
    _child_main(fn, wfd)
    return -1, _Child(-1)   # not reached: the child never returns into the caller


_server = None   # the fork-server context, set up once


def _serve(fn: Callable[[], None]) -> Tuple[int, _Child]:
    """fn in a child of multiprocessing's fork server (this process has initialised CUDA)."""
    global _server
    import multiprocessing
    import pickle
    if _server is None:
        _server = multiprocessing.get_context("forkserver")
        _server.set_forkserver_preload(list(PRELOAD))
    try:
        pickle.dumps(fn)
    except Exception as exc:  # noqa: BLE001 - pickle raises several kinds
        raise ExecutionError(
            "cannot run this case in a child process: this process has initialised CUDA, so "
            "its children start from a fork server, which needs a picklable callable "
            f"(functools.partial of a module-level function), not {fn!r} ({exc})") from None
    reader, writer = _server.Pipe(duplex=False)
    proc = _server.Process(target=_served, args=(fn, writer))
    proc.start()
    writer.close()
    _adopt(proc.pid)
    rfd = os.dup(reader.fileno())   # a plain pipe end, read as a forked child's is
    reader.close()
    return rfd, _Child(proc.pid, proc)


def _served(fn: Callable[[], None], writer) -> None:
    _child_main(fn, writer.fileno())


def _child_main(fn: Callable[[], None], wfd: int) -> None:
    """The child: report "ok" or why not on `wfd`, and never return into the caller."""
    faulthandler.disable()  # a crash is reported by the parent, as the signal's number
    os.setpgid(0, 0)  # its own process group, which a timeout ends as a whole
    try:
        fn()
        msg = b"ok"
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        msg = _why(exc).encode(errors="replace")
    try:
        os.write(wfd, msg[:4000])
    finally:
        os._exit(0)


def _why(exc: BaseException) -> str:
    from ..errors import RvvkitError
    if isinstance(exc, (AssertionError, RvvkitError)):
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        head = type(exc).__name__ + ": " + " | ".join(lines[:3])
    else:
        head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return " ".join(head.split())[:300]
