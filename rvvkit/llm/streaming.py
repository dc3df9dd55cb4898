"""Tokens as the runner makes them: it prints each generated token id on a line of its own
(runtime_c/rvk_generate.h) and flushes, so that QEMU's pipe and an SSH channel carry them
while the generation runs. TokenLines turns those bytes back into ids; stream_tokens turns a
call that reports tokens through a callback into an iterator."""
from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator, List, Optional

from ..errors import ExecutionError


class TokenLines:
    """Bytes of the runner's stdout -> token ids, each passed to `on_token` once its line is
    complete."""

    def __init__(self, on_token: Optional[Callable[[int], None]] = None):
        self.on_token = on_token
        self.tokens: List[int] = []
        self._rest = b""

    def feed(self, data: bytes) -> None:
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            text = line.strip()
            if not text:
                continue
            try:
                token = int(text)
            except ValueError:
                raise ExecutionError(f"the runner printed {text[:80]!r} where a token id "
                                     "was expected") from None
            self.tokens.append(token)
            if self.on_token is not None:
                self.on_token(token)


class _Closed(Exception):
    """The iterator's reader went away: stop the generation at its next token."""


_END = object()


def stream_tokens(run: Callable[[Callable[[int], None]], object]) -> Iterator[int]:
    """Yield the tokens `run(on_token)` reports, as it reports them (`run` goes on a thread);
    its error, if any, is raised here after the tokens before it. Closing the iterator early
    makes on_token raise in `run`'s thread, which ends the runner with it."""
    box: "queue.Queue" = queue.Queue()
    closed = threading.Event()

    def on_token(token: int) -> None:
        if closed.is_set():
            raise _Closed()
        box.put(token)

    def work() -> None:
        try:
            run(on_token)
            box.put(_END)
        except _Closed:
            box.put(_END)
        except BaseException as exc:  # handed to the reader, raised there
            box.put(exc)

    thread = threading.Thread(target=work, name="rvvkit-generate", daemon=True)
    thread.start()
    try:
        while True:
            item = box.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        closed.set()
