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

import logging
import os
import shlex
from typing import Dict, List, Optional, Sequence, Union

from ..artifact.container import Artifact
from ..artifact import precompiled
from ..errors import CompilerNotFound, ExecutionError
from .boards import board_config
from .remote import Board
from .remote_jit import board_flags, build_on_board, resolve_board_compiler
from .runner import LINK_FLAGS, RUNNER_NAME, runner_source
from .runner_session import RunnerSession
from .transport import BoardShell

log = logging.getLogger("rvvkit.ssh")


class SshSession(RunnerSession):
    executor = "ssh"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact], target: str, *,
                 compiler: Optional[str] = None, use_cache: Optional[bool] = None,
                 connect_timeout: Optional[float] = None,
                 command_timeout: Optional[float] = None,
                 compile_timeout: Optional[float] = None,
                 trust_new_host: Optional[bool] = None,
                 prefer_precompiled: Optional[bool] = None):
        # Settings first: a bad address fails before any network traffic.
        self.config = board_config(target, connect_timeout=connect_timeout,
                                   command_timeout=command_timeout,
                                   compile_timeout=compile_timeout,
                                   trust_new_host=trust_new_host)
        self.target = self.config.label
        self.runner_where = f"the runner on {self.target}"
        self.timeout = self.config.command_timeout
        # A qemu-riscv64 wrapper makes the board's latency emulation speed.
        self.emulated = "qemu" in self.config.wrapper
        super().__init__(artifact)
        self.board: Optional[Board] = None
        self.tmpdir = ""
        self.board = Board(self.config)
        try:
            self._prepare(compiler, True if use_cache is None else bool(use_cache),
                          precompiled.prefer_from_env(prefer_precompiled))
        except BaseException:
            self.close()
            raise

    def _prepare(self, compiler: Optional[str], use_cache: bool, prefer: bool) -> None:
        board = self.board
        self.compiler = None
        if not prefer:
            try:
                self.compiler = resolve_board_compiler(board, compiler)
            except CompilerNotFound as exc:
                arch = precompiled.arch_of(board.arch)
                if arch not in precompiled.available(self.artifact):
                    raise CompilerNotFound(f"{exc}; or run precompiled kernels: `rvvkit pack "
                                           f"ARTIFACT --precompile {arch}`") from None
                log.warning("%s: no compiler (%s); running the artifact's precompiled %s "
                            "kernels", board.label, str(exc).splitlines()[0][:120], arch)
        self.tmpdir = board.mktemp("session-")
        self.transport = BoardShell(board, self.tmpdir)
        self.artifact_path = f"{self.tmpdir}/model.rvv"
        board.put(self.artifact.to_bytes(), self.artifact_path)
        if self.compiler is None:
            self._upload_precompiled()
            return
        self.flags = board_flags(board, self.compiler)
        self.runner_path, self.runner_cached = build_on_board(
            board, runner_source(), self.compiler, board_flags(board, self.compiler,
                                                               shared=False),
            name=RUNNER_NAME, kind="exe", link_flags=LINK_FLAGS, use_cache=use_cache,
            scratch=self.tmpdir)
        self.kernels_path, self.kernels_cached = build_on_board(
            board, self.artifact.c_source, self.compiler, self.flags, name="model", kind="so",
            use_cache=use_cache, scratch=self.tmpdir)

    def _upload_precompiled(self) -> None:
        """The artifact's kernels and runner for the board's machine, into the session's dir
        (not the board's build cache: they are the artifact's, not built there)."""
        arch = precompiled.arch_of(self.board.arch)
        so, runner, self.kernels_from = precompiled.bytes_for(self.artifact, arch)
        if runner is None:
            raise precompiled.missing(self.artifact, arch, "no precompiled runner")
        self.kernels_path = f"{self.tmpdir}/model.so"
        self.runner_path = f"{self.tmpdir}/{RUNNER_NAME}"
        self.board.put(so, self.kernels_path)
        self.board.put(runner, self.runner_path)
        res = self.board.sh(f"chmod 700 {shlex.quote(self.runner_path)}", timeout=60,
                            what="making the runner executable")
        if res.rc != 0:
            raise ExecutionError(f"{self.target}: cannot make the runner executable: "
                                 f"{res.err.strip()}")
        self.runner_cached = self.kernels_cached = False
        log.info("%s: running the artifact's %s", self.target, self.kernels_from)

    # -- what RunnerSession asks of an executor ---------------------------------------------

    def command(self, runner_argv: List[str], extra_args: Sequence[str]) -> str:
        """Shell text run in a run dir on the board: the wrapper (shell text from the board's
        settings, e.g. `qemu-riscv64 -cpu ...`), `extra_args`, then the runner's argv."""
        argv = shlex.join([*extra_args, *runner_argv])
        wrapper = self.config.wrapper.strip()
        return f"{wrapper} {argv}" if wrapper else argv

    def failure_context(self) -> str:
        if self.compiler is None:
            return self.kernels_from
        return f"compiler {shlex.join(self.compiler.argv)}"

    def check_open(self) -> None:
        if self.board is None:
            raise ExecutionError(f"{self.target}: session is closed")

    def describe(self) -> Dict:
        cached = ("cached" if self.kernels_cached else "compiled on the board"
                  if self.compiler is not None else "precompiled")
        return dict(super().describe(), path=self.target, target=self.target,
                    label=f"{self.target} ({self.compiler_text()}, {cached})",
                    wrapper=self.config.wrapper, machine=self.board.arch if self.board else "")

    def close(self) -> None:
        board, self.board = self.board, None
        if board is None:
            return
        try:
            if self.tmpdir:
                board.remove(self.tmpdir)
        finally:
            board.close()
