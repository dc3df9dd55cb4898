"""A cycle model of a board, applied to per-thread QEMU instruction counts: a MODEL, not a
measurement (QEMU counts instructions, not time).

The board's figures are the [model] table of its preset (toolchain/boards/<name>.toml): vlen,
datapath_bits, frequency_ghz. Per thread, with the counts of icount.COUNT_KEYS:

    scalar instructions     insns - vector_insns, 1 cycle each
    vector instructions     each LMUL x VLEN / datapath_bits cycles, i.e. in all
                            lmul_weighted_vector_ops x vlen / datapath_bits cycles
    weighted instructions   insns - vector_insns + lmul_weighted_vector_ops (the cycles when the
                            datapath is VLEN wide)

critical_path_instructions is the largest per-thread weighted instruction count;
modelled_cycles the largest per-thread cycle count (the threads run side by side, so the
slowest one sets the time; the two maxima can fall on different threads when the datapath is
narrower than VLEN); modelled_ms = modelled_cycles at frequency_ghz. Memory, caches, issue
width, latencies and the time threads spend waiting for each other are not modelled.

That per-thread figure is the coarse one, for runs counted without classes. A board whose
[model] names a `cost` table (toolchain/cost/<cost>.toml, derived from LLVM's scheduling
model of its core) and a [model.memory] table also has the finer model of class_model.py:
`classes_fields` turns QemuSession.instruction_classes' counts (and the bytes a step moves)
into modelled cycles per pipe and a compute / memory bound time. datapath_bits defaults to
the cost table's DLEN.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

from ..errors import RvvkitError
from .class_model import Memory, modelled_step, thread_shares
from .cost_table import CostTable, cost_table

DEFAULT_BOARD = "k1"


@dataclass(frozen=True)
class CycleModel:
    board: str
    vlen: int
    datapath_bits: int
    frequency_ghz: float
    cost: Optional[str] = None            # toolchain/cost/<cost>.toml
    memory: Optional[Memory] = None

    @property
    def table(self) -> CostTable:
        if self.cost is None:
            raise RvvkitError(f"board {self.board!r} has no cost table ([model] cost = ...): "
                              "it has only the coarse per-thread cycle model")
        return cost_table(self.cost)

    @property
    def vector_cycles_per_lmul(self) -> float:
        """Cycles of one LMUL-1 vector instruction: the register's bits over the datapath's."""
        return self.vlen / self.datapath_bits


def board_model(name: str = DEFAULT_BOARD) -> CycleModel:
    """The [model] table of toolchain/boards/<name>.toml, checked."""
    from ..jit.targets import board_preset, board_presets
    if name not in board_presets():
        raise RvvkitError(f"no board preset {name!r} for the cycle model; known: "
                          f"{', '.join(board_presets())}")
    table = board_preset(name).get("model")
    where = f"toolchain/boards/{name}.toml [model]"
    if not isinstance(table, dict):
        raise RvvkitError(f"{where} is missing: board {name!r} has no cycle model")
    cost = table.get("cost")
    try:
        datapath = table["datapath_bits"] if "datapath_bits" in table or cost is None \
            else cost_table(str(cost)).dlen
        model = CycleModel(name, int(table["vlen"]), int(datapath),
                           float(table["frequency_ghz"]), None if cost is None else str(cost),
                           _memory(table.get("memory"), board_preset(name), where))
    except (KeyError, TypeError, ValueError) as exc:
        raise RvvkitError(f"{where}: needs vlen, datapath_bits (or cost) and frequency_ghz "
                          f"({exc})") from None
    if min(model.vlen, model.datapath_bits, model.frequency_ghz) <= 0:
        raise RvvkitError(f"{where}: vlen, datapath_bits and frequency_ghz must be positive")
    if model.cost is not None and model.table.vlen != model.vlen:
        raise RvvkitError(f"{where}: vlen {model.vlen} differs from its cost table's "
                          f"({model.table.vlen})")
    return model


def _memory(table: Any, preset: Mapping[str, Any], where: str) -> Optional[Memory]:
    if table is None:
        return None
    try:
        mem = Memory(float(table["peak_gb_s"]), float(table["efficiency_one_core"]),
                     float(table["efficiency_all_cores"]), int(preset["cores"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RvvkitError(f"{where}.memory: needs peak_gb_s, efficiency_one_core and "
                          f"efficiency_all_cores, and the preset cores ({exc})") from None
    if not (mem.peak_gb_s > 0 and 0 < mem.efficiency_one_core <= mem.efficiency_all_cores <= 1):
        raise RvvkitError(f"{where}.memory: peak_gb_s > 0 and 0 < efficiency_one_core <= "
                          "efficiency_all_cores <= 1")
    return mem


def weighted_instructions(c: Mapping[str, Any]) -> int:
    """Scalar instructions plus LMUL-weighted vector operations of one thread (or a total)."""
    return c["insns"] - c["vector_insns"] + c["lmul_weighted_vector_ops"]


def thread_cycles(c: Mapping[str, Any], model: CycleModel) -> float:
    scalar = c["insns"] - c["vector_insns"]
    return scalar + c["lmul_weighted_vector_ops"] * model.vector_cycles_per_lmul


def modelled(per_thread: Sequence[Mapping[str, Any]], model: CycleModel) -> Dict[str, Any]:
    """critical_path_instructions, modelled_cycles and modelled_ms of one inference's
    per-thread counts (an empty list models as 0)."""
    cycles = max([thread_cycles(t, model) for t in per_thread] or [0])
    return {"critical_path_instructions": critical_path(per_thread),
            "modelled_cycles": round(cycles),  # a model: fractions of a cycle mean nothing
            "modelled_ms": cycles / (model.frequency_ghz * 1e6)}


def critical_path(per_thread: Sequence[Mapping[str, Any]]) -> int:
    """The largest per-thread weighted instruction count (0 for no threads)."""
    return max([weighted_instructions(t) for t in per_thread] or [0])


def bench_fields(counts: Mapping[str, Any], model: CycleModel,
                 run_vlen: Optional[int]) -> Dict[str, Any]:
    """The per-thread and modelled fields of a `rvvkit bench` row from one inference's counts
    (QemuSession.instruction_counts). Figures that would not be honest are None: the
    modelled ones for a run at a VLEN other than the board's (other code ran), and the
    critical path too when threads ran past the plugin's per-vCPU table (their counts are
    merged)."""
    threads = counts.get("per_thread") or []
    row: Dict[str, Any] = {"per_thread_instructions": [int(t["insns"]) for t in threads],
                           "cycle_model": f"{model.board} (VLEN {model.vlen}, "
                                          f"{model.datapath_bits}-bit datapath, "
                                          f"{model.frequency_ghz:g} GHz)"}
    overflow = counts.get("per_thread_overflow")
    if overflow and overflow["insns"]:
        row["per_thread_overflow_instructions"] = int(overflow["insns"])
    if "per_thread_overflow_instructions" in row:
        row.update(critical_path_instructions=None, modelled_cycles=None, modelled_ms=None)
    elif run_vlen != model.vlen:
        row.update(critical_path_instructions=critical_path(threads), modelled_cycles=None,
                   modelled_ms=None)
    else:
        row.update(modelled(threads, model))
    return row


def classes_fields(classes: Mapping[str, Mapping[str, int]], model: CycleModel,
                   run_vlen: Optional[int], per_thread=None, threads: int = 1,
                   bytes_moved: float = 0.0) -> Dict[str, Any]:
    """The class model's fields for one step's counts (QemuSession.instruction_classes'
    "classes"): class_model_cycles (one core, all the work), class_model_ms and its
    compute_ms / memory_ms / bound, split over the threads by their per-thread counts (or
    `threads` equal parts). None for a run at another VLEN than the board's (other code)."""
    fields: Dict[str, Any] = {"class_model": f"{model.board} ({model.table.name}, "
                                             f"{model.frequency_ghz:g} GHz)"}
    if run_vlen != model.vlen:
        return dict(fields, class_model_cycles=None, class_model_ms=None)
    step = modelled_step(classes, model.table, model.frequency_ghz, model.memory,
                         bytes_moved, thread_shares(per_thread, threads))
    return dict(fields, class_model_cycles=round(step["cycles"]),
                class_model_ms=step["modelled_ms"], compute_ms=step["compute_ms"],
                memory_ms=step["memory_ms"], bound=step["bound"], bound_by=step["bound_by"])
