"""Dynamic instruction counts of one inference under QEMU, RVV build vs scalar build.

For each model and VLEN: dynamic instructions, vector instructions and MACs per instruction,
for the vector build (clang-16: RVV intrinsics + auto-vectorisation) and the scalar build
(Debian's riscv64 GCC 12: no intrinsics, no RVV auto-vectorisation). Counts come from the QEMU
TCG plugin and are exact: a run that infers once minus a run that only loads.

    python3 benchmarks/bench_qemu.py                       # squeezenet + resnet50, VLEN 128/256/512
    python3 benchmarks/bench_qemu.py --models squeezenet --vlens 128 256 512 1024 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rvvkit  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.runtime.qemu import QemuSession  # noqa: E402
from rvvkit.zoo import light_model, sample_inputs  # noqa: E402

BUILDS = {"rvv (clang-16)": "clang-16", "scalar (gcc 12)": "riscv64-linux-gnu-gcc"}


def measure(name: str, vlens, builds, log) -> list:
    model = light_model(name)
    feeds = sample_inputs(model)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.rvv"
        rvvkit.build(model).save(path)
        for label, compiler in builds.items():
            # GCC 12 emits no vector instructions, so its count is the same at every VLEN.
            for vlen in (vlens if compiler != BUILDS["scalar (gcc 12)"] else vlens[:1]):
                t0 = time.perf_counter()
                with QemuSession(path, compiler=compiler, vlen=vlen) as sess:
                    sess.set_threads(1)   # one core's count, the same on every machine
                    c = sess.instruction_counts(feeds)
                    macs = int(sess.artifact.meta["macs"])
                rows.append({"model": name, "build": label, "compiler": compiler, "vlen": vlen,
                             "dynamic_instructions": c["insns"],
                             "vector_instructions": c["vector_insns"],
                             "vsetvl_instructions": c["vsetvl"], "macs": macs,
                             "macs_per_instruction": macs / c["insns"]})
                log(f"{name} {label} VLEN {vlen}: {c['insns']:,} insns, "
                    f"{macs / c['insns']:.2f} MACs/insn ({time.perf_counter() - t0:.0f}s)")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"])
    p.add_argument("--vlens", nargs="+", type=int, default=[128, 256, 512])
    p.add_argument("--builds", nargs="+", choices=list(BUILDS), default=list(BUILDS))
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = p.parse_args(argv)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    builds = {k: BUILDS[k] for k in args.builds}
    rows = [r for m in args.models for r in measure(m, args.vlens, builds, log)]
    headers = ["model", "build", "VLEN", "dynamic insns", "vector insns", "MACs",
               "MACs/insn"]
    body = [[r["model"], r["build"], r["vlen"], f"{r['dynamic_instructions']:,}",
             f"{r['vector_instructions']:,}", f"{r['macs']:,}",
             f"{r['macs_per_instruction']:.2f}"] for r in rows]
    if args.markdown:
        print("| " + " | ".join(headers) + " |")
        print("|" + "---|" * len(headers))
        for b in body:
            print("| " + " | ".join(str(c) for c in b) + " |")
    else:
        print(table(headers, body, align="llrrrrr"))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
