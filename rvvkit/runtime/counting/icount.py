"""Exact dynamic instruction counts of riscv64 programs run under qemu-user.

The counting is done by a QEMU TCG plugin (toolchain/qemu_plugin/qemu_icount.c) that is built
with the host's C compiler on first use and cached like any JIT object (keyed by its source hash
and the compiler; how it is built: [qemu.plugin] of toolchain/targets/riscv64-linux-gnu.toml).
It counts every executed guest instruction, the RVV ones among them, and the
vsetvl family among those, and writes COUNT_KEYS as JSON at exit:

    insns                      every executed instruction
    vector_insns               the RVV ones among them
    vsetvl                     the vsetvli/vsetivli/vsetvl among those
    lmul_weighted_vector_ops   the RVV ones, each weighted by the register-group size of the
                               vtype in force (LMUL 2/4/8 count 2/4/8; LMUL 1 and mf2/mf4/mf8
                               count 1; vset* count 1; whole-register loads/stores/moves count
                               their register count, vlm/vsm 1; widening and narrowing ones the
                               vtype's LMUL, i.e. the source group). Compare RVV code that picks
                               different LMULs by this, not by vector_insns.
    vector_insns_unknown_lmul  vector instructions run while vtype came from a vsetvl (register
                               form, unreadable to the plugin) or was never set, counted at LMUL 1
                               in the weighted figure, which is then a lower bound. 0 for
                               rvvkit's generated code (it uses vsetvli only).

The same counts per guest thread (qemu-user runs each on a vCPU of its own): read_counts()
returns, besides the totals, "per_thread", a list of {"vcpu": index, <COUNT_KEYS>} in vCPU index
order (only vCPUs that ran anything), and "per_thread_overflow", None or the counts of all vCPUs
past the plugin's table (index >= 256) together. The totals are the sum of both. The exact
definitions are in the plugin's header comment.

    rv = rvvkit.jit.targets.riscv()
    qemu = [rv.qemu_binary, "-L", rv.sysroot, "-cpu", rv.cpu_string(256)]
    counts = count_instructions(qemu, ["./prog", "arg"])
    # or, inside an executor that runs qemu itself:
    argv = [*qemu, *qemu_plugin_args(json_path), "./prog"]; ...; read_counts(json_path)

Counts are for the whole process, dynamic loader and libc start-up included (~1.2e5
instructions). To isolate some work, run twice and subtract: see per_run().
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ... import children
from ...errors import CompilerNotFound, ExecutionError, RvvkitError
from ...jit import targets
from ...resources import toolchain_file

_PLUGIN = targets.riscv().get("qemu", "plugin")
PLUGIN_SOURCE = _PLUGIN["source"]  # under toolchain/
COUNT_KEYS = ("insns", "vector_insns", "vsetvl", "lmul_weighted_vector_ops",
              "vector_insns_unknown_lmul")
MODES = ("tb", "insn")
PLUGIN_CFLAGS = tuple(_PLUGIN["cflags"])
# The plugin is loaded by the host's qemu, so it is built for the host whatever
# RVVKIT_COMPILER says (that variable usually names the riscv64 compiler in this setting).
HOST_COMPILERS = tuple(_PLUGIN["compilers"])

PathLike = Union[str, os.PathLike]
_built: Dict[tuple, Path] = {}
_lock = threading.Lock()


def _host_compiler():
    from ...jit import resolve_compiler
    errors = []
    for name in HOST_COMPILERS:
        try:
            return resolve_compiler(name, target="host")
        except CompilerNotFound as exc:
            errors.append(f"  {name}: {exc}")
    raise RvvkitError("building the QEMU instruction-counting plugin needs a host C compiler; "
                      f"none of {', '.join(HOST_COMPILERS)} works:\n" + "\n".join(errors) +
                      "\nRun scripts/setup.sh (it installs build-essential and qemu-user).")


_INCLUDE = re.compile(r'^#include\s*[<"]([\w.-]+\.h)[>"][ \t]*$', re.M)


def plugin_source(source_file: str, headers: Optional[Mapping[str, Path]] = None) -> str:
    """The plugin's text with the headers it shares (rvv_classes.h, beside it under toolchain/)
    and those of `headers` (name: path, e.g. a QEMU tree's qemu-plugin.h) pasted in where it
    includes them: the JIT compiles one text, and its cache key then covers them too."""
    src = toolchain_file(source_file)
    known = {p.name: p for p in src.parent.glob("*.h")}
    known.update(headers or {})
    return _INCLUDE.sub(lambda m: known[m.group(1)].read_text(encoding="utf-8")
                        if m.group(1) in known else m.group(0), src.read_text(encoding="utf-8"))


def plugin_path(*, use_cache: Optional[bool] = None, source_file: str = PLUGIN_SOURCE,
                headers: Optional[Mapping[str, Path]] = None,
                extra_cflags: Sequence[str] = ()) -> Path:
    """The built plugin (a host shared object), compiling it on first use; `source_file` (under
    toolchain/) picks the companion plugin of rvvkit/runtime/counting/iclass.py, or QEMU 10's of
    vcount.py (with its `headers` and `extra_cflags`), instead.

    Goes through rvvkit's JIT cache (RVVKIT_CACHE_DIR, RVVKIT_NO_CACHE), so the compiler runs
    once per source version and compiler; within a process the result is also memoised, so a
    disabled cache does not mean one temp build per call."""
    from ...jit import cache_enabled, compile_source
    source = plugin_source(source_file, headers)
    comp = _host_compiler()
    use_cache = cache_enabled() if use_cache is None else use_cache
    flags = [*PLUGIN_CFLAGS, *extra_cflags]
    memo = (hashlib.sha256(source.encode()).hexdigest(), comp.identity(), use_cache,
            tuple(flags))
    with _lock:  # one build per process even when executors start in parallel threads
        hit = _built.get(memo)
        if hit is not None and hit.is_file():
            return hit
        path = compile_source(source, comp, flags,
                              name=Path(source_file).stem, kind="so", use_cache=use_cache)
        _built[memo] = path
        return path


def _qemu_opt_escape(value: str) -> str:
    # QEMU's option parser splits on ',' and reads ',,' as a literal comma.
    return value.replace(",", ",,")


def qemu_plugin_args(out_path: PathLike, *, mode: str = "tb",
                     plugin: Optional[PathLike] = None,
                     blocks: Optional[PathLike] = None) -> list:
    """The argv fragment ["-plugin", "<lib>,out=<path>"] to put among qemu's options (before
    the program). mode "tb" counts per translation block (fast), "insn" per instruction (slow;
    for cross-checking). `blocks`: also write the per-block profile there (iprofile.py).
    Uses the `key=value` spelling: QEMU 7.2 warns on `arg=...`."""
    if mode not in MODES:
        raise ValueError(f"unknown counting mode {mode!r}; expected one of {MODES}")
    lib = Path(plugin) if plugin is not None else plugin_path()
    spec = f"{_qemu_opt_escape(os.fspath(lib))},out={_qemu_opt_escape(os.fspath(out_path))}"
    if mode != "tb":
        spec += f",mode={mode}"
    if blocks is not None:
        spec += f",blocks={_qemu_opt_escape(os.fspath(blocks))}"
    return ["-plugin", spec]


def _counts_of(entry: Any) -> Dict[str, int]:
    return {k: int(entry[k]) for k in COUNT_KEYS}


def _parse_threads(data: Mapping) -> tuple:
    """(per_thread, per_thread_overflow) of a plugin line, checked: vCPU indices ascending,
    and the totals the sum of the parts, key by key (a mismatch is a plugin defect)."""
    threads = [dict(vcpu=int(t["vcpu"]), **_counts_of(t)) for t in data["per_thread"]]
    vcpus = [t["vcpu"] for t in threads]
    if vcpus != sorted(set(vcpus)) or (vcpus and vcpus[0] < 0):
        raise ValueError(f"per_thread vCPU indices {vcpus} are not ascending")
    raw = data["per_thread_overflow"]
    overflow = None if raw is None else _counts_of(raw)
    for k in COUNT_KEYS:
        parts = sum(t[k] for t in threads) + (overflow[k] if overflow else 0)
        if parts != int(data[k]):
            raise ValueError(f"{k}: per-thread counts sum to {parts}, not the total {data[k]}")
    return threads, overflow


def read_counts(path: PathLike) -> Dict[str, Any]:
    """The counts the plugin wrote: one int per COUNT_KEYS key ({"insns": N, "vector_insns": V,
    "vsetvl": S, "lmul_weighted_vector_ops": W, "vector_insns_unknown_lmul": U}), plus
    "per_thread" ([{"vcpu": i, <COUNT_KEYS>}, ...]) and "per_thread_overflow" (None or a
    COUNT_KEYS dict).

    The plugin writes only when the guest exits normally (exit/exit_group); a guest killed by a
    signal (crash, abort, timeout) leaves no file, which is reported as such."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExecutionError(f"no instruction counts in {p}: the program did not exit normally "
                             "under qemu (crashed or was killed), or qemu did not load the "
                             "plugin") from None
    try:
        data = json.loads(text)
        counts: Dict[str, Any] = _counts_of(data)
        counts["per_thread"], counts["per_thread_overflow"] = _parse_threads(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ExecutionError(f"malformed instruction counts in {p}: {text!r} ({exc})") from exc
    return counts


# what the counting QEMU 10's plugin adds (vcount.py); per_run subtracts those both runs have
EXTRA_KEYS = ("vl_weighted_vector_ops", "work_weighted_vector_ops")


def _difference(hi: Mapping, lo: Mapping, runs: int, whole: bool, what: str) -> Dict:
    out = {}
    for k in COUNT_KEYS + tuple(k for k in EXTRA_KEYS if k in hi and k in lo):
        diff = hi[k] - lo[k]
        if diff < 0:
            raise ValueError(f"{what}{k}: the larger run counted fewer ({hi[k]} < {lo[k]}); "
                             "the runs are not comparable")
        out[k] = diff // runs if whole else diff / runs
    return out


_ZERO = dict.fromkeys(COUNT_KEYS + EXTRA_KEYS, 0)


def _thread_difference(hi: Mapping, lo: Mapping, runs: int, whole: bool) -> List[Dict]:
    """per_thread of hi minus lo, matched by vCPU index (a vCPU absent from lo counted 0 there;
    one absent from hi is an error: the larger run lacks a thread the smaller one had)."""
    lo_by = {t["vcpu"]: t for t in lo["per_thread"]}
    hi_by = {t["vcpu"]: t for t in hi["per_thread"]}
    if set(lo_by) - set(hi_by):
        raise ValueError(f"vCPUs {sorted(set(lo_by) - set(hi_by))} ran in the smaller run "
                         "only; the runs are not comparable")
    return [dict(vcpu=v, **_difference(t, lo_by.get(v, _ZERO), runs, whole, f"vCPU {v}: "))
            for v, t in sorted(hi_by.items())]


def per_run(counts_hi: Mapping[str, Any], counts_lo: Mapping[str, Any], runs: int, *,
            whole: bool = False) -> Dict[str, Any]:
    """Per-run counts from two runs of the same program that differ only in doing `runs`
    more repetitions: (hi - lo) / runs for each key (with `whole`, floor division: whole
    numbers), and the same per thread, by vCPU index, when the counts have "per_thread"
    (every vCPU of the larger run gets an entry, 0s included; per_thread_overflow likewise,
    None when neither run has one).

    Make both runs do the one-time work: lazy symbol binding (the first call of expf etc.
    costs ~700 instructions in ld.so) and any first-call initialisation are paid by whichever
    run first calls the function. So compare 1 + N repetitions with 1 (or both with a
    warm-up), or run qemu with `-E LD_BIND_NOW=1`; then the difference is exact. Per thread,
    both runs must also start the same threads in the same order (a persistent pool does)."""
    if runs <= 0:
        raise ValueError("runs must be positive")
    out: Dict[str, Any] = _difference(counts_hi, counts_lo, runs, whole, "")
    with_threads = ("per_thread" in counts_hi, "per_thread" in counts_lo)
    if with_threads[0] != with_threads[1]:
        raise ValueError("one run has per-thread counts and the other none; the runs are not "
                         "comparable")
    if all(with_threads):
        out["per_thread"] = _thread_difference(counts_hi, counts_lo, runs, whole)
        hi_o, lo_o = counts_hi.get("per_thread_overflow"), counts_lo.get("per_thread_overflow")
        out["per_thread_overflow"] = None if hi_o is None and lo_o is None else _difference(
            hi_o or _ZERO, lo_o or _ZERO, runs, whole, "per_thread_overflow: ")
    return out


def count_instructions(qemu_prefix: Sequence[str], program_argv: Sequence[str], *,
                       mode: str = "tb", timeout: Optional[float] = None,
                       env: Optional[Mapping[str, str]] = None, cwd: Optional[PathLike] = None,
                       check: bool = True) -> Dict[str, Any]:
    """Run `qemu_prefix + plugin args + program_argv` and return its counts.

    qemu_prefix is the qemu executable and its options (-L, -cpu, -E ...). With check, a
    non-zero exit status raises ExecutionError carrying the program's stderr; without it, the
    counts of a program that exited with a status are still returned (its "returncode" too)."""
    with tempfile.TemporaryDirectory(prefix="rvvkit-icount-") as tmp:
        out = Path(tmp) / "counts.json"
        argv = [*qemu_prefix, *qemu_plugin_args(out, mode=mode), *program_argv]
        try:
            proc = children.run(argv, cwd=cwd, env=env, timeout=timeout)
        except FileNotFoundError as exc:
            raise ExecutionError(f"cannot run {argv[0]!r}: {exc}; install qemu-user "
                                 "(scripts/setup.sh)") from exc
        except subprocess.TimeoutExpired as exc:
            raise ExecutionError(f"timed out after {timeout:g} s: {' '.join(argv)}") from exc
        err = proc.stderr.decode("utf-8", "replace").strip()
        if not out.exists():
            # The plugin writes at a normal exit only: a guest killed by a signal (negative
            # status: -6 abort, -11 segfault), or a qemu that could not load the plugin (e.g. a
            # static qemu-user build: "plugin interface not enabled") leaves no file.
            raise ExecutionError(f"no instruction counts (exit status {proc.returncode}): "
                                 f"{' '.join(argv)}\nstderr:\n{err[-4000:]}")
        if check and proc.returncode != 0:
            raise ExecutionError(f"exit status {proc.returncode}: {' '.join(argv)}\n"
                                 f"stderr:\n{err[-4000:]}")
        counts = read_counts(out)
        counts["returncode"] = proc.returncode
        return counts


__all__ = ["COUNT_KEYS", "PLUGIN_SOURCE", "count_instructions", "per_run", "plugin_path",
           "qemu_plugin_args", "read_counts"]
