"""`rvvkit inspect`: an artifact's sections, I/O, kernels and memory (or its C / CUDA)."""
from __future__ import annotations

import json
import sys
from typing import Dict

from ..errors import RvvkitError
from ..report import human_bytes, table


def _dims(shape) -> str:
    return "x".join(map(str, shape))


def _print_summary(path: str, art) -> None:
    meta = art.meta
    print(f"{path}: model {meta['model']!r}, format {meta['format_version']}, "
          f"{meta['producer']}")
    print("\nsections:")
    print(table(["name", "offset", "size", "sha256"],
                [[s["name"], s["offset"], s["size"], s["sha256"][:16]] for s in art.sections()]))
    print("\ninputs:")
    print(table(["name", "shape", "dtype"],
                [[i["name"], _dims(i["shape"]), i["dtype"]] for i in meta["inputs"]]))
    print("\noutputs:")
    print(table(["name", "shape", "dtype"],
                [[o["name"], _dims(o["shape"]), o["dtype"]] for o in meta["outputs"]]))
    uses: Dict[str, int] = {}
    for s in meta["plan"]:
        uses[s["kernel"]] = uses.get(s["kernel"], 0) + 1
    print(f"\nkernels: {len(meta['kernels'])} distinct, {len(meta['plan'])} steps")
    print(table(["kernel", "calls", "MACs/call", "workspace"],
                [[k["name"], uses.get(k["name"], 0), k["macs"],
                  human_bytes(4 * k["workspace_floats"])] for k in meta["kernels"]]))
    mem = meta["memory"]
    print(f"\nmemory: arena {human_bytes(mem['arena_bytes'])} ({mem['arena_bytes']} bytes), "
          f"lower bound {human_bytes(mem['lower_bound_bytes'])} "
          f"({mem['lower_bound_bytes']} bytes), weights {human_bytes(mem['weights_bytes'])}")
    print(f"compute: {meta['macs'] / 1e6:.1f} M multiply-accumulates per inference")


def cmd_inspect(args) -> int:
    from ..artifact import Artifact
    art = Artifact.load(args.artifact)
    if args.source:
        sys.stdout.write(art.c_source)
    elif args.cuda_source:
        if art.cu_source is None:
            why = (art.meta.get("cuda") or {}).get("reason", "built without it")
            raise RvvkitError(f"{args.artifact} has no CUDA source: {why}")
        sys.stdout.write(art.cu_source)
    elif args.json:
        json.dump(dict(art.meta, sections=art.sections()), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print_summary(args.artifact, art)
    return 0


def add_parser(sub) -> None:
    i = sub.add_parser("inspect", help="show an artifact's sections, I/O, kernels and memory")
    i.add_argument("artifact")
    g = i.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="machine-readable meta + sections")
    g.add_argument("--source", action="store_true", help="print the generated C")
    g.add_argument("--cuda-source", action="store_true",
                   help="print the generated CUDA (the same plan, run by --on cuda)")
    i.set_defaults(func=cmd_inspect, parser=i)
