"""QEMU executor: cross-compile the artifact's kernels and the C runner for riscv64, run the
runner under qemu-riscv64 with an RVV 1.0 CPU of the chosen VLEN, exchange .npy files.

    sess = QemuSession("model.rvv", vlen=512)            # or rvvkit.load(path, on="qemu")
    outs = sess.run({"data": x})

One run = one QEMU process in a fresh directory of the session's temp dir: inputs in<i>.npy,
outputs out<i>.npy, timings.json. `runner_command()` / `run_raw()` expose the exact argv so that
callers (instruction counting) can add QEMU options such as -plugin."""
from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..artifact import precompiled
from ..artifact.container import Artifact
from ..errors import ExecutorUnavailable, RvvkitError
from ..jit import isa as isa_profiles, resolve_compiler, targets
from .runner import build_kernels, build_runner
from .runner_session import RunnerSession
from .transport import LocalProcess, RawRun  # noqa: F401  (RawRun: run_raw's result)

_RV = targets.riscv()  # toolchain/targets/riscv64-linux-gnu.toml
DEFAULT_VLEN = _RV.default_vlen
VLENS = _RV.vlens
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_SYSROOT = _RV.sysroot


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
        qemu, source = _RV.qemu_binary, "PATH"
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


def cpu_string(vlen: int, tail_ones: bool = False, isa: Optional[str] = None,
               check: bool = False) -> str:
    """QEMU's -cpu value. tail_ones: tail/mask-agnostic elements become all ones instead of
    undisturbed, so code that reads lanes past vl, or masked-off lanes, gets garbage and fails
    the comparison. isa: the ISA profile's extensions (toolchain/isa/), as the counting QEMU
    7.2 spells them, or with `check` as the checking QEMU does: every extension it knows set
    on or off, so an instruction outside the profile traps."""
    profile = isa_profiles.profile(isa)
    return _RV.cpu_string(vlen, tail_ones) + profile.qemu_props("qemu10" if check else "qemu7")


