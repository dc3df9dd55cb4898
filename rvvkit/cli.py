"""The `rvvkit` command. Thin: every action is a call into the Python API."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional

import numpy as np

from . import __version__
from .errors import InputError, RvvkitError
from .report import human_bytes, table

# and ssh://[user@]host[:port][?options]: a board. cuda-emu runs the CUDA translation unit on
# the CPU through the emulator header: the CUDA path's numerics without a GPU.
EXECUTORS = ["host", "qemu", "cuda", "cuda-emu"]


def _progress(msg: str) -> None:
    print(f"rvvkit: {msg}", file=sys.stderr, flush=True)


def _parse_shapes(items: Optional[List[str]]) -> Dict[str, List[int]]:
    shapes = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(d) for d in dims.replace("x", ",").split(",") if d]
        except ValueError:
            raise InputError(f"--input-shape {item!r}: expected NAME=D0,D1,... "
                             "(e.g. data=1,3,224,224)") from None
    return shapes


def cmd_build(args) -> int:
    from .builder import build_model
    out = args.output or os.path.splitext(os.path.basename(args.model))[0] + ".rvv"
    say = (lambda _m: None) if args.quiet else _progress
    art = build_model(args.model, input_shapes=_parse_shapes(args.input_shape),
                      opt_level=args.opt_level, progress=say)
    art.save(out)
    mem = art.meta["memory"]
    say(f"wrote {out} ({human_bytes(os.path.getsize(out))}: weights "
        f"{human_bytes(mem['weights_bytes'])}, arena {human_bytes(mem['arena_bytes'])})")
    return 0


def cmd_inspect(args) -> int:
    from .artifact import Artifact
    art = Artifact.load(args.artifact)
    if args.source:
        sys.stdout.write(art.c_source)
        return 0
    if args.cuda_source:
        if art.cu_source is None:
            why = (art.meta.get("cuda") or {}).get("reason", "built without it")
            raise RvvkitError(f"{args.artifact} has no CUDA source: {why}")
        sys.stdout.write(art.cu_source)
        return 0
    meta = art.meta
    if args.json:
        doc = dict(meta, sections=art.sections())
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(f"{args.artifact}: model {meta['model']!r}, format {meta['format_version']}, "
          f"{meta['producer']}")
    print("\nsections:")
    print(table(["name", "offset", "size", "sha256"],
                [[s["name"], s["offset"], s["size"], s["sha256"][:16]] for s in art.sections()]))
    print("\ninputs:")
    print(table(["name", "shape", "dtype"],
                [[i["name"], "x".join(map(str, i["shape"])), i["dtype"]] for i in meta["inputs"]]))
    print("\noutputs:")
    print(table(["name", "shape", "dtype"],
                [[o["name"], "x".join(map(str, o["shape"])), o["dtype"]]
                 for o in meta["outputs"]]))
    uses: Dict[str, int] = {}
    for s in meta["plan"]:
        uses[s["kernel"]] = uses.get(s["kernel"], 0) + 1
    print(f"\nkernels: {len(meta['kernels'])} distinct, {len(meta['plan'])} steps")
    print(table(["kernel", "calls", "MACs/call", "workspace"],
                [[k["name"], uses.get(k["name"], 0), k["macs"], human_bytes(4 * k["workspace_floats"])]
                 for k in meta["kernels"]]))
    mem = meta["memory"]
    print(f"\nmemory: arena {human_bytes(mem['arena_bytes'])} ({mem['arena_bytes']} bytes), "
          f"lower bound {human_bytes(mem['lower_bound_bytes'])} ({mem['lower_bound_bytes']} bytes), "
          f"weights {human_bytes(mem['weights_bytes'])}")
    print(f"compute: {meta['macs'] / 1e6:.1f} M multiply-accumulates per inference")
    return 0


def _load_inputs(args, sess) -> Dict[str, np.ndarray]:
    if args.inputs:
        try:
            with np.load(args.inputs) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read inputs {args.inputs}: {exc}") from None
    rng = np.random.default_rng(args.seed)
    _progress(f"no --inputs given: using random normal inputs (seed {args.seed})")
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in sess.inputs}


def _save_npz(path: str, arrays: Dict[str, np.ndarray]) -> None:
    """Atomic: a failed run never leaves a partial output file behind."""
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _executor(value: str) -> str:
    """argparse type of run's --on: a usage error (exit 2) for anything else."""
    if value in EXECUTORS or value.startswith("ssh://"):
        return value
    raise argparse.ArgumentTypeError(f"invalid executor {value!r}: use host, qemu, cuda, "
                                     "cuda-emu or ssh://[user@]host[:port]")


