"""Where CUDA lives in this process tree. A process that has initialised CUDA cannot hand it to
a child it forks: the child's CUDA calls fail (cudaGetDeviceCount says "initialization error",
which used to surface as "no devices"). So:

- asking whether there is a GPU (`probe`) runs the driver's cuInit in a short child process,
  so that the question alone (pytest's collection, `rvvkit doctor`) never makes this process
  unable to fork CUDA workers;
- a GPU session records the process that initialised CUDA (`mark_initialised`); a forked child
  sees that it is not that process (`fork_error`) and says so in one line, and
  rvvkit.conformance.forked starts its workers from a clean fork server instead of forking such a
  process.

The probe's answer is memoised per process (and kept by a forked child unless the parent had
initialised CUDA)."""
from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
from typing import Optional, Tuple

from .. import children

NO_DEVICE = "no CUDA device"
_init_pid: Optional[int] = None   # the process that initialised CUDA (None: none has)

# The driver's own answer, printed as one line: "ok N", or "no <why>".
_PROBE = r"""
import ctypes
drv = ctypes.CDLL("libcuda.so.1")
def why(fn, rc):
    name = ctypes.c_char_p()
    ok = drv.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value
    return f"no {fn} failed with error {rc}" + (f" ({name.value.decode()})" if ok else "")
count = ctypes.c_int(0)
rc = drv.cuInit(0)
if rc:
    print(why("cuInit", rc))
else:
    rc = drv.cuDeviceGetCount(ctypes.byref(count))
    if rc:
        print(why("cuDeviceGetCount", rc))
    elif count.value <= 0:
        print("no the CUDA driver reports no devices")
    else:
        print(f"ok {count.value}")
"""


def mark_initialised() -> None:
    """This process has initialised CUDA (a session on a GPU is loading)."""
    global _init_pid
    _init_pid = os.getpid()


def initialised_here() -> bool:
    return _init_pid == os.getpid()


def fork_error(what: str) -> Optional[str]:
    """Why `what` cannot use CUDA in this process, when it is a child forked after its parent
    initialised CUDA; else None."""
    if _init_pid is None or _init_pid == os.getpid():
        return None
    return (f"{what}: this process ({os.getpid()}) was forked from process {_init_pid} after "
            "that process initialised CUDA, and a forked child cannot use CUDA; open CUDA "
            "sessions in a process started fresh (multiprocessing's 'spawn' or 'forkserver'), "
            "or fork before the parent first uses CUDA")


@functools.lru_cache(maxsize=1)
def probe() -> Tuple[bool, str]:
    """(True, "N CUDA device(s)") when the driver sees a GPU, else (False, "no CUDA device:
    why"). Compiles nothing; initialises CUDA in a child process, not in this one."""
    forked = fork_error(NO_DEVICE)
    if forked:
        return False, forked
    try:
        ctypes.CDLL("libcuda.so.1")   # loading the driver library initialises nothing
    except OSError as exc:
        return False, f"{NO_DEVICE}: no CUDA driver ({exc})"
    try:
        proc = children.run([sys.executable, "-c", _PROBE], timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{NO_DEVICE}: the CUDA driver probe did not answer ({exc})"
    answer = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not answer:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return False, f"{NO_DEVICE}: the CUDA driver probe failed ({(err or ['no output'])[-1]})"
    word, _, rest = answer[-1].partition(" ")
    if word == "ok":
        return True, f"{rest} CUDA device(s)"
    return False, f"{NO_DEVICE}: {rest}"


def _after_fork() -> None:
    """A child keeps its parent's answer unless the parent had initialised CUDA (then the
    child's own answer is that it cannot use it)."""
    if _init_pid is not None:
        probe.cache_clear()


os.register_at_fork(after_in_child=_after_fork)
