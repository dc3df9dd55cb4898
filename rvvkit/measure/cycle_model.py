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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

from ..errors import RvvkitError

DEFAULT_BOARD = "k1"


@dataclass(frozen=True)
class CycleModel:
    board: str
    vlen: int
    datapath_bits: int
    frequency_ghz: float

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
    try:
        model = CycleModel(name, int(table["vlen"]), int(table["datapath_bits"]),
                           float(table["frequency_ghz"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RvvkitError(f"{where}: needs vlen, datapath_bits and frequency_ghz ({exc})") \
            from None
    if min(model.vlen, model.datapath_bits, model.frequency_ghz) <= 0:
        raise RvvkitError(f"{where}: vlen, datapath_bits and frequency_ghz must be positive")
    return model


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
