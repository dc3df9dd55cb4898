"""`rvvkit bench`: latency on each named executor and, under QEMU, exact instruction counts;
boards measured in parallel, one table."""
from __future__ import annotations

import json
import sys
from typing import Dict, List

from ..measure.cycle_model import DEFAULT_BOARD
from ..errors import RvvkitError
from ..jit.isa import run_suffix
from ..measure.report import table
from .common import (add_isa_options, add_threads_option, count, executor_list, isa_options,
                     load_inputs, open_session, progress, UsageError, vlen_list)
from .sign import add_require_option, verified

HEADERS = ["executor", "VLEN", "compiler", "latency ms", "MMACs", "dynamic insns",
           "vector insns", "LMUL-weighted vec ops", "MACs/insn"]


def _targets(args):
    """(executor, vlen) pairs: `--on host,qemu --vlen 128,256` measures qemu at both VLENs."""
    from ..runtime import takes_vlen
    if args.vlen and not any(takes_vlen(on) for on in args.on):
        raise UsageError("--vlen applies to qemu, which --on does not name")
    for on in args.on:
        for vlen in (args.vlen or [None]) if takes_vlen(on) else [None]:
            yield on, vlen


def _bench_one(args, on: str, vlen) -> Dict:
    from ..measure.bench import bench
    from ..runtime import takes_vlen
    with open_session(args.verified or args.artifact, on, compiler=args.compiler,
                      no_cache=args.no_cache, vlen=vlen, threads=args.threads,
                      **(isa_options(args) if takes_vlen(on) else {})) as sess:
        feeds = load_inputs(args, sess)
        counting = sess.describe()["counts_instructions"] and not args.no_count
        progress(f"{on}: measuring ({args.repeat} runs"
                 + (", counting instructions" if counting else "") + ")")
        return bench(sess, feeds, repeat=args.repeat, warmup=args.warmup,
                     count=not args.no_count, cycle_model=args.cycle_model,
                     classes=args.classes)


def _bench_rows(args) -> List:
    """Rows in --on order, or an RvvkitError in place of a board that failed. Local
    executors run one after the other first (their timings must not compete for this
    machine); boards then run all at once, each on its own connection and thread."""
    from concurrent.futures import ThreadPoolExecutor

    from ..runtime import is_board
    targets = list(_targets(args))
    rows: List = [None] * len(targets)
    boards = [i for i, (on, _) in enumerate(targets) if is_board(on)]
    for i, (on, vlen) in enumerate(targets):
        if i not in boards:
            rows[i] = _bench_one(args, on, vlen)
    if boards:
        with ThreadPoolExecutor(max_workers=len(boards), thread_name_prefix="rvvkit-board") \
                as pool:
            futures = {i: pool.submit(_bench_one, args, *targets[i]) for i in boards}
            for i, fut in futures.items():
                try:
                    rows[i] = fut.result()
                except RvvkitError as exc:
                    rows[i] = exc
    return rows


def _weighted(r: Dict) -> str:
    """LMUL-weighted vector ops; a lower bound (marked >=) when some ran under a vtype the
    counting plugin could not see (set by a register-form vsetvl)."""
    text = f"{r['lmul_weighted_vector_ops']:,}"
    return f">={text}" if r.get("vector_instructions_unknown_lmul") else text


def _table_row(r: Dict) -> List:
    counted = "dynamic_instructions" in r
    where = r["executor"] + run_suffix(r.get("isa"), bool(r.get("isa_checked")))
    return [where, r.get("vlen") or "-", r["compiler"][:28],
            f"{r['latency_ms']:.3f} ({r['latency_stat']})", f"{r['macs'] / 1e6:.1f}",
            f"{r['dynamic_instructions']:,}" if counted else "-",
            f"{r['vector_instructions']:,}" if counted else "-",
            _weighted(r) if counted else "-",
            f"{r['macs_per_instruction']:.2f}" if counted else "-"]


CLASS_HEADERS = ["executor", "VLEN", "class", "instructions", "LMUL-weighted", "VL-weighted"]