def _open(args):
    from .runtime import open_session
    # For cuda the compiler is nvcc; cuda-emu builds with a host C++ compiler.
    kwargs = {"nvcc" if args.on == "cuda" else "compiler": args.compiler}
    if args.no_cache:
        kwargs["use_cache"] = False
    if getattr(args, "vlen", None) is not None:
        if args.on != "qemu":
            raise InputError(f"--vlen applies to --on qemu, not --on {args.on}")
        kwargs["vlen"] = args.vlen
    t0 = time.perf_counter()
    sess = open_session(args.artifact, on=args.on, **kwargs)
    where = f"{args.on} (VLEN {sess.vlen})" if args.on == "qemu" else args.on
    if sess.executor == "ssh":
        cached = "cached" if sess.kernels_cached else "compiled on the board"
        where = f"{args.on} ({' '.join(sess.compiler.argv)}, {cached})"
    elif getattr(sess, "device_name", None):  # cuda: which GPU (or the CPU emulator)
        where = f"{args.on} ({sess.device_name})"
    _progress(f"{where}: kernels ready in {time.perf_counter() - t0:.2f}s")
    return sess


def cmd_run(args) -> int:
    with _open(args) as sess:  # closing matters on a board: it removes the remote temp dir
        feeds = _load_inputs(args, sess)
        outs = sess.run(feeds)
        if args.output:
            _save_npz(args.output, outs)
            _progress(f"wrote {args.output} ({', '.join(outs)})")
        else:
            print(table(["output", "shape", "min", "max", "argmax"],
                        [[k, "x".join(map(str, v.shape)), f"{v.min():.6g}", f"{v.max():.6g}",
                          int(np.argmax(v))] for k, v in outs.items()]))
        if args.profile:
            _print_profile(sess.profile(feeds, repeat=args.repeat))
    return 0


def _bench_targets(args):
    """(executor, vlen) pairs: `--on host,qemu --vlen 128,256` measures qemu at both VLENs;
    ssh://... entries are boards."""
    vlens = [int(v) for v in str(args.vlen).split(",")] if args.vlen else [None]
    for on in [t.strip() for t in args.on.split(",") if t.strip()]:
        if on.startswith("ssh://"):
            yield on, None
            continue
        if on not in EXECUTORS:
            raise InputError(f"unknown executor {on!r}; choose from {', '.join(EXECUTORS)} "
                             "or ssh://[user@]host[:port]")
        for vlen in (vlens if on == "qemu" else [None]):
            yield on, vlen


def _bench_one(args, on: str, vlen) -> Dict:
    from .bench import bench
    sub = argparse.Namespace(**vars(args))
    sub.on, sub.vlen = on, vlen
    with _open(sub) as sess:
        feeds = _load_inputs(args, sess)
        _progress(f"{on}: measuring ({args.repeat} runs"
                  + (", counting instructions" if on == "qemu" and not args.no_count else "")
                  + ")")
        return bench(sess, feeds, repeat=args.repeat, warmup=args.warmup,
                     count=not args.no_count)


def _bench_rows(args) -> List:
    """Rows in --on order, or an RvvkitError in place of a board that failed. Local
    executors run one after the other first (their timings must not compete for this
    machine); boards then run all at once, each on its own connection and thread."""
    from concurrent.futures import ThreadPoolExecutor
    targets = list(_bench_targets(args))
    rows: List = [None] * len(targets)
    boards = [i for i, (on, _) in enumerate(targets) if on.startswith("ssh://")]
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


def cmd_bench(args) -> int:
    results = _bench_rows(args)
    rows = [r for r in results if isinstance(r, dict)]
    failed = [r for r in results if not isinstance(r, dict)]
    for exc in failed:
        print(f"rvvkit: error: {exc}", file=sys.stderr)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 1 if failed else 0
    body = []
    for r in rows:
        counted = "dynamic_instructions" in r
        body.append([r["executor"], r.get("vlen") or "-", r["compiler"][:28],
                     f"{r['latency_ms']:.3f} ({r['latency_stat']})", f"{r['macs'] / 1e6:.1f}",
                     f"{r['dynamic_instructions']:,}" if counted else "-",
                     f"{r['vector_instructions']:,}" if counted else "-",
                     f"{r['macs_per_instruction']:.2f}" if counted else "-"])
    if body:
        print(table(["executor", "VLEN", "compiler", "latency ms", "MMACs", "dynamic insns",
                     "vector insns", "MACs/insn"], body, align="lrllrrrr"))
    if any(r["executor"] == "qemu" or "qemu" in r.get("wrapper", "") for r in rows):
        print("\nqemu latency is emulation speed, not a board's; compare RVV code by "
              "instruction counts (exact, per inference, start-up subtracted).")
    return 1 if failed else 0


