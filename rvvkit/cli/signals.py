"""How the `rvvkit` command ends when asked to: on SIGTERM (`timeout`, CI runners, service
managers), SIGINT (Ctrl-C), SIGHUP (a closed terminal) and stdout's reader going away
(`rvvkit ... | head`), rvvkit.children.end() kills every child rvvkit runs, and Terminated is
raised in the main thread, so that the cleanup paths run (a board's process group killed,
temp dirs removed, connections closed) before the command exits with 128 + the signal's
number. A second signal while that cleanup runs ends the command at once.

A reader that goes away is noticed while the command is still working, not only at its next
write: a thread waits for the error condition on stdout (a pipe whose reading end has
closed) and sends the main thread SIGPIPE, whose handler ends the command as above.
SIGPIPE from anything else (a write to a dropped SSH socket) is ignored, as Python does by
default, and the write fails with EPIPE as before."""
from __future__ import annotations

import contextlib
import os
import select
import signal
import stat
import sys
import threading
from typing import Iterator

from .. import children

ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def reader_gone() -> bool:
    """True when stdout is a pipe whose reading end has closed."""
    try:
        poller = select.poll()
        poller.register(sys.__stdout__.fileno(), 0)  # POLLERR is always reported
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _on_signal(signum, frame) -> None:
    if signum == signal.SIGPIPE and not reader_gone():
        return  # a write to a closed socket: it fails with EPIPE on its own
    if children.ending() and signum != signal.SIGPIPE:
        # A second signal while the first one's cleanup runs: stop waiting for it.
        children.end(signum)
        os._exit(128 + children.ending())
    children.end(signum)
    children.check()  # raises Terminated here, in the main thread, unless it already has


def _watch_stdout(fd: int, wake: int, main_ident: int) -> None:
    """Wait until stdout's reader goes away, or `wake` is readable (the command is done)."""
    poller = select.poll()
    poller.register(fd, 0)
    poller.register(wake, select.POLLIN)
    try:
        if any(got == fd and ev & select.POLLERR for got, ev in poller.poll()):
            children.end(signal.SIGPIPE)
            signal.pthread_kill(main_ident, signal.SIGPIPE)  # wakes a blocking wait
    finally:
        os.close(wake)


def _start_watcher() -> int:
    """The stdout watcher when stdout is a pipe; the fd that stops it, or -1."""
    try:
        fd = sys.__stdout__.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return -1
    except (OSError, ValueError, AttributeError):
        return -1
    wake_r, wake_w = os.pipe()
    threading.Thread(target=_watch_stdout, args=(fd, wake_r, threading.get_ident()),
                     name="rvvkit-stdout-watcher", daemon=True).start()
    return wake_w


@contextlib.contextmanager
def ending_on_signals() -> Iterator[None]:
    """Inside: SIGTERM, SIGINT, SIGHUP and a gone reader end the command (Terminated in the
    main thread, every child killed). Outside, the previous handlers are back: `main()` is
    also called from Python (tests), whose process must keep its own. Nothing is installed
    off the main thread, where Python allows no handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # A signal ignored from the start stays ignored (`nohup` ignores SIGHUP; a shell ignores
    # SIGINT in background jobs). SIGPIPE is ignored by Python itself; its handler acts only
    # when stdout's reader is gone.
    wanted = [s for s in ENDING if signal.getsignal(s) is not signal.SIG_IGN]
    previous = {s: signal.signal(s, _on_signal) for s in (*wanted, signal.SIGPIPE)}
    wake = -1
    try:
        wake = _start_watcher()  # a reader gone already: Terminated at once
        yield
    finally:
        if wake >= 0:
            os.close(wake)  # the watcher's poll sees POLLHUP on its end and returns
        for s, handler in previous.items():
            signal.signal(s, handler)
        children.reset()  # a caller from Python goes on: its next compile may run


__all__ = ["ENDING", "ending_on_signals", "reader_gone"]
