"""Run callables in forked children, a few at a time, each reporting pass or the first lines
of why not: generated code that crashes or hangs fails its own case and nothing else (used by
rvvkit/onnx_conformance.py)."""
from __future__ import annotations

import faulthandler
import os
import select
import signal
import time
import traceback
from typing import Callable, Dict, Iterable, Iterator, Tuple

from . import children


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
    running: Dict[int, list] = {}  # read fd -> [key, pid, deadline, data]
    try:
        yield from _drive(pending, running, jobs, timeout)
    finally:  # interrupted (Ctrl-C) or abandoned: end the children still running
        for rfd, (_, pid, _, _) in running.items():
            _kill(pid)
            os.close(rfd)


def _drive(pending, running: Dict[int, list], jobs: int, timeout: float):
    while True:
        while len(running) < jobs:
            item = next(pending, None)
            if item is None:
                break
            rfd, pid = _fork(item[1])
            running[rfd] = [item[0], pid, time.monotonic() + timeout, b""]
        if not running:
            return
        ready, _, _ = select.select(list(running), [], [], 1.0)
        for rfd in ready:
            chunk = os.read(rfd, 65536)
            if chunk:
                running[rfd][3] += chunk
                continue
            key, pid, _, data = running.pop(rfd)
            os.close(rfd)
            _, status = os.waitpid(pid, 0)
            children.untrack(pid)
            if os.WIFSIGNALED(status):
                yield key, False, f"crashed with signal {os.WTERMSIG(status)}"
            else:
                text = data.decode(errors="replace")
                yield key, text == "ok", text
        now = time.monotonic()
        for rfd in [fd for fd, r in running.items() if r[2] < now]:
            key, pid, _, _ = running.pop(rfd)
            _kill(pid)
            os.close(rfd)
            yield key, False, f"timeout after {timeout:.0f} s"


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # with what it started (qemu, a compiler)
    except OSError:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    children.untrack(pid)


def _import_before_fork() -> None:
    """Import what every child needs once, here: a child's own imports (the whole code
    generator, cffi, onnxruntime) would cost seconds per case."""
    import importlib
    for name in ("rvvkit.builder", "rvvkit.onnx_backend", "rvvkit.runtime.host",
                 "rvvkit.runtime.qemu", "rvvkit.runtime.cuda", "cffi", "onnxruntime"):
        try:
            importlib.import_module(name)
        except ImportError:  # an optional one (onnxruntime) that is absent
            pass


def _fork(fn: Callable[[], None]) -> Tuple[int, int]:
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid:
        os.close(wfd)
        # Its own group from the parent's side too (the child's setpgid may not have run
        # yet), so that a signal's rvvkit.children.end() kills it from now on.
        try:
            os.setpgid(pid, pid)
        except OSError:  # it has ended already
            pass
        children.track(pid)
        return rfd, pid
    os.close(rfd)  # the child: report "ok" or why not, and never return into the caller
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
    from .errors import RvvkitError
    if isinstance(exc, (AssertionError, RvvkitError)):
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        head = type(exc).__name__ + ": " + " | ".join(lines[:3])
    else:
        head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return " ".join(head.split())[:300]