def _class_rows(r: Dict) -> List[List]:
    """--classes: one line per vector class (VL-weighted only where QEMU 10 counted)."""
    where = r["executor"] + run_suffix(r.get("isa"), bool(r.get("isa_checked")))
    lw, vw = (r.get(f"instruction_classes_{k}_weighted", {}) for k in ("lmul", "vl"))
    out = []
    for cls, keys in sorted(r["instruction_classes"].items()):
        if cls.startswith("v"):
            out.append([where, r.get("vlen") or "-", cls, f"{sum(keys.values()):,}",
                        f"{sum(lw[cls].values()):,}" if cls in lw else "-",
                        f"{sum(vw.get(cls, {}).values()):,}" if vw or lw else "-"])
    totals = [r.get(k) for k in ("lmul_weighted_vector_ops", "vl_weighted_vector_ops")]
    out.append([where, r.get("vlen") or "-", "all vector", f"{r['vector_instructions']:,}",
                *(f"{t:,}" if t is not None else "-" for t in totals)])
    return out


def _print_classes(rows: List[Dict]) -> None:
    with_classes = [r for r in rows if "instruction_classes" in r]
    if not with_classes:
        return
    print("\nvector instructions by class (one inference; counted by "
          f"{', '.join(sorted({r['classes_counted_by'] for r in with_classes}))}):")
    print(table(CLASS_HEADERS, [x for r in with_classes for x in _class_rows(r)],
                align="lrlrrr"))
    if any("vl_weighted_vector_ops" not in r for r in with_classes):
        print("VL-weighted (elements processed) needs the counting QEMU 10: run "
              "scripts/qemu_plugins.sh")


def cmd_bench(args) -> int:
    args.verified = verified(args, args.artifact)  # read and checked once, for every row
    results = _bench_rows(args)
    rows = [r for r in results if isinstance(r, dict)]
    failed = [r for r in results if not isinstance(r, dict)]
    for exc in failed:
        print(f"rvvkit: error: {exc}", file=sys.stderr)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 1 if failed else 0
    if rows:
        print(table(HEADERS, [_table_row(r) for r in rows], align="lrllrrrrr"))
        _print_classes(rows)
    if any(r.get("emulated") for r in rows):
        print("\nqemu latency is emulation speed, not a board's; compare RVV code by "
              "instruction counts (exact, per inference, start-up subtracted), and code that "
              "picks different LMULs by the LMUL-weighted vector ops (each vector instruction "
              "counts its register-group size).")
    return 1 if failed else 0


def add_parser(sub) -> None:
    bn = sub.add_parser("bench", help="latency, and under qemu exact instruction counts")
    bn.add_argument("artifact")
    bn.add_argument("--on", default=["host"], type=executor_list, metavar="EXECUTORS",
                    help="comma-separated executors, e.g. host,qemu,ssh://k1-board "
                    "(default host); boards are measured in parallel")
    bn.add_argument("--vlen", type=vlen_list,
                    help="RVV vector length(s) in bits for qemu, e.g. 256 or 128,512")
    bn.add_argument("--inputs", help=".npz keyed by input names (default: seeded random)")
    bn.add_argument("--compiler", help="compiler command (overrides RVVKIT_COMPILER)")
    bn.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    bn.add_argument("--repeat", type=count(1), default=10, help="timed runs (default 10)")
    bn.add_argument("--warmup", type=count(0), default=2,
                    help="untimed runs first (default 2)")
    add_threads_option(bn)
    add_isa_options(bn)
    bn.add_argument("--no-count", action="store_true",
                    help="qemu: skip the instruction-counting runs")
    bn.add_argument("--cycle-model", default=DEFAULT_BOARD, metavar="BOARD",
                    help="qemu: board preset (toolchain/boards/) whose cycle model gives the "
                    f"--json row's modelled_cycles/modelled_ms (default {DEFAULT_BOARD}; a "
                    "model, not a measurement)")
    bn.add_argument("--classes", action="store_true",
                    help="qemu: also count instructions by class x LMUL x SEW, weight vector "
                    "ones by the registers they process and, where scripts/qemu_plugins.sh "
                    "built QEMU 10 with plugins, by the elements they process (vl); slower "
                    "runs; a table per class, all of it in --json")
    bn.add_argument("--json", action="store_true", help="print rows as JSON")
    bn.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    add_require_option(bn)
    bn.set_defaults(func=cmd_bench, parser=bn)
