"""Executors. Each takes the same inputs (dict of numpy arrays) and returns the same outputs,
and answers the same contract (rvvkit.runtime.session.Session).

This module is also the one place that knows the executors' names: which strings name a path
(`check_path`), and how generic options (compiler, cache, VLEN) map onto each executor's
session arguments (`session_options`). Everything else asks the session (`describe()`)."""
from __future__ import annotations

from typing import Dict, Optional

from ..errors import InputError, RvvkitError
from .session import Session

EXECUTORS = ("host", "qemu", "cuda", "cuda-emu", "ssh://[user@]host[:port]")
NAMES = ("host", "qemu", "cuda", "cuda-emu")  # the local ones; boards are ssh://...
PATH_HELP = "host, qemu, cuda, cuda-emu or ssh://[user@]host[:port]"
BOARD_PREFIX = "ssh://"


def is_board(on: str) -> bool:
    return isinstance(on, str) and on.startswith(BOARD_PREFIX) and len(on) > len(BOARD_PREFIX)


def path_kind(on: str) -> str:
    """The executor kind a path string names: "ssh" for any board, else the name itself."""
    return "ssh" if is_board(on) else on


def check_path(on: str) -> str:
    """`on` if it names an executor, else InputError listing the choices."""
    if on in NAMES or is_board(on):
        return on
    raise InputError(f"unknown executor {on!r}: use {PATH_HELP}")


def takes_vlen(on: str) -> bool:
    """Whether the VLEN is a setting of this path (QEMU's emulated CPU) rather than a fact of
    the machine."""
    return on == "qemu"


def session_options(on: str, *, compiler: Optional[str] = None,
                    use_cache: Optional[bool] = None, vlen: Optional[int] = None,
                    prefer_precompiled: bool = False, isa: Optional[str] = None,
                    check: bool = False) -> Dict:
    """open_session keyword arguments for `on` from the options every path shares: the
    compiler is nvcc for cuda (cuda-emu builds with a host C++ compiler); a VLEN only for
    qemu (InputError elsewhere)."""
    kwargs: Dict = {}
    if compiler is not None:
        kwargs["nvcc" if on == "cuda" else "compiler"] = compiler
    if use_cache is not None:
        kwargs["use_cache"] = use_cache
    if vlen is not None:
        if not takes_vlen(on):
            raise InputError(f"--vlen applies to --on qemu, not --on {on}")
        kwargs["vlen"] = vlen
    if isa is not None or check:
        if not takes_vlen(on):
            raise InputError(f"an ISA profile (--board, --isa, --check-isa) applies to --on "
                             f"qemu, not --on {on}")
        kwargs.update(isa=isa, check=check)
    if prefer_precompiled:
        if on in ("cuda", "cuda-emu"):
            raise InputError(f"--prefer-precompiled applies to host, qemu and boards, not "
                             f"--on {on}")
        kwargs["prefer_precompiled"] = True
    return kwargs


def open_session(artifact, on: str = "host", **kwargs) -> Session:
    """A session on `artifact`; kwargs go to the executor (qemu: vlen=, tail_ones=, qemu=, ...;
    ssh: command_timeout=, connect_timeout=, trust_new_host=, ...; cuda: nvcc=, use_cache=;
    cuda-emu, the CUDA kernels run by a CPU emulator: compiler=, use_cache=); every path
    takes threads= (None: the target's default)."""
    threads = kwargs.pop("threads", None)
    sess = _open(artifact, on, **kwargs)
    if threads is not None:
        try:
            sess.set_threads(threads)
        except BaseException:
            sess.close()
            raise
    return sess


def _open(artifact, on: str, **kwargs) -> Session:
    if on == "host":
        from .host import HostSession
        return HostSession(artifact, **kwargs)
    if on == "qemu":
        from .qemu import QemuSession
        return QemuSession(artifact, **kwargs)
    if on in ("cuda", "cuda-emu"):
        from .cuda import CudaSession
        return CudaSession(artifact, emulate=on == "cuda-emu", **kwargs)
    if isinstance(on, str) and on.startswith(BOARD_PREFIX):  # board_config explains bad ones
        from .ssh import SshSession
        return SshSession(artifact, on, **kwargs)
    raise RvvkitError(f"unknown executor {on!r}; available: {', '.join(EXECUTORS)}")


__all__ = ["open_session", "Session", "EXECUTORS", "check_path", "path_kind",
           "session_options", "takes_vlen"]