def cmd_doctor(args) -> int:
    from . import doctor
    if args.on and not args.on.startswith("ssh://"):
        raise InputError(f"doctor --on takes a board (ssh://...), not {args.on!r}; without "
                         "--on it reports on this machine")
    sections = doctor.board_report(args.on) if args.on else doctor.local_report()
    print(doctor.format_report(sections))
    return 0


def _print_profile(rows) -> None:
    total = sum(r["seconds"] for r in rows) or 1e-12
    print(f"\nper-step time (mean of runs), total {total * 1e3:.3f} ms")
    body = [[r["step"], r["op"], r["node"][:40], r["kernel"], f"{r['seconds'] * 1e3:.4g}",
             f"{100 * r['seconds'] / total:.1f}%",
             f"{2 * r['macs'] / r['seconds'] / 1e9:.1f}" if r["macs"] and r["seconds"] else "-"]
            for r in rows]
    print(table(["step", "op", "node", "kernel", "ms", "share", "GFLOP/s"], body,
                align="rlllrrr"))


def build_parser() -> argparse.ArgumentParser:
    from .cli_compare import add_compare_parser
    p = argparse.ArgumentParser(prog="rvvkit", description="Compile ONNX models to portable C "
                                "kernels and run them on x86 hosts, RISC-V vector boards and "
                                "CUDA GPUs.")
    p.add_argument("--version", action="version", version=f"rvvkit {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = sub.add_parser("build", help="lower an ONNX model to an artifact (.rvv)")
    b.add_argument("model", help="ONNX model file")
    b.add_argument("-o", "--output", help="artifact path (default: <model>.rvv)")
    b.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                   help="static shape for an input with symbolic dimensions (repeatable)")
    b.add_argument("-O", "--opt-level", type=int, default=2, choices=[0, 1, 2],
                   help="0: no folding/fusion, 1: fold BatchNorm/affine, 2: + fusion (default)")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    b.set_defaults(func=cmd_build)

    i = sub.add_parser("inspect", help="show an artifact's sections, I/O, kernels and memory")
    i.add_argument("artifact")
    g = i.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="machine-readable meta + sections")
    g.add_argument("--source", action="store_true", help="print the generated C")
    g.add_argument("--cuda-source", action="store_true",
                   help="print the generated CUDA (the same plan, run by --on cuda)")
    i.set_defaults(func=cmd_inspect)

    r = sub.add_parser("run", help="run an artifact on inputs and write outputs")
    r.add_argument("artifact")
    r.add_argument("--inputs", help=".npz keyed by input names (default: seeded random)")
    r.add_argument("--output", help=".npz to write, keyed by output names")
    r.add_argument("--on", default="host", type=_executor, metavar="EXECUTOR",
                   help="host, qemu, cuda (a GPU, via nvcc), cuda-emu (the CUDA code on the "
                   "CPU emulator) or a board ssh://[user@]host[:port] (default host)")
    r.add_argument("--compiler", help="compiler command (overrides RVVKIT_COMPILER; for --on "
                   "cuda the nvcc to use, overriding RVVKIT_NVCC)")
    r.add_argument("--vlen", type=int, help="RVV vector length in bits for --on qemu: 128, "
                   "256, 512 or 1024 (default: RVVKIT_VLEN, else 256)")
    r.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    r.add_argument("--profile", action="store_true", help="print per-kernel timings")
    r.add_argument("--repeat", type=int, default=10, help="runs averaged by --profile")
    r.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    r.set_defaults(func=cmd_run)

    bn = sub.add_parser("bench", help="latency, and under qemu exact instruction counts")
    bn.add_argument("artifact")
    bn.add_argument("--on", default="host",
                    help="comma-separated executors, e.g. host,qemu,ssh://k1-board "
                    "(default host); boards are measured in parallel")
    bn.add_argument("--vlen", help="RVV vector length(s) in bits for qemu, e.g. 256 or 128,512")
    bn.add_argument("--inputs", help=".npz keyed by input names (default: seeded random)")
    bn.add_argument("--compiler", help="compiler command (overrides RVVKIT_COMPILER)")
    bn.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    bn.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    bn.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    bn.add_argument("--no-count", action="store_true",
                    help="qemu: skip the instruction-counting runs")
    bn.add_argument("--json", action="store_true", help="print rows as JSON")
    bn.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    bn.set_defaults(func=cmd_bench)

    add_compare_parser(sub)

    d = sub.add_parser("doctor", help="compilers, QEMU, GPU here; or a board's compiler, "
                       "RVV support, VLEN, cores and OS")
    d.add_argument("--on", metavar="ssh://BOARD", help="report on this board instead")
    d.set_defaults(func=cmd_doctor)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except RvvkitError as exc:
        print(f"rvvkit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rvvkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
