"""Modelled time of one step on a board from instruction counts by class x LMUL x SEW
(rvvkit.runtime.counting.iclass) and the bytes the step moves: a MODEL, not a measurement.

Compute, per core (the cost table of toolchain/cost/, e.g. x60.toml from LLVM's X60 model):
every instruction holds its pipe `occupancy` cycles; the core is in-order and issues
`issue_width` instructions a cycle, so a stream of work takes at least

    max(instructions / issue_width, max over pipes of busy cycles / units of that pipe)

cycles (the pipes overlap: a vector load runs beside a multiply-add, scalar loop code beside
both), plus the latency of `exposed` classes (reductions, vector-to-scalar moves), which an
in-order core waits out. Dependences between other instructions are not modelled: kernels
that keep several accumulators hide them, and the occupancy figures already carry most of
what a long op costs.

Memory: the step's bytes at the board's bandwidth for the threads that run it (one core
reaches `efficiency_one_core` of the peak, several cores together at most
`efficiency_all_cores`). The step takes the larger of compute and memory time (a roofline:
the streams a decoder or a convolution reads are unit-stride, which the cores' prefetchers
run ahead of the arithmetic, so the two overlap rather than add).

Threads: the class counts cover all threads together; each thread gets its share (by its
per-thread weighted instruction count, or an even split) and the slowest sets the time."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

from ..errors import RvvkitError
from .cost_table import CostTable

ClassCounts = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class Memory:
    peak_gb_s: float                  # the DRAM interface's peak
    efficiency_one_core: float        # the fraction of it one core's streams reach
    efficiency_all_cores: float       # the fraction all cores together reach
    cores: int

    def bytes_per_s(self, threads: int) -> float:
        """Bandwidth `threads` cores reach together: each at most its own, all at most the
        shared figure."""
        if threads < 1:
            raise RvvkitError(f"threads must be at least 1, not {threads}")
        one = self.peak_gb_s * 1e9 * self.efficiency_one_core
        return min(one * min(threads, self.cores), self.peak_gb_s * 1e9 *
                   self.efficiency_all_cores)


def class_cycles(classes: ClassCounts, table: CostTable) -> Dict[str, Any]:
    """Cycles one core takes for `classes` ({"vfma": {"m4.e32": n, ...}, "int": {"-": n}}):
    cycles, issue_cycles, pipe_cycles (per pipe), exposed_cycles and bound_by (the pipe, or
    "issue", that sets the throughput bound)."""
    busy = {p: 0.0 for p in table.pipes}
    insns = exposed = 0.0
    for cls, keys in classes.items():
        for key, n in keys.items():
            insns += n
            busy[table.pipe(cls)] += n * table.occupancy(cls, key)
            exposed += n * table.exposed_latency(cls, key)
    pipe_cycles = {p: busy[p] / table.pipes[p] for p in busy}
    issue = insns / table.issue_width
    bound_by, bound = max([("issue", issue)] + sorted(pipe_cycles.items()), key=lambda kv: kv[1])
    return {"cycles": bound + exposed, "issue_cycles": issue, "pipe_cycles": pipe_cycles,
            "exposed_cycles": exposed, "bound_by": bound_by}


def thread_shares(per_thread: Optional[Sequence[Mapping[str, Any]]] = None,
                  threads: int = 1) -> list:
    """Each thread's fraction of the work: by per-thread weighted instructions when given
    (icount's per_thread), else `threads` equal parts."""
    if per_thread:
        w = [t["insns"] - t["vector_insns"] + t["lmul_weighted_vector_ops"] for t in per_thread]
        total = sum(w)
        if total > 0:
            return [x / total for x in w]
    return [1.0 / threads] * threads


def modelled_step(classes: ClassCounts, table: CostTable, frequency_ghz: float,
                  memory: Optional[Memory] = None, bytes_moved: float = 0.0,
                  shares: Sequence[float] = (1.0,)) -> Dict[str, Any]:
    """compute_ms (the slowest thread), memory_ms, modelled_ms = the larger, bound ("compute"
    or "memory") and the core figures of class_cycles, for one step run by len(shares)
    threads."""
    core = class_cycles(classes, table)
    compute_ms = core["cycles"] * max(shares) / (frequency_ghz * 1e6)
    memory_ms = 0.0
    if bytes_moved:
        if memory is None:
            raise RvvkitError("a memory term needs the board's [model.memory] table")
        memory_ms = bytes_moved / memory.bytes_per_s(len(shares)) * 1e3
    return dict(core, compute_ms=compute_ms, memory_ms=memory_ms,
                modelled_ms=max(compute_ms, memory_ms),
                bound="memory" if memory_ms > compute_ms else "compute", threads=len(shares))
