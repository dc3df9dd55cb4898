"""`rvvkit pack`: add precompiled kernels and runner to an existing artifact
(rvvkit/precompile.py), for boards and hosts without a compiler."""
from __future__ import annotations

import os

from ..measure.report import human_bytes
from .common import progress


def cmd_pack(args) -> int:
    from ..artifact.container import Artifact
    from ..precompile import pack, parse_targets
    targets = parse_targets(args.precompile)
    art = Artifact.load(args.artifact).check_model()
    out = args.output or args.artifact
    packed = pack(art, targets, compiler=args.compiler, progress=progress)
    packed.save(out)  # atomic: the original stays whole until the new file is complete
    progress(f"wrote {out} ({human_bytes(os.path.getsize(out))}; precompiled for "
             f"{', '.join(sorted(packed.meta['precompiled']))})")
    if "signature" in art.meta or getattr(art, "signature", None):
        progress("note: packing changed the artifact, so an earlier signature no longer "
                 "applies; sign it again (rvvkit sign)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("pack", help="add precompiled kernels to an artifact (for targets "
                       "without a compiler)")
    p.add_argument("artifact", help="artifact (.rvv) to extend")
    p.add_argument("--precompile", required=True, metavar="TARGETS",
                   help="riscv64 and/or this machine's arch (e.g. riscv64,x86_64)")
    p.add_argument("--compiler", help="compiler command (default: the one the JIT would pick "
                   "for each target)")
    p.add_argument("-o", "--output", help="write here instead of replacing ARTIFACT")
    p.set_defaults(func=cmd_pack, parser=p)
