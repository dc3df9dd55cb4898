"""`rvvkit compare`: argument parsing and printing only; the work is
rvvkit.measure.compare.compare."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List

from ..errors import InputError
from .common import (add_isa_options, add_threads_option, count, input_shape, isa_options, load_npz,
                     progress, shapes, UsageError, vlen_list)
from .sign import add_require_option, verified


def _options(args) -> Dict[str, Dict]:
    """open_session arguments per path kind from --compiler [PATH=]CMD and --no-cache."""
    from ..runtime import NAMES, session_options
    kinds = list(NAMES) + ["ssh"]
    options: Dict[str, Dict] = {}
    for spec in args.compiler or []:
        key, sep, cmd = spec.partition("=")
        if not sep or key not in kinds:
            key, cmd = "host", spec  # a plain command (it may hold '=' itself) is the host's
        options.setdefault(key, {}).update(session_options(key, compiler=cmd))
    isa = isa_options(args)
    board_vlen = isa.pop("board_vlen", None)
    if isa:
        options.setdefault("qemu", {}).update(session_options("qemu", **isa))
    if board_vlen is not None and not args.vlen:
        args.vlen = [board_vlen]
    for key in kinds:
        if args.no_cache:
            options.setdefault(key, {})["use_cache"] = False
        if args.threads is not None:
            options.setdefault(key, {})["threads"] = args.threads
    return options


def _report(args, result) -> None:
    from ..measure.report import compare_table
    doc = result.to_json()
    if args.plot:
        from ..measure.plot import plot_comparison
        plot_comparison(doc, args.plot)
        progress(f"wrote {args.plot}")
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(compare_table(doc))
    skipped = [r["path"] for r in result.rows if r["status"] == "skipped"]
    bad = [f"{r['path']} {r['status']}" for r in result.rows
           if r["status"] not in ("ok", "skipped")]
    if skipped:
        progress(f"skipped (cannot run here, not a failure): {', '.join(skipped)}")
    if bad:
        progress(f"FAILED: {', '.join(bad)}")


def cmd_compare(args) -> int:
    from ..measure.compare import compare
    from ..runtime import takes_vlen
    if args.vlen and not any(takes_vlen(on) for on in args.on):
        raise UsageError("--vlen applies to qemu, which --on does not name")
    art = verified(args, args.model, models_too=True)  # None: no signature required
    inputs = load_npz(args.inputs) if args.inputs else None
    result = compare(art or args.model, args.on, vlens=args.vlen, inputs=inputs, seed=args.seed,
                     repeat=args.repeat, warmup=args.warmup, reference=args.reference,
                     model=args.reference_model, rtol=args.rtol, atol=args.atol,
                     count=not args.no_count, input_shapes=shapes(args.input_shape),
                     options=_options(args), progress=progress)
    _report(args, result)
    return 0 if result.passed else 1


def _compare_paths(value: str) -> List[str]:
    """argparse type of compare's --on: an unknown name is a usage error (exit 2)."""
    from ..measure.compare import split_paths
    try:
        return split_paths(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


COMPARE_EPILOG = """\
Rows, one per path (qemu: one per VLEN), after a row for the reference:
  max abs err   max |out - ref| over every element of every output
  max rel err   max |out - ref| / max(|ref|, 1e-6 * max|ref|) (the floor keeps elements near
                zero from turning float32 rounding into huge ratios)
  argmax        rows whose argmax over the class axis agrees, for class-score outputs of
                shape (N, C), (N, C, 1, 1) or (C,); "-" when no output has that shape
  latency ms    median of --repeat runs after --warmup; qemu: the runner's mean, which is
                emulation speed (compare RVV code by dynamic instructions: one inference,
                start-up subtracted); cuda: one synchronised inference with the inputs
                already on the device
  vs reference  path latency / reference latency (below 1: faster than the reference)
A path matches when, for every output, max abs err <= atol + rtol * max|ref|.
The reference is the original model on onnxruntime (CPU, one thread) when it is installed,
else on the ONNX reference evaluator; given an artifact without --model, the host path.

Exit status: 0 when every path that ran matched; 1 when a path mismatched or failed (its code
did not compile or it crashed), or the model did not build; 2 for bad usage. Paths that cannot
run on this machine (no GPU, no nvcc, no QEMU or riscv64 compiler, board unreachable) are
listed as skipped with the reason and do not fail the command.

examples:
  rvvkit compare model.onnx --on host,qemu,cuda --vlen 128,256 --plot compare.png
  rvvkit compare model.rvv --model model.onnx --on host,ssh://k1-board --json
  rvvkit compare model.onnx --on host,qemu --compiler qemu=clang-16 --inputs in.npz
"""


def add_parser(sub) -> None:
    c = sub.add_parser("compare", help="run one model on several paths (host, qemu, cuda, "
                       "boards) against a reference: errors, argmax, latency, instructions",
                       description="Build MODEL (or take an artifact), run the same inputs on "
                       "every path named by --on and on a reference, and print one table.",
                       epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("model", help="ONNX model (built in memory) or an artifact (.rvv)")
    c.add_argument("--on", default=["host"], type=_compare_paths, metavar="PATHS",
                   help="comma-separated paths: host, qemu, cuda, cuda-emu, "
                   "ssh://[user@]host[:port] (default host)")
    c.add_argument("--vlen", type=vlen_list, metavar="BITS[,BITS]",
                   help="VLEN(s) for qemu, e.g. 256 or 128,512 (default: RVVKIT_VLEN, else 256)")
    c.add_argument("--model", dest="reference_model", metavar="MODEL.onnx",
                   help="with an artifact: the ONNX model it was built from, for the reference")
    c.add_argument("--reference", default="auto", choices=["auto", "onnxruntime", "onnx", "host"],
                   help="auto (default): onnxruntime if installed, else the ONNX reference "
                   "evaluator; host: rvvkit's host path")
    c.add_argument("--inputs", help=".npz keyed by input names (default: seeded random normal)")
    c.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    c.add_argument("--input-shape", action="append", type=input_shape, metavar="NAME=D0,D1,...",
                   help="static shape for a model input with symbolic dimensions (repeatable)")
    add_threads_option(c)
    c.add_argument("--repeat", type=count(1), default=10, help="timed runs per path (default 10)")
    c.add_argument("--warmup", type=count(0), default=2, help="untimed runs first (default 2)")
    c.add_argument("--rtol", type=float, default=1e-3,
                   help="relative tolerance, times max|ref| (default 1e-3)")
    c.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default 1e-4)")
    c.add_argument("--compiler", action="append", metavar="[PATH=]CMD",
                   help="compiler for a path, e.g. qemu=clang-16 or cuda=/opt/cuda/bin/nvcc; "
                   "a plain CMD is the host's (repeatable)")
    c.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    c.add_argument("--no-count", action="store_true",
                   help="qemu: skip the instruction-counting runs")
    add_require_option(c)
    add_isa_options(c)
    c.add_argument("--json", action="store_true", help="print a JSON document instead")
    c.add_argument("--plot", metavar="FILE.png",
                   help="also write a bar chart: latency and error per path (needs matplotlib)")
    c.set_defaults(func=cmd_compare, parser=c)
