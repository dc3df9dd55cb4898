"""The executors a test can run a model on, and which of them a test session uses.

A test that takes an `executor` argument runs once per selected executor (tests/conftest.py
parametrizes it, the executor's id last: `test_conv[3x3_pad1-qemu-vlen128]`). The selection is
$RVVKIT_TEST_EXECUTORS, a comma-separated list of executor ids or of marks ("qemu": every
VLEN), e.g. `RVVKIT_TEST_EXECUTORS=host,qemu-vlen128`; `cuda` is the GPU alone, `cuda-emu` the
CPU emulator. By default: the host, QEMU at VLEN 128,
256, 512 and 1024 and at 128 with tail/mask-agnostic elements set to all ones (which catches
code that reads lanes past vl), the CUDA source under the CPU emulator (after a strict nvcc
compile where nvcc is), and the GPU when there is one. An executor this machine lacks the tools
for is skipped with the reason; `-m qemu` / `-m cuda` select by mark.

The QEMU variants compile the same source (the RVV object does not depend on VLEN): the JIT
cache of the test session compiles it once per case and each variant only starts a session.

Not a conftest.py: tests/conftest.py is imported by name (`from conftest import ...`)."""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from rvvkit.jit import targets

ENV = "RVVKIT_TEST_EXECUTORS"
MATRIX_ENV = "RVVKIT_TEST_MATRIX"
QEMU_VLENS = targets.riscv().vlens  # the VLENs QEMU accepts, from toolchain/


@dataclass(frozen=True)
class Executor:
    """One way to run an artifact: `rvvkit.load(art, on=on, **options)`."""
    id: str
    on: str
    options: Mapping = field(default_factory=dict)
    mark: Optional[str] = None      # the pytest mark its tests carry ("qemu", "cuda")
    strict_nvcc: bool = False       # first compile the artifact's CUDA source with nvcc -Werror
    # Thread counts to run on, in one session; outputs must be bit-identical across them.
    threads: Tuple[int, ...] = ()

    def why_not(self) -> str:
        """'' when this machine can run it, else what is missing."""
        return _why_not(self.on)

    def check_artifact(self, art) -> None:
        """What this executor asserts about an artifact before running it (the strict nvcc
        compile: for one artifact in NVCC_SHARE in CI's matrix, see ROTATING)."""
        if self.strict_nvcc and ci_share(art.cu_source or "", NVCC_SHARE):
            nvcc_compiles_artifact(art)

    def run(self, art, feeds) -> Dict:
        import rvvkit
        self.check_artifact(art)
        with rvvkit.load(art, on=self.on, **self.options) as sess:
            first = None
            for n in self.threads or (None,):
                sess.set_threads(n)
                outs = sess.run(dict(feeds))
                if first is None:
                    first = outs
                    continue
                for name, want in first.items():   # threads never change a bit
                    assert np.array_equal(outs[name], want, equal_nan=want.dtype.kind == "f"), \
                        f"{self.id}: output {name!r} with {n} threads differs from " \
                        f"{self.threads[0]} thread(s)"
            return first

    def __str__(self) -> str:
        return self.id


# Thread counts: the host runs every case on 1, 2 and 3 threads in one session (cheap; odd
# counts catch partition bugs); each QEMU variant runs one count (a QEMU start per run), so
# that together they cover 1, 2 and 3 against onnxruntime. tests/qemu/test_threads.py checks
# bit-identity across counts under QEMU.
QEMU_THREADS = {128: 3, 256: 2, 512: 1, 1024: 2}
HOST = Executor("host", "host", threads=(1, 2, 3))
ALL: Tuple[Executor, ...] = (
    HOST,
    *(Executor(f"qemu-vlen{v}", "qemu", {"vlen": v}, "qemu", threads=(QEMU_THREADS.get(v, 1),))
      for v in QEMU_VLENS),
    Executor("qemu-vlen128-tail-ones", "qemu", {"vlen": 128, "tail_ones": True}, "qemu",
             threads=(2,)),
    Executor("cuda-emu", "cuda-emu", mark="cuda", strict_nvcc=True),
    Executor("cuda", "cuda", mark="cuda"),
)
# The smaller set the new operator families' cases run on (the `op_executor` argument): the
# host, QEMU at VLEN 128 and 512 with tail/mask-agnostic elements all ones, the CUDA emulator
# and a GPU. Many cases times every VLEN would not fit CI's time; the RVV code of these ops is
# VLEN-agnostic strip-mining, which 128 and 512 with poisoned tails exercise.
SAMPLE: Tuple[Executor, ...] = (
    HOST,
    ALL[len(QEMU_VLENS) + 1],   # qemu-vlen128-tail-ones
    Executor("qemu-vlen512-tail-ones", "qemu", {"vlen": 512, "tail_ones": True}, "qemu",
             threads=(3,)),
    *(e for e in ALL if e.on in ("cuda-emu", "cuda")),
)


