"""Benchmarks of an artifact on one executor: one row of `rvvkit bench` from the session's own
contract, latency everywhere (`Session.measure`: on a board or under QEMU by the runner's own
clock) and under QEMU the exact dynamic instruction counts of one inference (start-up and
loading subtracted): dynamic_instructions, vector_instructions, vsetvl_instructions,
lmul_weighted_vector_ops (each vector instruction weighted by the register-group size of the
vtype in force: LMUL 2/4/8 count 2/4/8, LMUL 1 and fractional LMULs 1; definition in
toolchain/qemu_plugin/qemu_icount.c) and vector_instructions_unknown_lmul (vector instructions
under a vtype the plugin could not read, counted at LMUL 1: the weighted figure is a lower
bound when it is not 0; rvvkit's own code makes it 0).

Per thread, under QEMU (each guest thread is a vCPU there): per_thread_instructions (the
inference's instructions on each vCPU, in vCPU index order), critical_path_instructions (the
largest per-thread insns - vector_insns + lmul_weighted_vector_ops), and a board's cycle
model (rvvkit/measure/cycle_model.py, figures from toolchain/boards/<board>.toml [model]):
modelled_cycles and modelled_ms, a model, not a measurement; cycle_model names it."""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

from .cycle_model import DEFAULT_BOARD, bench_fields, board_model, classes_fields
from ..runtime.session import Session


def _count_fields(c: Mapping) -> Dict:
    """A row's names for QemuSession.instruction_counts' totals."""
    return {"dynamic_instructions": c["insns"], "vector_instructions": c["vector_insns"],
            "vsetvl_instructions": c["vsetvl"],
            "lmul_weighted_vector_ops": c["lmul_weighted_vector_ops"],
            "vector_instructions_unknown_lmul": c["vector_insns_unknown_lmul"]}


def bench(sess: Session, feeds: Optional[Mapping[str, np.ndarray]] = None, *,
          repeat: int = 10, warmup: int = 2, count: bool = True,
          cycle_model: str = DEFAULT_BOARD, classes: bool = False) -> Dict:
    """One row of `rvvkit bench`: latency, MACs, and (qemu) instruction counts, per thread
    too, with the modelled time on board `cycle_model` (a toolchain/boards/ preset); with
    `classes`, also the counts by class x LMUL x SEW and the work-weighted vector ops
    (rvvkit.runtime.counting.iclass; slower runs), and where scripts/qemu_plugins.sh built the counting
    QEMU 10 the VL-weighted ones, in total and per class (rvvkit.runtime.counting.vcount)."""
    feeds = feeds if feeds is not None else sess.random_feeds()
    meta = sess.artifact.meta
    desc = sess.describe()
    counting = count and desc["counts_instructions"]
    model = board_model(cycle_model) if counting else None  # a bad name fails before the runs
    row: Dict = {"model": meta.get("model"), "executor": desc["path"],
                 "macs": int(meta.get("macs", 0)), "compiler": desc["compiler"]}
    if desc.get("vlen") is not None:
        row["vlen"] = desc["vlen"]
    if desc.get("isa") is not None:   # the ISA profile the build and the QEMU CPU had
        row["isa"] = desc["isa"]
        row["isa_checked"] = desc["isa_checked"]
    if "wrapper" in desc:
        row["wrapper"] = desc["wrapper"]
    row["emulated"] = desc["emulated"]
    # Counted here, not by measure(count=True), whose row lacks the per-thread counts: one
    # pair of counting runs serves both.
    row.update(sess.measure(feeds, repeat, warmup, count=False))
    if counting:
        counts = sess.instruction_counts(feeds)
        row.update(_count_fields(counts))
        row.update(bench_fields(counts, model, desc.get("vlen")))
        insns = row["dynamic_instructions"]
        row["macs_per_instruction"] = row["macs"] / insns if insns else None
        if classes:
            by_class = sess.instruction_classes(feeds)
            row["work_weighted_vector_ops"] = by_class["work_weighted_vector_ops"]
            row["instruction_classes"] = by_class["classes"]
            row["classes_counted_by"] = by_class["counted_by"]
            if "vl_weighted_vector_ops" in by_class:   # the counting QEMU 10 (vcount.py)
                row["vl_weighted_vector_ops"] = by_class["vl_weighted_vector_ops"]
                row["instruction_classes_lmul_weighted"] = by_class["lmul_weighted"]
                row["instruction_classes_vl_weighted"] = by_class["vl_weighted"]
            # the board's class model (docs/cost-model.md: per-class pipe occupancy), on the
            # threads' shares of the work; compute only (the bytes an inference moves are the
            # caller's to give)
            if model.cost is not None:
                row.update(classes_fields(by_class["classes"], model, desc.get("vlen"),
                                          per_thread=counts.get("per_thread")))
    return row
