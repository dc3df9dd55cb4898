"""The `rvvkit` command. Thin: every action is a call into the Python API; one module per
subcommand, the options they share in rvvkit.cli.common.

Exit status, the same for every command: 0 success, 1 an rvvkit error (a model, artifact,
compiler or run that failed; compare: a path that mismatched), 2 bad usage (argparse's own
errors and option values or combinations that do not make sense), 70 an internal error (a bug
in rvvkit, not in the model: one line naming the op and node), 128 + N ended by signal N
(130 SIGINT, Ctrl-C; 143 SIGTERM; 129 SIGHUP), with one line on stderr and every process rvvkit
started ended too (rvvkit.cli.signals). A reader that goes away (`rvvkit ... | head`) ends the
command quietly, at once, with 141 (SIGPIPE), as other commands in a pipeline do."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import List, Optional

from ..version import __version__
from ..errors import InternalError, RvvkitError
from . import (bench, boards, build, compare, doctor, generate, inspect, ops, pack,
               quantize, run, sign)
from .common import UsageError
from .signals import ending_on_signals

# sysexits.h's EX_SOFTWARE: an internal software error (a bug in rvvkit, errors.InternalError)
EXIT_INTERNAL = 70

# in `rvvkit --help` order
COMMANDS = (build, quantize, pack, sign, inspect, run, generate, bench, compare, doctor, boards,
            ops)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rvvkit", description="Compile ONNX models to portable C "
                                "kernels and run them on x86 hosts, RISC-V vector boards and "
                                "CUDA GPUs.")
    p.add_argument("--version", action="version", version=f"rvvkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def _reader_gone() -> int:
    """stdout's reader closed the pipe (`| head`): point stdout at /dev/null, so that the
    interpreter's own flush at exit finds nothing to complain about, and exit as a command
    killed by SIGPIPE does, without a word."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _ended(exc: KeyboardInterrupt) -> int:
    """Ctrl-C or a signal (rvvkit.children.Terminated): one line, 128 + the signal."""
    signum = getattr(exc, "signum", signal.SIGINT)
    if signum == signal.SIGPIPE:
        return _reader_gone()
    said = "interrupted" if signum == signal.SIGINT else \
        f"terminated by {signal.Signals(signum).name}"
    try:
        print(f"rvvkit: {said}", file=sys.stderr)
    except OSError:  # SIGHUP: the terminal may be gone
        pass
    return 128 + signum


def _run(argv: Optional[List[str]]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help, --version, usage errors: their text may meet a closed pipe
        sys.stdout.flush()
        raise
    try:
        code = args.func(args)
    except UsageError as exc:
        args.parser.error(str(exc))  # exits 2, as argparse's own errors do
    except InternalError as exc:  # a bug: its own line and status, never a traceback
        print(f"rvvkit: {exc}", file=sys.stderr)
        code = EXIT_INTERNAL
    except RvvkitError as exc:
        print(f"rvvkit: error: {exc}", file=sys.stderr)
        code = 1
    # Flushing here, not at interpreter exit, lets a closed pipe surface as BrokenPipeError.
    sys.stdout.flush()
    return code


def _log_like_progress() -> None:
    """rvvkit's log warnings (a precompiled fall-back, a board's transfer choice) read on stderr
    like its progress lines, `rvvkit: ...`, rather than logging's bare last-resort text."""
    logger = logging.getLogger("rvvkit")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("rvvkit: %(message)s"))
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)


def main(argv: Optional[List[str]] = None) -> int:
    _log_like_progress()
    try:
        with ending_on_signals():
            return _run(argv)
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt as exc:  # Ctrl-C, or rvvkit.children.Terminated
        return _ended(exc)


__all__ = ["build_parser", "main"]
