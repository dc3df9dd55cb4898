"""`rvvkit compare`: argument parsing and printing only; the work is rvvkit.compare.compare."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List

import numpy as np

from .cli import EXECUTORS, _parse_shapes, _progress
from .errors import InputError, RvvkitError


def cmd_compare(args) -> int:
    from .compare import compare
    from .report import compare_table
    if args.vlen and "qemu" not in args.on:
        print("rvvkit compare: error: --vlen applies to qemu, which --on does not name",
              file=sys.stderr)
        return 2
    inputs = None
    if args.inputs:
        try:
            with np.load(args.inputs) as data:
                inputs = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read inputs {args.inputs}: {exc}") from None
    options: Dict[str, Dict] = {}
    for spec in args.compiler or []:
        key, sep, cmd = spec.partition("=")
        if not sep or key not in EXECUTORS + ["ssh"]:
            key, cmd = "host", spec  # a plain command (it may hold '=' itself) is the host's
        options.setdefault(key, {})["nvcc" if key == "cuda" else "compiler"] = cmd
    if args.no_cache:
        for key in EXECUTORS + ["ssh"]:
            options.setdefault(key, {})["use_cache"] = False
    result = compare(args.model, args.on, vlens=args.vlen, inputs=inputs, seed=args.seed,
                     repeat=args.repeat, warmup=args.warmup, reference=args.reference,
                     model=args.reference_model, rtol=args.rtol, atol=args.atol,
                     count=not args.no_count, input_shapes=_parse_shapes(args.input_shape),
                     options=options, progress=_progress)
    doc = result.to_json()
    if args.plot:
        from .compare_plot import plot_comparison
        plot_comparison(doc, args.plot)
        _progress(f"wrote {args.plot}")
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(compare_table(doc))
    skipped = [r["path"] for r in result.rows if r["status"] == "skipped"]
    bad = [f"{r['path']} {r['status']}" for r in result.rows
           if r["status"] not in ("ok", "skipped")]
    if skipped:
        _progress(f"skipped (cannot run here, not a failure): {', '.join(skipped)}")
    if bad:
        _progress(f"FAILED: {', '.join(bad)}")
    return 0 if result.passed else 1


def _compare_paths(value: str) -> List[str]:
    """argparse type of compare's --on: an unknown name is a usage error (exit 2)."""
    from .compare import split_paths
    try:
        return split_paths(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(minimum: int):
    """argparse type: an integer >= minimum (else a usage error, exit 2)."""
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = minimum - 1
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value!r}")
        return n
    return parse


def _vlen_list(value: str) -> List[int]:
    from .runtime.qemu import resolve_vlen
    try:
        return [resolve_vlen(v.strip()) for v in value.split(",") if v.strip()]
    except RvvkitError as exc:
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


def add_compare_parser(sub) -> None:
    c = sub.add_parser("compare", help="run one model on several paths (host, qemu, cuda, "
                       "boards) against a reference: errors, argmax, latency, instructions",
                       description="Build MODEL (or take an artifact), run the same inputs on "
                       "every path named by --on and on a reference, and print one table.",
                       epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("model", help="ONNX model (built in memory) or an artifact (.rvv)")
    c.add_argument("--on", default=["host"], type=_compare_paths, metavar="PATHS",
                   help="comma-separated paths: host, qemu, cuda, cuda-emu, "
                   "ssh://[user@]host[:port] (default host)")
    c.add_argument("--vlen", type=_vlen_list, metavar="BITS[,BITS]",
                   help="VLEN(s) for qemu, e.g. 256 or 128,512 (default: RVVKIT_VLEN, else 256)")
    c.add_argument("--model", dest="reference_model", metavar="MODEL.onnx",
                   help="with an artifact: the ONNX model it was built from, for the reference")
    c.add_argument("--reference", default="auto", choices=["auto", "onnxruntime", "onnx", "host"],
                   help="auto (default): onnxruntime if installed, else the ONNX reference "
                   "evaluator; host: rvvkit's host path")
    c.add_argument("--inputs", help=".npz keyed by input names (default: seeded random normal)")
    c.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    c.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                   help="static shape for a model input with symbolic dimensions (repeatable)")
    c.add_argument("--repeat", type=_count(1), default=10, help="timed runs per path (default 10)")
    c.add_argument("--warmup", type=_count(0), default=2, help="untimed runs first (default 2)")
    c.add_argument("--rtol", type=float, default=1e-3,
                   help="relative tolerance, times max|ref| (default 1e-3)")
    c.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default 1e-4)")
    c.add_argument("--compiler", action="append", metavar="[PATH=]CMD",
                   help="compiler for a path, e.g. qemu=clang-16 or cuda=/opt/cuda/bin/nvcc; "
                   "a plain CMD is the host's (repeatable)")
    c.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    c.add_argument("--no-count", action="store_true",
                   help="qemu: skip the instruction-counting runs")
    c.add_argument("--json", action="store_true", help="print a JSON document instead")
    c.add_argument("--plot", metavar="FILE.png",
                   help="also write a bar chart: latency and error per path (needs matplotlib)")
    c.set_defaults(func=cmd_compare)
