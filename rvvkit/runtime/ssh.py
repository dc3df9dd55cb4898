"""SSH executor: a board on the network (or an emulated one) runs the artifact with the C
runner, no Python needed there.

    sess = SshSession("model.rvv", "ssh://k1-board")     # or rvvkit.load(path, on="ssh://...")
    outs = sess.run({"data": x})

Opening a session connects (host key checked), uploads the artifact into a temporary dir on
the board, and JIT-compiles the runner and the kernels there with the board's compiler, both
cached on the board (rvvkit.runtime.remote_jit). One run = one fresh dir under the session's:
inputs uploaded as in<i>.npy, the runner started (behind the board's wrapper, if any),
outputs and timings downloaded into memory, the dir removed. Nothing is written locally; the
session's dir goes at close()."""
from __future__ import annotations

import io
import json
import logging
import os
import shlex
import signal
import uuid
from typing import Dict, List, Mapping, Optional, Union

import numpy as np

from ..artifact import Artifact
from ..errors import ExecutionError
from .boards import board_config
from .remote import Board
from .remote_jit import board_flags, build_on_board, resolve_board_compiler
from .runner import LINK_FLAGS, RUNNER_NAME, describe_exit, runner_source
from .session import Session

log = logging.getLogger("rvvkit.ssh")
STDERR_TAIL = 4000


def describe_remote_exit(rc: int) -> str:
    # A POSIX shell reports a command killed by signal N as exit code 128+N.
    if 128 < rc < 128 + 65:
        try:
            return f"was killed by signal {signal.Signals(rc - 128).name} ({rc - 128})"
        except ValueError:
            pass
    return describe_exit(rc)


class SshSession(Session):
    executor = "ssh"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact], target: str, *,
                 compiler: Optional[str] = None, use_cache: Optional[bool] = None,
                 connect_timeout: Optional[float] = None,
                 command_timeout: Optional[float] = None,
                 compile_timeout: Optional[float] = None,
                 trust_new_host: Optional[bool] = None):
        # Settings first: a bad address fails before any network traffic.
        self.config = board_config(target, connect_timeout=connect_timeout,
                                   command_timeout=command_timeout,
                                   compile_timeout=compile_timeout,
                                   trust_new_host=trust_new_host)
        self.target = self.config.label
        super().__init__(artifact)
        self.board: Optional[Board] = None
        self.tmpdir = ""
        self.board = Board(self.config)
        try:
            self._prepare(compiler, True if use_cache is None else bool(use_cache))
        except BaseException:
            self.close()
            raise

    def _prepare(self, compiler: Optional[str], use_cache: bool) -> None:
        board = self.board
        self.compiler = resolve_board_compiler(board, compiler)
        self.flags = board_flags(board, self.compiler)
        self.tmpdir = board.mktemp("session-")
        self.artifact_path = f"{self.tmpdir}/model.rvv"
        board.put(self.artifact.to_bytes(), self.artifact_path)
        self.runner_path, self.runner_cached = build_on_board(
            board, runner_source(), self.compiler, board_flags(board, self.compiler,
                                                               shared=False),
            name=RUNNER_NAME, kind="exe", link_flags=LINK_FLAGS, use_cache=use_cache,
            scratch=self.tmpdir)
        self.kernels_path, self.kernels_cached = build_on_board(
            board, self.artifact.c_source, self.compiler, self.flags, name="model", kind="so",
            use_cache=use_cache, scratch=self.tmpdir)

    # -- one runner invocation ---------------------------------------------------------------

    def runner_command(self, inputs: int, repeat: int, warmup: int, *, timings: bool,
                       untimed: bool) -> str:
        """Shell text run in a run dir on the board: the wrapper (shell text from the board's
        settings, e.g. `qemu-riscv64 -cpu ...`), then the runner's argv."""
        argv = [self.runner_path, self.artifact_path, self.kernels_path,
                "--inputs", *[f"in{i}.npy" for i in range(inputs)], "--outdir", ".",
                "--repeat", str(int(repeat)), "--warmup", str(int(warmup))]
        if timings:
            argv += ["--timings", "timings.json"]
        if untimed:
            argv.append("--untimed")
        wrapper = self.config.wrapper.strip()
        return f"{wrapper} {shlex.join(argv)}" if wrapper else shlex.join(argv)

    def invoke(self, feeds: Mapping[str, np.ndarray], repeat: int = 1, warmup: int = 0, *,
               timings: bool = False, untimed: bool = False, outputs: bool = True) -> Dict:
        """Run the runner once on the board: {"outputs": {name: array}, "timings": doc}.
        ExecutionError (with the runner's stderr) if it fails; nothing is kept then."""
        ins = self.validate(feeds)
        board = self.board
        if board is None:
            raise ExecutionError(f"{self.target}: session is closed")
        rundir = f"{self.tmpdir}/run-{uuid.uuid4().hex[:12]}"
        board.mkdir(rundir)
        try:
            for i, arr in enumerate(ins):
                buf = io.BytesIO()
                np.save(buf, arr, allow_pickle=False)
                board.put(buf.getvalue(), f"{rundir}/in{i}.npy")
            cmd = self.runner_command(len(ins), repeat, warmup, timings=timings,
                                      untimed=untimed)
            res = board.sh(f"cd {shlex.quote(rundir)} && {cmd}",
                           timeout=self.config.command_timeout, what="the run")
            if res.rc != 0:
                tail = res.err.strip()[-STDERR_TAIL:] or "<empty>"
                raise ExecutionError(
                    f"the runner on {self.target} {describe_remote_exit(res.rc)} (compiler "
                    f"{shlex.join(self.compiler.argv)})\ncommand: {cmd}\nstderr:\n{tail}")
            result: Dict = {"outputs": {}, "timings": None}
            if outputs and repeat > 0:
                result["outputs"] = self._fetch_outputs(rundir)
            if timings:
                result["timings"] = json.loads(board.get(f"{rundir}/timings.json"))
            return result
        finally:
            board.remove(rundir)

    def _fetch_outputs(self, rundir: str) -> Dict[str, np.ndarray]:
        outs = {}
        for i, (name, shape) in enumerate(self.outputs):
            try:
                arr = np.load(io.BytesIO(self.board.get(f"{rundir}/out{i}.npy")),
                              allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ExecutionError(f"the runner on {self.target} wrote no readable output "
                                     f"{i} ({name!r}): {exc}") from None
            if arr.dtype != np.float32 or arr.size != int(np.prod(shape)):
                raise ExecutionError(f"output {i} ({name!r}) from {self.target} has {arr.size} "
                                     f"{arr.dtype} values, expected {int(np.prod(shape))} "
                                     "float32")
            outs[name] = arr.reshape(shape)
        return outs

    # -- the Session API ---------------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self.invoke(feeds, untimed=True)["outputs"]

    def profile(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> List[Dict]:
        """Per-step mean seconds measured on the board by the runner's clock (with a QEMU
        wrapper: emulation time, not a board's)."""
        doc = self.invoke(feeds, max(int(repeat), 1), 1, timings=True, outputs=False)
        secs = doc["timings"]["step_seconds"]
        return self.profile_rows(secs)

    def timings(self, feeds: Mapping[str, np.ndarray], repeat: int = 10,
                warmup: int = 2) -> Dict:
        """The runner's timings document for `repeat` runs after `warmup` (for bench)."""
        return self.invoke(feeds, max(int(repeat), 1), warmup, timings=True,
                           outputs=False)["timings"]

    def close(self) -> None:
        board, self.board = self.board, None
        if board is None:
            return
        try:
            if self.tmpdir:
                board.remove(self.tmpdir)
        finally:
            board.close()
