"""What the command modules share: progress messages, argparse types (so that a bad option
value is a usage error, exit 2, in every command), .npz input and output, and opening a
session from the command line's options."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, List, Tuple

import numpy as np

from ..errors import InputError, RvvkitError
from .npz import load_npz, printable, save_npz  # noqa: F401 (the commands' file I/O)


class UsageError(Exception):
    """Options that do not go together: main() reports it as argparse does, exit 2."""


def progress(msg: str) -> None:
    print(f"rvvkit: {msg}", file=sys.stderr, flush=True)


# -- argparse types ------------------------------------------------------------------------

def _usage(convert):
    """An argparse type from a converter that raises RvvkitError (InputError, ...)."""
    def parse(value: str):
        try:
            return convert(value)
        except RvvkitError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = convert.__name__
    return parse


def count(minimum: int):
    """argparse type: an integer >= minimum."""
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = minimum - 1
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value!r}")
        return n
    return parse


def input_shape(item: str) -> Tuple[str, List[int]]:
    """argparse type of --input-shape NAME=D0,D1,...: (name, dims)."""
    name, sep, dims = item.rpartition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name, [int(d) for d in dims.replace("x", ",").split(",") if d]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{item!r}: expected NAME=D0,D1,... "
                                         "(e.g. data=1,3,224,224)") from None


def shapes(items) -> Dict[str, List[int]]:
    """The --input-shape options as {name: dims}."""
    return dict(items or [])


def _one_vlen(value: str) -> int:
    from ..runtime.qemu import resolve_vlen
    return resolve_vlen(value.strip())


def _vlen_list(value: str) -> List[int]:
    return [_one_vlen(v) for v in value.split(",") if v.strip()]


def _executor(value: str) -> str:
    from ..runtime import check_path
    return check_path(value)


def _executor_list(value: str) -> List[str]:
    from ..runtime import check_path
    names = [check_path(v.strip()) for v in value.split(",") if v.strip()]
    if not names:
        raise InputError("name at least one executor")
    return names


def _board(value: str) -> str:
    from ..runtime import is_board
    if not is_board(value):
        raise InputError(f"doctor --on takes a board (ssh://...), not {value!r}; without "
                         "--on it reports on this machine")
    return value


vlen = _usage(_one_vlen)              # one VLEN (128..1024, a power of two)
vlen_list = _usage(_vlen_list)        # 128,512
executor = _usage(_executor)          # host | qemu | cuda | cuda-emu | ssh://...
executor_list = _usage(_executor_list)
board = _usage(_board)                # ssh://... only


# -- files ---------------------------------------------------------------------------------

def add_threads_option(p) -> None:
    p.add_argument("--threads", type=count(1), default=None, metavar="N",
                   help="threads the kernels run on (default: RVVKIT_NUM_THREADS, else the "
                   "target's online cores; outputs are the same for every N)")


def load_inputs(args, sess) -> Dict[str, np.ndarray]:
    """--inputs, else seeded random inputs of the session's shapes and dtypes."""
    if args.inputs:
        return load_npz(args.inputs)
    progress(f"no --inputs given: using random inputs (seed {args.seed}; floats standard "
             "normal, integers and bools 0/1)")
    return sess.random_feeds(args.seed)


# -- sessions ------------------------------------------------------------------------------

def add_isa_options(p) -> None:
    p.add_argument("--board", metavar="PRESET", help="with --on qemu: emulate this board "
                   "preset (toolchain/boards: k1, k230, sg2044): its ISA profile, for the "
                   "compiler's -march and QEMU's -cpu, and its VLEN unless --vlen is given")
    p.add_argument("--isa", metavar="PROFILE", help="with --on qemu: the ISA profile "
                   "(toolchain/isa: rv64gcv, the default, k1, rva23), overriding --board's")
    p.add_argument("--check-isa", action="store_true", help="with --on qemu: run under the "
                   "checking QEMU (10.0), which traps any extension outside the profile; it "
                   "cannot count instructions")


def isa_options(args) -> Dict:
    """open_session keywords from --board/--isa/--check-isa: isa, check, and the board's VLEN
    (as `board_vlen`, used where --vlen is not given)."""
    out: Dict = {}
    board_name = getattr(args, "board", None)
    if board_name:
        from ..jit.targets import board_preset
        preset = board_preset(board_name)
        out["isa"], out["board_vlen"] = preset.get("isa"), preset.get("vlen")
    if getattr(args, "isa", None):
        out["isa"] = args.isa
    if getattr(args, "check_isa", False):
        out["check"] = True
    return out


def open_session(artifact: str, on: str, *, compiler=None, no_cache: bool = False,
                 vlen=None, prefer_precompiled: bool = False, threads=None, isa=None,
                 check: bool = False, board_vlen=None):
    """A session from the command line's options, with a progress line naming what runs."""
    from ..runtime import open_session as open_
    from ..runtime import session_options, takes_vlen
    if vlen is None and board_vlen is not None and takes_vlen(on):
        vlen = board_vlen
    try:
        kwargs = session_options(on, compiler=compiler, use_cache=False if no_cache else None,
                                 vlen=vlen, prefer_precompiled=prefer_precompiled, isa=isa,
                                 check=check)
    except InputError as exc:  # an option the path does not take
        raise UsageError(str(exc)) from None
    t0 = time.perf_counter()
    sess = open_(artifact, on=on, threads=threads, **kwargs)
    ran = "" if sess.kernels_from == "jit" else f" (the artifact's {sess.kernels_from})"
    progress(f"{sess.describe()['label']}: kernels ready in {time.perf_counter() - t0:.2f}s"
             + ran)
    return sess
