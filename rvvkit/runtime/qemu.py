"""QEMU executor: cross-compile the artifact's kernels and the C runner for riscv64, run the
runner under qemu-riscv64 with an RVV 1.0 CPU of the chosen VLEN, exchange .npy files.

    sess = QemuSession("model.rvv", vlen=512)            # or rvvkit.load(path, on="qemu")
    outs = sess.run({"data": x})

One run = one QEMU process in a fresh directory of the session's temp dir: inputs in<i>.npy,
outputs out<i>.npy, timings.json. `runner_command()` / `run_raw()` expose the exact argv so that
callers (instruction counting) can add QEMU options such as -plugin."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..artifact import Artifact
from ..errors import ExecutionError, ExecutorUnavailable, RvvkitError
from ..jit import resolve_compiler
from .runner import build_kernels, build_runner, describe_exit
from .session import Session

DEFAULT_VLEN = 256
VLENS = (128, 256, 512, 1024)
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_SYSROOT = "/usr/riscv64-linux-gnu"
STDERR_TAIL = 4000  # characters of the runner's stderr kept in error messages


def resolve_vlen(vlen: Optional[int] = None) -> int:
    """`vlen`, else $RVVKIT_VLEN, else 256; a power of two in 128..1024 (what QEMU accepts and
    RVV boards ship), checked here so a typo fails before minutes of compiling."""
    source = "vlen"
    if vlen is None:
        env = os.environ.get("RVVKIT_VLEN", "").strip()
        vlen, source = (env, "$RVVKIT_VLEN") if env else (DEFAULT_VLEN, "default")
    try:
        value = int(vlen)
        if value != float(vlen):
            raise ValueError
    except (TypeError, ValueError):
        raise RvvkitError(f"VLEN {vlen!r} (from {source}) is not an integer; use one of "
                          f"{', '.join(map(str, VLENS))}") from None
    if value not in VLENS:
        raise RvvkitError(f"VLEN {value} (from {source}) is not supported: it must be a power "
                          f"of two from 128 to 1024 ({', '.join(map(str, VLENS))})")
    return value


def resolve_qemu(qemu: Optional[str] = None) -> str:
    """Absolute path of qemu-riscv64: `qemu`, else $RVVKIT_QEMU, else qemu-riscv64 on PATH."""
    source = "the qemu argument"
    if not qemu:
        qemu, source = os.environ.get("RVVKIT_QEMU", "").strip(), "$RVVKIT_QEMU"
    if not qemu:
        qemu, source = "qemu-riscv64", "PATH"
    found = shutil.which(qemu)
    if not found:
        raise ExecutorUnavailable(f"QEMU not found: {qemu!r} (from {source}) is not an executable "
                          "file; run scripts/setup.sh (installs qemu-user) or set RVVKIT_QEMU "
                          "to the path of qemu-riscv64")
    return os.path.abspath(found)


def resolve_timeout(timeout: Optional[float] = None) -> float:
    """Seconds one QEMU run may take: `timeout`, else $RVVKIT_QEMU_TIMEOUT, else 600."""
    if timeout is None:
        env = os.environ.get("RVVKIT_QEMU_TIMEOUT", "").strip()
        try:
            timeout = float(env) if env else DEFAULT_TIMEOUT_S
        except ValueError:
            raise RvvkitError(f"$RVVKIT_QEMU_TIMEOUT={env!r} is not a number of seconds") \
                from None
    if not timeout > 0:
        raise RvvkitError(f"QEMU timeout must be positive, got {timeout!r}")
    return float(timeout)


def resolve_sysroot() -> str:
    """The riscv64 root QEMU loads the dynamic loader and libc from: $RVVKIT_SYSROOT, else
    Debian's cross sysroot."""
    root = os.environ.get("RVVKIT_SYSROOT", "").strip() or DEFAULT_SYSROOT
    if not os.path.isdir(root):
        raise ExecutorUnavailable(f"riscv64 sysroot {root!r} not found; run scripts/setup.sh "
                          "(installs libc6-dev-riscv64-cross) or set RVVKIT_SYSROOT")
    return root


def cpu_string(vlen: int, tail_ones: bool = False) -> str:
    cpu = f"rv64,v=true,vlen={vlen},elen=64,vext_spec=v1.0"
    # Tail/mask-agnostic elements become all ones instead of undisturbed: code that reads
    # lanes past vl, or masked-off lanes, then gets garbage and fails the comparison.
    return cpu + (",rvv_ta_all_1s=true,rvv_ma_all_1s=true" if tail_ones else "")


@dataclass
class RawRun:
    """One finished runner process: what ran, what it printed, how long it took."""
    argv: List[str]
    returncode: int
    stdout: str
    stderr: str
    wall_seconds: float
    workdir: Path


