"""Benchmarks of an artifact on one executor: one row of `rvvkit bench` from the session's own
contract, latency everywhere (`Session.measure`: on a board or under QEMU by the runner's own
clock) and under QEMU the exact dynamic instruction counts of one inference (start-up and
loading subtracted): dynamic_instructions, vector_instructions, vsetvl_instructions,
lmul_weighted_vector_ops (each vector instruction weighted by the register-group size of the
vtype in force: LMUL 2/4/8 count 2/4/8, LMUL 1 and fractional LMULs 1; definition in
toolchain/qemu_plugin/qemu_icount.c) and vector_instructions_unknown_lmul (vector instructions
under a vtype the plugin could not read, counted at LMUL 1: the weighted figure is a lower
bound when it is not 0; rvvkit's own code makes it 0)."""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

from .runtime.session import Session


def bench(sess: Session, feeds: Optional[Mapping[str, np.ndarray]] = None, *,
          repeat: int = 10, warmup: int = 2, count: bool = True) -> Dict:
    """One row of `rvvkit bench`: latency, MACs, and (qemu) instruction counts."""
    feeds = feeds if feeds is not None else sess.random_feeds()
    meta = sess.artifact.meta
    desc = sess.describe()
    row: Dict = {"model": meta.get("model"), "executor": desc["path"],
                 "macs": int(meta.get("macs", 0)), "compiler": desc["compiler"]}
    if desc.get("vlen") is not None:
        row["vlen"] = desc["vlen"]
    if "wrapper" in desc:
        row["wrapper"] = desc["wrapper"]
    row["emulated"] = desc["emulated"]
    row.update(sess.measure(feeds, repeat, warmup, count=count))
    if row.get("dynamic_instructions") is not None:
        insns = row["dynamic_instructions"]
        row["macs_per_instruction"] = row["macs"] / insns if insns else None
    return row