class QemuSession(RunnerSession):
    executor = "qemu"
    emulated = True
    runner_where = "the runner under QEMU"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact], *,
                 compiler: Optional[str] = None, vlen: Optional[int] = None,
                 qemu: Optional[str] = None, tail_ones: bool = False,
                 timeout: Optional[float] = None, use_cache: Optional[bool] = None,
                 prefer_precompiled: Optional[bool] = None, isa: Optional[str] = None,
                 check: bool = False):
        # Cheap settings first: a bad VLEN, profile or a missing QEMU fails before compiling.
        self.vlen = resolve_vlen(vlen)
        self.isa = isa_profiles.profile(isa)
        # check: run under the checking QEMU, which traps what the profile lacks (no plugins:
        # it cannot count)
        self.check = bool(check)
        self.qemu = resolve_qemu(qemu or (isa_profiles.check_qemu() if check else None))
        self._counting_qemu: Optional[str] = None  # set while a VL-weighted count runs
        self.timeout = resolve_timeout(timeout)
        self.sysroot = resolve_sysroot()
        self.tail_ones = bool(tail_ones)
        super().__init__(artifact)

        def jit():
            self.compiler = resolve_compiler(compiler, target="rvv")
            return (build_kernels(self.artifact.c_source, self.compiler, use_cache=use_cache,
                                  isa=self.isa.name),
                    build_runner(self.compiler, use_cache=use_cache, isa=self.isa.name))
        self.compiler = None
        self.kernels_from, (self.kernels_path, self.runner_path) = precompiled.choose(
            self, "riscv64", prefer_precompiled, jit)
        self.tmpdir = Path(tempfile.mkdtemp(prefix="rvvkit-qemu-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.tmpdir), True)
        self.transport = LocalProcess(self.tmpdir)
        if isinstance(artifact, Artifact):
            # The runner reads the file; an in-memory artifact is written once per session.
            self.artifact_path = self.tmpdir / "model.rvv"
            artifact.save(self.artifact_path)
        else:
            self.artifact_path = Path(os.path.abspath(artifact))

    # -- what RunnerSession asks of an executor ---------------------------------------------

    def qemu_prefix(self, extra_args: Sequence[str] = ()) -> List[str]:
        # RVVKIT_SPIN_US=0: the thread pool's workers sleep at once instead of polling, so
        # that waiting never counts as instructions (and emulated time is not real time)
        # a VL-weighted count runs under the counting QEMU 10 (_counted_runs), which spells
        # the profile's extensions as the checking QEMU 10 does
        qemu10 = self.check or self._counting_qemu is not None
        cpu = cpu_string(self.vlen, self.tail_ones, self.isa.name, qemu10)
        return [self._counting_qemu or self.qemu, "-L", self.sysroot, "-cpu", cpu,
                "-E", "RVVKIT_SPIN_US=0", *map(str, extra_args)]

    def command(self, runner_argv: List[str], extra_args: Sequence[str]) -> List[str]:
        return self.qemu_prefix(extra_args) + runner_argv

    def failure_context(self) -> str:
        what = (f"compiler {shlex.join(self.compiler.argv)}" if self.compiler is not None
                else self.kernels_from)
        return f"VLEN {self.vlen}, ISA {self.isa.name}, {what}"

    def timeout_message(self, timeout: float, command) -> str:
        return (f"QEMU run timed out after {timeout:g} s and was killed (VLEN {self.vlen}; "
                f"raise RVVKIT_QEMU_TIMEOUT or timeout= to allow longer)\n"
                f"command: {shlex.join(command)}")

    # -- measuring ----------------------------------------------------------------------------

    def instruction_counts(self, feeds: Mapping[str, np.ndarray], inferences: int = 1, *,
                           vl: bool = False) -> Dict:
        """Per-inference dynamic instruction counts (icount.COUNT_KEYS: insns, vector_insns,
        vsetvl, lmul_weighted_vector_ops, vector_insns_unknown_lmul; and per_thread, the same
        per vCPU index, with per_thread_overflow): a run doing `inferences` inferences minus a
        run that loads everything and does none, per thread matched by vCPU index
        (icount.per_run). Both warm up once first, so lazy symbol binding, first-touch work
        and the start of worker threads are in both and cancel; the argv strings have equal
        lengths. With `vl`, counted under the counting QEMU 10 (vcount.py), which adds
        vl_weighted_vector_ops and work_weighted_vector_ops, in total and per thread."""
        from .counting.icount import per_run
        from .counting.vcount import counter
        args, read, _, qemu = counter(vl)
        hi, lo = self._counted_runs(feeds, inferences, lambda d: (
            args(d / "counts.json"), lambda: read(d / "counts.json")), qemu=qemu)
        try:
            out = per_run(hi, lo, inferences, whole=True)
        except ValueError as exc:  # a count that shrinks with more work cannot be trusted
            raise RvvkitError(f"instruction counts of {inferences} inference(s) and of none "
                              f"do not subtract: {exc} (threads that spin while waiting make "
                              "counts depend on timing)") from None
        return out

    def instruction_profile(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, Dict[str, int]]:
        """The counts of one inference per function (iprofile.KEYS: insns, vector_insns,
        lmul_weighted_vector_ops; the generated kernels by name, other code by its file), as
        instruction_counts: one inference minus none, after a warm-up."""
        from .counting import iprofile
        from .counting.icount import qemu_plugin_args
        return iprofile.difference(*self._counted_runs(feeds, 1, lambda d: (
            qemu_plugin_args(d / "counts.json", blocks=d / "blocks.txt"),
            lambda: iprofile.by_function(d / "blocks.txt"))))

    def instruction_classes(self, feeds: Mapping[str, np.ndarray], *,
                            vl: Optional[bool] = None) -> Dict:
        """One inference's instructions by class x LMUL x SEW: a run of one inference minus a
        run of none, as instruction_counts, under a slower class-counting plugin.

        Always: {"insns": N, "work_weighted_vector_ops": W, "classes": {cls: {"m4.e32": n,
        ...}, "int": {"-": n}, ...}, "counted_by": "qemu 7.2" | "qemu 10.0.2"}. Under the
        counting QEMU 10 (vcount.py) also the other VL_KEYS (vector_insns, vsetvl,
        lmul_weighted_vector_ops, vector_insns_unknown_lmul, vl_weighted_vector_ops),
        "lmul_weighted" and "vl_weighted" ({cls: {key: weighted}}, the keys of "classes",
        vector classes only), "per_thread" and "per_thread_overflow" (as instruction_counts').
        `vl`: None uses the counting QEMU 10 where scripts/qemu_plugins.sh built it, else QEMU
        7.2 (iclass.py, no VL figures); True requires QEMU 10 (an RvvkitError naming the
        set-up script without it); False uses QEMU 7.2."""
        from .counting import vcount
        if vl is None:
            vl = vcount.counting_qemu() is not None
        if vl:
            hi, lo = self._counted_runs(feeds, 1, lambda d: (
                vcount.qemu_vcount_args(d / "v.json"), lambda: vcount.read_vcounts(d / "v.json")),
                qemu=vcount.require_counting_qemu())
            out = vcount.difference(hi, lo)
            out["lmul_weighted"] = {c: k for c, k in out["lmul_weighted"].items()
                                    if c.startswith("v")}
            return dict(out, counted_by=f"qemu {vcount.VERSION}")
        from .counting.iclass import class_difference, qemu_class_args, read_classes
        hi, lo = self._counted_runs(feeds, 1, lambda d: (
            qemu_class_args(d / "classes.json"), lambda: read_classes(d / "classes.json")))
        return dict(class_difference(hi, lo), counted_by="qemu 7.2")

    def generation_counts(self, prompt, new_tokens: int, *, vl: bool = False) -> Dict:
        """The instruction counts (icount.read_counts) of one `runner --generate` process:
        the prompt, then `new_tokens` greedy tokens. Per-token figures are differences of two
        such runs (benchmarks/bench_llm.py). With `vl`, counted under the counting QEMU 10
        (vcount.read_vcounts: vl_weighted_vector_ops too)."""
        from .counting.vcount import counter
        args, read, _, qemu = counter(vl)
        if qemu is None:
            self._need_plugins()
        rundir = self.transport.new_dir()
        self._counting_qemu = qemu
        try:
            out = rundir / "counts.json"
            self.run_raw(rundir, argv=self.generate_argv(rundir, list(prompt), new_tokens),
                         extra_args=args(out))
            return read(out)
        finally:
            self._counting_qemu = None
            self.transport.remove(rundir)

    def _need_plugins(self) -> None:
        if self.check:
            raise RvvkitError("the checking QEMU cannot count instructions (Debian builds its "
                              "QEMU 10 without TCG plugins): count with check=False, which "
                              "runs the same build under the counting QEMU 7.2")

    def _counted_runs(self, feeds, inferences: int, plugin, qemu: Optional[str] = None) -> tuple:
        """(what a run of `inferences` inferences read, what a run of none read), each run
        warmed up once: plugin(rundir) gives the QEMU arguments and the reader of their
        output. `qemu`: the counting QEMU 10's binary, in place of the session's."""
        if not 1 <= inferences <= 9:
            raise ValueError("inferences must be 1..9 (equal-length argv keeps counts exact)")
        if qemu is None:
            self._need_plugins()
        rundir = self.write_inputs(feeds)
        self._counting_qemu = qemu
        try:
            out = []
            for repeat in (inferences, 0):
                args, read = plugin(rundir)
                self.run_raw(rundir, repeat=repeat, warmup=1, untimed=True, extra_args=args)
                out.append(read())
            return tuple(out)
        finally:
            self._counting_qemu = None
            self.transport.remove(rundir)

    def measure(self, feeds: Mapping[str, np.ndarray], repeat: int = 10, warmup: int = 2, *,
                count: bool = True) -> Dict:
        """The runner's mean under QEMU (emulation speed, not a board's) and, with `count`,
        the exact instructions of one inference, by which to compare RVV code."""
        out = super().measure(feeds, repeat, warmup)
        if count and not self.check:
            c = self.instruction_counts(feeds)
            out.update(dynamic_instructions=c["insns"], vector_instructions=c["vector_insns"],
                       vsetvl_instructions=c["vsetvl"],
                       lmul_weighted_vector_ops=c["lmul_weighted_vector_ops"],
                       vector_instructions_unknown_lmul=c["vector_insns_unknown_lmul"])
        return out

    def describe(self) -> Dict:
        label = f"qemu (VLEN {self.vlen})" + isa_profiles.run_suffix(self.isa.name, self.check)
        return dict(super().describe(), label=label, vlen=self.vlen, qemu=self.qemu,
                    isa=self.isa.name, isa_checked=self.check,
                    counts_instructions=not self.check)

    def close(self) -> None:
        self._cleanup()
