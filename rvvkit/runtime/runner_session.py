"""Sessions that drive the standalone C runner (runtime_c/runner.c) rather than calling kernels
in process: QEMU on this machine and boards over SSH. One run = one fresh run dir holding the
inputs as in<i>.npy; the runner writes out<i>.npy (and timings.json when asked) there.

What differs between them is the transport (rvvkit.runtime.transport: a local process or a
board's shell) and the command's prefix (QEMU and its options, or the board's wrapper); writing
inputs, the runner's argv, reading outputs and timings and explaining exit codes are here once.

Subclasses set runner_path, artifact_path, kernels_path, compiler, timeout and transport, and
implement command() (the runner's argv behind their prefix) and failure_context()."""
from __future__ import annotations

import io
import json
import re
import signal
import subprocess
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..llm.decoder import require
from ..errors import ExecutionError
from ..llm.generate import Generation, Sampling, check_prompt, eos_ids
from ..llm.streaming import TokenLines, stream_tokens
from .runner import DATA_EXIT, describe_exit
from .session import Session
from .transport import Command, RawRun

STDERR_TAIL = 4000  # characters of the runner's stderr kept in error messages


def describe_exit_code(rc: int) -> str:
    """describe_exit, also for a POSIX shell's 128+N (the command was killed by signal N)."""
    if 128 < rc < 128 + 65:
        try:
            return f"was killed by signal {signal.Signals(rc - 128).name} ({rc - 128})"
        except ValueError:
            pass
    return describe_exit(rc)


