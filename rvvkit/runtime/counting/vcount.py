"""Counts under the counting QEMU 10: a qemu-riscv64 10.0 built with TCG plugins by
scripts/qemu_plugins.sh ([qemu.counting] of toolchain/targets/riscv64-linux-gnu.toml), whose
plugin API reads registers, and its plugin toolchain/qemu_plugin/qemu_vcount.c (its header
defines every figure). Beside the counts of icount.py and iclass.py it gives the elements each
vector instruction processes (vl at its execution), in total, per thread and per class:

    VL_KEYS = COUNT_KEYS + ("vl_weighted_vector_ops", "work_weighted_vector_ops")
    args = qemu_vcount_args(path)     # among the options of counting_qemu()'s binary
    data = read_vcounts(path)         # {<VL_KEYS>, "per_thread": [{"vcpu": i, <VL_KEYS>}],
                                      #  "per_thread_overflow": None, "classes": {cls: {key: n}},
                                      #  "lmul_weighted": {...}, "vl_weighted": {...}}
    one = difference(hi, lo)          # one inference: a run of one minus a run of none

Without the built QEMU, LMUL-weighted counts still come from Debian's QEMU 7.2 (icount.py,
iclass.py); asking for a VL-weighted one is then an error naming the set-up script."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from ...errors import ExecutionError, RvvkitError
from ...jit import targets
from .iclass import table_difference
from .icount import COUNT_KEYS, _qemu_opt_escape, plugin_path, qemu_plugin_args, read_counts

_FACTS = targets.riscv().get("qemu", "counting")
VERSION = _FACTS["version"]
SOURCE = _FACTS["source"]  # under toolchain/
VL_KEYS = COUNT_KEYS + ("vl_weighted_vector_ops", "work_weighted_vector_ops")
TABLES = ("classes", "lmul_weighted", "vl_weighted")
PathLike = Union[str, os.PathLike]
SETUP_HINT = ("bash scripts/qemu_plugins.sh (run by scripts/setup.sh; builds qemu-riscv64 "
              f"{VERSION} with plugins into the user's cache in about 2 minutes)")


def counting_dir() -> Path:
    """Where scripts/qemu_plugins.sh puts the counting QEMU 10 and its qemu-plugin.h."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "rvvkit" / f"qemu-{VERSION}-plugins"


def counting_qemu() -> Optional[str]:
    """The counting QEMU 10's binary, or None where scripts/qemu_plugins.sh has not built it."""
    d = counting_dir()
    exe, header = d / "qemu-riscv64", d / "qemu-plugin.h"
    return str(exe) if os.access(exe, os.X_OK) and header.is_file() else None


def require_counting_qemu(what: str = "a VL-weighted count") -> str:
    """counting_qemu(), or one RvvkitError saying how to build it."""
    exe = counting_qemu()
    if exe is None:
        raise RvvkitError(f"{what} needs the vl register, which only a QEMU 10 built with "
                          f"plugins lets a plugin read; none at {counting_dir()}: run "
                          f"{SETUP_HINT}")
    return exe


def _glib_cflags() -> List[str]:
    # qemu-plugin.h includes glib.h
    try:
        out = subprocess.run([shutil.which("pkg-config") or "pkg-config", "--cflags",
                              "glib-2.0"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise RvvkitError("building the VL-counting QEMU plugin needs glib's headers: install "
                          "pkg-config and libglib2.0-dev (scripts/setup.sh)") from None
    return out.split()


def qemu_vcount_args(out_path: PathLike) -> list:
    """["-plugin", "<lib>,out=<path>"] for qemu_vcount.c, built on first use against the
    counting QEMU's qemu-plugin.h."""
    require_counting_qemu()
    lib = plugin_path(source_file=SOURCE, extra_cflags=_glib_cflags(),
                      headers={"qemu-plugin.h": counting_dir() / "qemu-plugin.h"})
    return ["-plugin", f"{_qemu_opt_escape(os.fspath(lib))},"
                       f"out={_qemu_opt_escape(os.fspath(out_path))}"]


def _table_sum(table: Mapping[str, Mapping[str, int]]) -> int:
    return sum(n for keys in table.values() for n in keys.values())


def read_vcounts(path: PathLike) -> Dict[str, Any]:
    """The plugin's line, checked: per-thread counts add up to the totals, the classes to
    insns, the per-class LMUL-weighted and VL-weighted tables to their totals."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExecutionError(f"no instruction counts in {p}: the program did not exit normally "
                             "under qemu, or qemu did not load the plugin") from None
    try:
        data = json.loads(text)
        out: Dict[str, Any] = {k: int(data[k]) for k in VL_KEYS}
        out["per_thread"] = [dict(vcpu=int(t["vcpu"]), **{k: int(t[k]) for k in VL_KEYS})
                             for t in data["per_thread"]]
        out["per_thread_overflow"] = None
        for k in VL_KEYS:
            if sum(t[k] for t in out["per_thread"]) != out[k]:
                raise ValueError(f"per-thread {k} does not add up to the total")
        for name in TABLES:
            out[name] = {c: {k: int(n) for k, n in keys.items()}
                         for c, keys in data[name].items()}
        for name, key in (("classes", "insns"), ("lmul_weighted", None),
                          ("vl_weighted", "vl_weighted_vector_ops")):
            if key and _table_sum(out[name]) != out[key]:
                raise ValueError(f"{name} add up to {_table_sum(out[name])}, not {key}")
    except (ValueError, KeyError, TypeError) as exc:
        raise ExecutionError(f"malformed VL counts in {p}: {text[:2000]!r} ({exc})") from exc
    return out


def counter(vl: bool) -> tuple:
    """How to count a run: (plugin arguments of an output path, that path's reader, the keys
    of its totals, the QEMU binary it needs or None for the session's QEMU 7.2): with `vl`
    this module's plugin under the counting QEMU 10 (VL_KEYS), else icount.py's (COUNT_KEYS)."""
    if vl:
        return qemu_vcount_args, read_vcounts, VL_KEYS, require_counting_qemu()
    return qemu_plugin_args, read_counts, COUNT_KEYS, None


def difference(hi: Mapping[str, Any], lo: Mapping[str, Any]) -> Dict[str, Any]:
    """hi - lo: totals, per thread (icount.per_run's rules) and each class table."""
    from .icount import per_run
    out = per_run(hi, lo, 1, whole=True)
    for name in TABLES:
        out[name] = table_difference(hi[name], lo[name], name)
    return out


__all__ = ["SETUP_HINT", "TABLES", "VERSION", "VL_KEYS", "counter", "counting_dir",
           "counting_qemu", "difference", "qemu_vcount_args", "read_vcounts", "require_counting_qemu"]