class QemuSession(Session):
    executor = "qemu"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact], *,
                 compiler: Optional[str] = None, vlen: Optional[int] = None,
                 qemu: Optional[str] = None, tail_ones: bool = False,
                 timeout: Optional[float] = None, use_cache: Optional[bool] = None):
        # Cheap settings first: a bad VLEN or a missing QEMU fails before any compiling.
        self.vlen = resolve_vlen(vlen)
        self.qemu = resolve_qemu(qemu)
        self.timeout = resolve_timeout(timeout)
        self.sysroot = resolve_sysroot()
        self.tail_ones = bool(tail_ones)
        super().__init__(artifact)
        self.compiler = resolve_compiler(compiler, target="rvv")
        self.kernels_path = build_kernels(self.artifact.c_source, self.compiler,
                                          use_cache=use_cache)
        self.runner_path = build_runner(self.compiler, use_cache=use_cache)
        self.tmpdir = Path(tempfile.mkdtemp(prefix="rvvkit-qemu-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.tmpdir), True)
        if isinstance(artifact, Artifact):
            # The runner reads the file; an in-memory artifact is written once per session.
            self.artifact_path = self.tmpdir / "model.rvv"
            artifact.save(self.artifact_path)
        else:
            self.artifact_path = Path(os.path.abspath(artifact))

    # -- pieces for callers that drive QEMU themselves (e.g. instruction counting) ----------

    def write_inputs(self, feeds: Mapping[str, np.ndarray]) -> Path:
        """A fresh work dir holding the validated inputs as in<i>.npy, in graph order."""
        ins = self.validate(feeds)
        workdir = Path(tempfile.mkdtemp(prefix="run-", dir=self.tmpdir))  # thread-safe name
        for i, arr in enumerate(ins):
            np.save(workdir / f"in{i}.npy", arr, allow_pickle=False)
        return workdir

    def qemu_prefix(self, extra_qemu_args: Sequence[str] = ()) -> List[str]:
        return [self.qemu, "-L", self.sysroot, "-cpu", cpu_string(self.vlen, self.tail_ones),
                *map(str, extra_qemu_args)]

    def runner_command(self, workdir: Union[str, os.PathLike], repeat: int = 1,
                       warmup: int = 0, extra_qemu_args: Sequence[str] = (), *,
                       timings: bool = False, untimed: bool = False) -> List[str]:
        """argv running the runner under QEMU on the inputs in `workdir` (from write_inputs),
        writing outputs (and timings.json when `timings`) there. repeat=0 loads everything
        but never infers; untimed skips per-step clocks (nothing but kernels between steps)."""
        workdir = Path(workdir).resolve()
        argv = self.qemu_prefix(extra_qemu_args) + [
            str(self.runner_path), str(self.artifact_path), str(self.kernels_path),
            "--inputs", *[str(workdir / f"in{i}.npy") for i in range(len(self.inputs))],
            "--outdir", str(workdir), "--repeat", str(int(repeat)), "--warmup", str(int(warmup))]
        if timings:
            argv += ["--timings", str(workdir / "timings.json")]
        if untimed:
            argv.append("--untimed")
        return argv

    def run_raw(self, workdir: Union[str, os.PathLike], repeat: int = 1, warmup: int = 0,
                extra_qemu_args: Sequence[str] = (), *, timings: bool = False,
                untimed: bool = False, timeout: Optional[float] = None,
                check: bool = True) -> RawRun:
        """Run runner_command(...); ExecutionError on a timeout, and (when `check`) on a
        non-zero exit or a signal, quoting the command and the runner's stderr."""
        argv = self.runner_command(workdir, repeat, warmup, extra_qemu_args, timings=timings,
                                   untimed=untimed)
        return self._execute(argv, Path(workdir), self.timeout if timeout is None else timeout,
                             check)

    def read_outputs(self, workdir: Union[str, os.PathLike]) -> Dict[str, np.ndarray]:
        """out<i>.npy from `workdir`, reshaped to the graph's output shapes."""
        outs = {}
        for i, (name, shape) in enumerate(self.outputs):
            path = Path(workdir) / f"out{i}.npy"
            try:
                arr = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ExecutionError(f"the runner wrote no readable output {i} ({name!r}): "
                                     f"{exc}") from None
            if arr.dtype != np.float32 or arr.size != int(np.prod(shape)):
                raise ExecutionError(f"output {i} ({name!r}) has {arr.size} {arr.dtype} "
                                     f"values, expected {int(np.prod(shape))} float32")
            outs[name] = arr.reshape(shape)
        return outs

    # -- the Session API ---------------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        workdir = self.write_inputs(feeds)
        try:
            self.run_raw(workdir, repeat=1, warmup=0, untimed=True)
            return self.read_outputs(workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def profile(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> List[Dict]:
        """Per-step mean seconds of emulated execution (QEMU time, not a board's)."""
        workdir = self.write_inputs(feeds)
        try:
            self.run_raw(workdir, repeat=max(int(repeat), 1), warmup=1, timings=True)
            doc = json.loads((workdir / "timings.json").read_text(encoding="utf-8"))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        secs = doc["step_seconds"]
        return self.profile_rows(secs)

    def close(self) -> None:
        self._cleanup()

    # -- process handling --------------------------------------------------------------------

    def _execute(self, argv: List[str], cwd: Path, timeout: float, check: bool) -> RawRun:
        t0 = time.perf_counter()
        # Own process group: a timeout kills QEMU and anything it started, never leaves a hang.
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException as exc:  # timeout, or Ctrl-C: never leave QEMU running
            _kill_group(proc)
            proc.communicate()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise ExecutionError(
                    f"QEMU run timed out after {timeout:g} s and was killed (VLEN {self.vlen}; "
                    f"raise RVVKIT_QEMU_TIMEOUT or timeout= to allow longer)\n"
                    f"command: {shlex.join(argv)}") from None
            raise
        run = RawRun(argv, proc.returncode, out.decode("utf-8", "replace"),
                     err.decode("utf-8", "replace"), time.perf_counter() - t0, cwd)
        if check and run.returncode != 0:
            tail = run.stderr.strip()[-STDERR_TAIL:] or "<empty>"
            raise ExecutionError(
                f"the runner under QEMU {describe_exit(run.returncode)} (VLEN {self.vlen}, "
                f"compiler {shlex.join(self.compiler.argv)})\ncommand: {shlex.join(argv)}\n"
                f"stderr:\n{tail}")
        return run


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
