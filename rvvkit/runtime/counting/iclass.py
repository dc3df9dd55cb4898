"""Dynamic instruction counts by class, register-group size and element width, under QEMU
7.2: the companion plugin toolchain/qemu_plugin/qemu_iclass.c (its header defines the classes
and the weights), built and cached as the counting plugin is (icount.plugin_path).

    args = qemu_class_args(path)              # among qemu's options, before the program
    ...; classes = read_classes(path)         # {"insns", "work_weighted_vector_ops",
                                              #  "classes": {"vfma": {"m4.e32": n, ...}, ...}}
    per_run = class_difference(hi, lo)        # one inference: a run of one minus a run of none

`work_weighted_vector_ops` weighs each vector instruction by the registers it processes
(widening and narrowing ones their double-width side, loads and stores their EMUL, scalar
moves and mask logic 1), where the counting plugin's LMUL-weighted figure counts the register
group of the vtype in force whatever the instruction does with it. A VL-weighted figure
(elements processed) needs the vl register, which QEMU 7.2's plugins cannot read: vcount.py
counts it under a QEMU 10 built with plugins (scripts/qemu_plugins.sh)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Union

from ...jit import targets
from .icount import _qemu_opt_escape, plugin_path

CLASSES_SOURCE = targets.riscv().get("qemu", "plugin", "classes_source")
PathLike = Union[str, os.PathLike]


def qemu_class_args(out_path: PathLike) -> list:
    """["-plugin", "<lib>,out=<path>"] for the class-counting plugin (built on first use)."""
    lib = plugin_path(source_file=CLASSES_SOURCE)
    return ["-plugin", f"{_qemu_opt_escape(os.fspath(lib))},"
                       f"out={_qemu_opt_escape(os.fspath(out_path))}"]


def read_classes(path: PathLike) -> Dict[str, Any]:
    """The plugin's line, checked: the class counts add up to insns."""
    data = json.loads(Path(path).read_text())
    total = sum(n for keys in data["classes"].values() for n in keys.values())
    if total != data["insns"]:
        raise ValueError(f"class counts add up to {total}, not insns {data['insns']}")
    return data


def table_difference(hi: Mapping, lo: Mapping, name: str) -> Dict[str, Dict[str, int]]:
    """hi - lo of one {class: {"m4.e32": n}} table, zero cells dropped; a cell the larger run
    counts fewer of is an error (`name` says which table)."""
    out: Dict[str, Dict[str, int]] = {}
    for cls in sorted(set(hi) | set(lo)):
        a, b = hi.get(cls, {}), lo.get(cls, {})
        diff = {k: a.get(k, 0) - b.get(k, 0) for k in sorted(set(a) | set(b))}
        if any(v < 0 for v in diff.values()):
            raise ValueError(f"{name} {cls} counts fewer in the larger run: {diff}")
        diff = {k: v for k, v in diff.items() if v}
        if diff:
            out[cls] = diff
    return out


def class_difference(hi: Mapping[str, Any], lo: Mapping[str, Any]) -> Dict[str, Any]:
    """hi - lo, key by key: the counts of the work one run does and the other does not."""
    out = {k: hi[k] - lo[k] for k in ("insns", "work_weighted_vector_ops")}
    return dict(out, classes=table_difference(hi["classes"], lo["classes"], "class"))