# CI's matrix, the default: each case runs on the host, on QEMU at VLEN 128 with poisoned tails,
# on the CUDA emulator, and on ONE of the plain QEMU VLENs, picked by a stable hash of the case
# (`keeps`), so that the table as a whole covers every VLEN and thread count while a case costs
# two QEMU runs, not five; one artifact in NVCC_SHARE also gets the strict nvcc compile. The
# conformance sample runs each case on one of its three targets, and the operator table
# (`op_executor`) each case on the host and one of the sample's other three (ROTATIONS). The
# whole product runs with RVVKIT_TEST_MATRIX=full (scripts/nightly.sh), and whenever
# RVVKIT_TEST_EXECUTORS chooses the executors.
ROTATING: Tuple[str, ...] = tuple(f"qemu-vlen{v}" for v in QEMU_VLENS)
NVCC_SHARE = 8
# The rotation of each parameter that takes executors: `executor` (ALL) over the plain VLENs,
# `target` (the conformance sample's targets) over QEMU VLEN 128 and 512 with poisoned tails and
# the CUDA emulator: each case on one of them.
ROTATIONS: Dict[str, Tuple[str, ...]] = {
    "executor": ROTATING,
    "target": ("qemu-vlen128-tail-ones", "qemu-vlen512-tail-ones", "cuda-emu"),
    # the operator table's SAMPLE: each case on the host and on one of these (the whole
    # table still covers all three; the full matrix runs every case on each)
    "op_executor": ("qemu-vlen128-tail-ones", "qemu-vlen512-tail-ones", "cuda-emu"),
}


def full_matrix() -> bool:
    return os.environ.get(MATRIX_ENV, "") == "full" or bool(os.environ.get(ENV, "").strip())


def ci_share(key: str, n: int) -> bool:
    """Whether CI's matrix runs the case `key` of a group it runs one in `n` of (a stable
    hash); the full matrix runs all of them."""
    return full_matrix() or _bucket(key, n) == 0


def _bucket(text: str, n: int) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest()[:8], 16) % n


def keeps(nodeid: str, executor: "Executor", param: str = "executor") -> bool:
    """Whether CI's matrix runs test `nodeid` (whose id holds the executor's) on `executor`,
    the value of its parameter `param`: always, but for the executors that parameter rotates
    over (ROTATIONS), of which it runs one."""
    group = ROTATIONS.get(param, ())
    if full_matrix() or executor.id not in group:
        return True
    case = nodeid.replace(executor.id, "")
    return group[_bucket(case, len(group))] == executor.id


@functools.lru_cache(maxsize=None)
def _why_not(on: str) -> str:
    """Asks rvvkit's own resolvers, so a test skips exactly when a user's session would fail
    for want of a tool (their messages say what to install)."""
    from rvvkit.errors import RvvkitError
    if on == "host":
        return ""
    if on == "qemu":
        from rvvkit.jit import resolve_compiler
        from rvvkit.runtime.qemu import resolve_qemu
        try:
            resolve_qemu()
            resolve_compiler(target="rvv")
        except RvvkitError as exc:
            return str(exc).splitlines()[0]
        return ""
    if on == "cuda-emu":
        return "" if shutil.which("g++") or shutil.which("clang++") else \
            "no host C++ compiler (g++ or clang++) for the CUDA emulator"
    if on == "cuda":
        from rvvkit.runtime.cuda import cuda_available
        ok, why = cuda_available()
        return "" if ok else why
    return f"unknown executor {on!r}"


def strict_nvcc_flags():
    """nvcc flags that make every warning of the host and device passes an error (the CUDA
    source is held to the C source's standard under gcc/clang)."""
    from rvvkit.jit.nvcc import nvcc_flags
    return nvcc_flags(extra=["-Xcompiler", "-Wall,-Wextra", "-Werror", "all-warnings"])


def nvcc_compiles_artifact(art) -> None:
    """The artifact has CUDA source and (where nvcc is) it compiles with strict_nvcc_flags();
    a CompileError carries nvcc's stderr."""
    from rvvkit.jit.nvcc import compile_cu
    assert art.cu_source is not None, art.meta.get("cuda")
    if _nvcc_ok():
        compile_cu(art.cu_source, flags=strict_nvcc_flags())


@functools.lru_cache(maxsize=None)
def _nvcc_ok() -> bool:
    from rvvkit.runtime.cuda import nvcc_available
    return nvcc_available()[0]


def selected(env: Optional[str] = None) -> List[Executor]:
    """The executors of this session: $RVVKIT_TEST_EXECUTORS (ids or marks), else every one
    except a GPU this machine does not have."""
    spec = os.environ.get(ENV, "") if env is None else env
    if not spec.strip():
        return [e for e in ALL if e.on != "cuda" or not e.why_not()]
    wanted = [w.strip() for w in spec.split(",") if w.strip()]
    ids = {e.id for e in ALL}
    known = ids | {e.mark or e.id for e in ALL}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise ValueError(f"{ENV}: unknown executor(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}")
    # a word that is an executor's id means that one ("cuda": the GPU, not its emulator)
    return [e for e in ALL if e.id in wanted or (e.mark in wanted and e.mark not in ids)]


def sample() -> List[Executor]:
    """SAMPLE, restricted to the kinds of executor this session selected."""
    kinds = {(e.on, e.mark) for e in selected()}
    return [e for e in SAMPLE if (e.on, e.mark) in kinds]


def params(executors: Optional[List[Executor]] = None) -> list:
    """pytest.param per executor: its id, its mark, and a skip with the reason when this
    machine cannot run it."""
    import pytest
    out = []
    for ex in selected() if executors is None else executors:
        marks = [getattr(pytest.mark, ex.mark)] if ex.mark else []
        why = ex.why_not()
        if why:
            marks.append(pytest.mark.skip(reason=f"{ex.id}: {why}"))
        out.append(pytest.param(ex, id=ex.id, marks=marks))
    return out
