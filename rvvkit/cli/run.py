"""`rvvkit run`: an artifact on inputs, on one executor; outputs to .npz or a summary."""
from __future__ import annotations

import numpy as np

from ..measure.report import table
from .common import (add_isa_options, add_threads_option, count, executor, isa_options, load_inputs,
                     load_npz, open_session, printable, progress, save_npz, vlen)
from .sign import add_require_option, verified


def print_profile(rows) -> None:
    total = sum(r["seconds"] for r in rows) or 1e-12
    print(f"\nper-step time (mean of runs), total {total * 1e3:.3f} ms")
    body = [[r["step"], r["op"], r["node"][:40], r["kernel"], f"{r['seconds'] * 1e3:.4g}",
             f"{100 * r['seconds'] / total:.1f}%",
             f"{2 * r['macs'] / r['seconds'] / 1e9:.1f}" if r["macs"] and r["seconds"] else "-"]
            for r in rows]
    print(table(["step", "op", "node", "kernel", "ms", "share", "GFLOP/s"], body,
                align="rlllrrr"))


def cmd_run(args) -> int:
    art = verified(args, args.artifact)  # None: no signature required
    given = load_npz(args.inputs) if args.inputs else None   # a bad file fails before compiling
    sess = open_session(art or args.artifact, args.on, compiler=args.compiler,
                        no_cache=args.no_cache, vlen=args.vlen,
                        prefer_precompiled=args.prefer_precompiled, threads=args.threads,
                        **isa_options(args))
    with sess:  # closing matters on a board: it removes the remote temp dir
        feeds = given if given is not None else load_inputs(args, sess)
        outs = sess.run(feeds)
        if args.output:
            save_npz(args.output, outs)
            progress(f"wrote {args.output} ({', '.join(printable(k) for k in outs)})")
        else:
            print(table(["output", "shape", "min", "max", "argmax"],
                        [[printable(k), "x".join(map(str, v.shape)), f"{v.min():.6g}", f"{v.max():.6g}",
                          int(np.argmax(v))] for k, v in outs.items()]))
        if args.profile:
            print_profile(sess.profile(feeds, repeat=args.repeat))
    return 0


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="run an artifact on inputs and write outputs")
    r.add_argument("artifact")
    r.add_argument("--inputs", help=".npz keyed by input names (default: seeded random)")
    r.add_argument("--output", help=".npz to write, keyed by output names")
    r.add_argument("--on", default="host", type=executor, metavar="EXECUTOR",
                   help="host, qemu, cuda (a GPU, via nvcc), cuda-emu (the CUDA code on the "
                   "CPU emulator) or a board ssh://[user@]host[:port] (default host)")
    r.add_argument("--compiler", help="compiler command (overrides RVVKIT_COMPILER; for --on "
                   "cuda the nvcc to use, overriding RVVKIT_NVCC)")
    r.add_argument("--vlen", type=vlen, help="RVV vector length in bits for --on qemu: 128, "
                   "256, 512 or 1024 (default: RVVKIT_VLEN, else 256)")
    r.add_argument("--no-cache", action="store_true", help="compile afresh, bypass the cache")
    r.add_argument("--prefer-precompiled", action="store_true",
                   help="run the artifact's precompiled kernels (rvvkit pack) even where a "
                        "compiler works; without it they run only where none does "
                        "(also RVVKIT_PREFER_PRECOMPILED=1)")
    add_threads_option(r)
    add_isa_options(r)
    r.add_argument("--profile", action="store_true", help="print per-kernel timings")
    r.add_argument("--repeat", type=count(1), default=10, help="runs averaged by --profile")
    r.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    add_require_option(r)
    r.set_defaults(func=cmd_run, parser=r)