class RunnerSession(Session):
    # "the runner under QEMU" / "the runner on ssh://k1": how messages name where it ran.
    runner_where = "the runner"

    # -- what each executor supplies -------------------------------------------------------

    def command(self, runner_argv: List[str], extra_args: Sequence[str]) -> Command:
        """The runner's argv behind this executor's prefix, with `extra_args` (options for
        the emulator, e.g. a QEMU -plugin) between the two."""
        raise NotImplementedError

    def failure_context(self) -> str:
        """What to say in brackets after a failed run, e.g. "VLEN 256, compiler clang"."""
        raise NotImplementedError

    def timeout_message(self, timeout: float, command: Command) -> str:
        raise NotImplementedError

    def check_open(self) -> None:
        """ExecutionError when the session is closed (a board session's connection)."""

    # -- the runner, piece by piece (also for instruction counting) ------------------------

    def write_inputs(self, feeds: Mapping[str, np.ndarray]):
        """A fresh run dir holding the validated inputs as in<i>.npy, in graph order."""
        ins = self.validate(feeds)
        self.check_open()
        rundir = self.transport.new_dir()
        try:
            for i, arr in enumerate(ins):
                buf = io.BytesIO()
                np.save(buf, arr, allow_pickle=False)
                self.transport.put(rundir, f"in{i}.npy", buf.getvalue())
        except BaseException:
            self.transport.remove(rundir)
            raise
        return rundir

    def runner_argv(self, rundir, repeat: int = 1, warmup: int = 0, *, timings: bool = False,
                    untimed: bool = False) -> List[str]:
        """The runner's own argv for a run in `rundir`. repeat=0 loads everything but never
        infers; untimed skips per-step clocks (nothing but kernels between steps)."""
        where = self.transport.runner_dir(rundir)

        def path(name: str) -> str:
            return name if where == "." else f"{where}/{name}"
        argv = [str(self.runner_path), str(self.artifact_path), str(self.kernels_path),
                "--inputs", *[path(f"in{i}.npy") for i in range(len(self.inputs))],
                "--outdir", where, "--repeat", str(int(repeat)), "--warmup", str(int(warmup))]
        if timings:
            argv += ["--timings", path("timings.json")]
        if untimed:
            argv.append("--untimed")
        if self.threads:
            argv += ["--threads", str(int(self.threads))]
        return argv

    def runner_command(self, rundir, repeat: int = 1, warmup: int = 0,
                       extra_args: Sequence[str] = (), *, timings: bool = False,
                       untimed: bool = False) -> Command:
        """What run_raw runs: runner_argv(...) behind this executor's prefix."""
        argv = self.runner_argv(rundir, repeat, warmup, timings=timings, untimed=untimed)
        return self.command(argv, [str(a) for a in extra_args])

    def run_raw(self, rundir, repeat: int = 1, warmup: int = 0, extra_args: Sequence[str] = (),
                *, timings: bool = False, untimed: bool = False, timeout: Optional[float] = None,
                check: bool = True, argv: Optional[List[str]] = None,
                on_stdout=None) -> RawRun:
        """Run runner_command(...) in `rundir` (from write_inputs); ExecutionError on a
        timeout, and (when `check`) on a non-zero exit or a signal, quoting the command and
        the runner's stderr. `on_stdout` sees the runner's stdout as it comes."""
        self.check_open()
        cmd = self.command(argv, [str(a) for a in extra_args]) if argv else \
            self.runner_command(rundir, repeat, warmup, extra_args, timings=timings,
                                untimed=untimed)
        limit = self.timeout if timeout is None else timeout
        try:
            run = self.transport.execute(cmd, rundir, limit, on_stdout)
        except subprocess.TimeoutExpired:
            raise ExecutionError(self.timeout_message(limit, cmd)) from None
        if check and run.returncode == DATA_EXIT:
            m = re.search(r"step (\d+): an index", run.stderr)
            if m:
                raise self.step_error(int(m.group(1)))
        if check and run.returncode != 0:
            tail = run.stderr.strip()[-STDERR_TAIL:] or "<empty>"
            # The runner's own one-line reason, when it gave one, leads the message.
            said = re.match(r"rvvkit-runner: (.+)", run.stderr.strip())
            raise ExecutionError(
                f"{self.runner_where} {describe_exit_code(run.returncode)}"
                + (f": {said.group(1)}" if said else "")
                + f" ({self.failure_context()})\ncommand: {run.command_text}\nstderr:\n{tail}")
        return run

    def read_outputs(self, rundir) -> Dict[str, np.ndarray]:
        """out<i>.npy from `rundir`, reshaped to the graph's output shapes."""
        outs = {}
        for i, (name, shape) in enumerate(self.outputs):
            try:
                arr = np.load(io.BytesIO(self.transport.get(rundir, f"out{i}.npy")),
                              allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ExecutionError(f"{self.runner_where} wrote no readable output {i} "
                                     f"({name!r}): {exc}") from None
            want = self.dtypes[name]
            if arr.dtype != want or arr.size != int(np.prod(shape)):
                raise ExecutionError(f"output {i} ({name!r}) from {self.runner_where} has "
                                     f"{arr.size} {arr.dtype} values, expected "
                                     f"{int(np.prod(shape))} {want}")
            outs[name] = arr.reshape(shape)
        return outs

    def read_timings(self, rundir) -> Dict:
        """The runner's timings.json: step_seconds, mean_seconds, ..."""
        return json.loads(self.transport.get(rundir, "timings.json").decode("utf-8"))

    def invoke(self, feeds: Mapping[str, np.ndarray], repeat: int = 1, warmup: int = 0, *,
               timings: bool = False, untimed: bool = False, outputs: bool = True) -> Dict:
        """One runner run on `feeds`: {"outputs": {name: array}, "timings": doc or None}.
        Its run dir is removed whatever happens."""
        rundir = self.write_inputs(feeds)
        try:
            self.run_raw(rundir, repeat, warmup, timings=timings, untimed=untimed)
            return {"outputs": self.read_outputs(rundir) if outputs and repeat > 0 else {},
                    "timings": self.read_timings(rundir) if timings else None}
        finally:
            self.transport.remove(rundir)

    # -- generation: the loop runs in the runner, on the target ----------------------------

    def generate_argv(self, rundir, prompt: Sequence[int], max_new_tokens: int,
                      eos: Sequence[int] = (), logits: bool = False,
                      sampling: Sampling = Sampling()) -> List[str]:
        """The runner's argv for `runner --generate` (rvk_generate.h) in `rundir`."""
        dec = require(self.artifact.meta)
        where = self.transport.runner_dir(rundir)
        names = self.input_names
        def index(role: str) -> int:
            return names.index(dec[role]) if dec.get(role) else -1
        roles = [index("ids"), index("seqlens"), index("total"),
                 self.output_names.index(dec["logits"]), index("mask"), index("positions")]
        argv = [str(self.runner_path), str(self.artifact_path), str(self.kernels_path),
                "--generate", str(int(max_new_tokens)),
                "--prompt-ids", ",".join(str(int(t)) for t in prompt),
                "--roles", ",".join(map(str, roles)), "--max-seq", str(dec["max_seq"]),
                "--cache-steps", str(dec.get("cache_steps", 0)), "--outdir", where]
        if eos:
            argv += ["--eos", ",".join(str(int(t)) for t in eos)]
        if sampling.temperature:
            argv += ["--temperature", repr(float(sampling.temperature)), "--top-k",
                     str(int(sampling.top_k)), "--top-p", repr(float(sampling.top_p)),
                     "--seed", str(int(sampling.seed) & (2 ** 62 - 1))]
        if logits:
            argv += ["--logits-out", "logits.npy" if where == "." else f"{where}/logits.npy"]
        if self.threads:
            argv += ["--threads", str(int(self.threads))]
        return argv

    def generate(self, prompt: Sequence[int], max_new_tokens: int = 32,
                 sampling: Sampling = Sampling(), eos=None,
                 keep_logits: bool = False, on_token=None) -> Generation:
        """Session.generate, with the loop in C on the target: one runner process for the
        whole generation, its key/value caches in the runner's arena. Sampling draws from the
        runner's own generator (reproducible per seed on every target, not numpy's draws).
        `on_token` sees each token as the runner prints it (a line per token, read from
        QEMU's pipe or the SSH channel as it comes)."""
        dec = require(self.artifact.meta)
        sampling.check()
        ids = check_prompt(dec, prompt, max_new_tokens)
        stops = eos_ids(dec, eos)
        rundir = self.transport.new_dir()
        lines = TokenLines(on_token)
        try:
            self.run_raw(rundir, argv=self.generate_argv(rundir, ids, max_new_tokens, stops,
                                                         keep_logits, sampling),
                         on_stdout=lines.feed)
            doc = json.loads(self.transport.get(rundir, "generate.json").decode("utf-8"))
            rows = np.load(io.BytesIO(self.transport.get(rundir, "logits.npy")),
                           allow_pickle=False) if keep_logits else None
        finally:
            self.transport.remove(rundir)
        out = Generation(ids, [int(t) for t in doc["tokens"]], float(doc["prefill_seconds"]),
                         float(doc["decode_seconds"]), str(doc["stopped"]))
        if rows is not None:
            out.logits = list(rows.reshape(len(out.tokens), dec["vocab"]))
        if lines.tokens != out.tokens:
            raise ExecutionError(f"{self.runner_where} printed tokens {lines.tokens} but wrote "
                                 f"{out.tokens}")
        return out

    def generate_iter(self, prompt: Sequence[int], max_new_tokens: int = 32, **options):
        """generate(), its tokens yielded as the runner prints them (the runner runs on a
        thread; closing the iterator early stops it at its next token)."""
        return stream_tokens(lambda on_token: self.generate(prompt, max_new_tokens,
                                                            on_token=on_token, **options))

    # -- the Session contract --------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return self.invoke(feeds, untimed=True)["outputs"]

    def profile(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> List[Dict]:
        """Per-step mean seconds by the runner's clock (under QEMU: emulation time)."""
        doc = self.invoke(feeds, max(int(repeat), 1), 1, timings=True, outputs=False)
        return self.profile_rows(doc["timings"]["step_seconds"])

    def measure(self, feeds: Mapping[str, np.ndarray], repeat: int = 10, warmup: int = 2, *,
                count: bool = True) -> Dict:
        """Mean seconds per inference by the runner's own clock (no process start-up or
        network in it; under QEMU, emulation speed)."""
        runs = max(int(repeat), 1)
        doc = self.invoke(feeds, runs, warmup, timings=True, outputs=False)["timings"]
        return {"latency_ms": 1e3 * float(doc["mean_seconds"]), "latency_stat": "mean",
                "runs": runs}
