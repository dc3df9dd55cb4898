"""ncnn's modelled K1 time: one inference of a model that benchmarks/peer_ncnn.py has built and
converted, counted by instruction class under QEMU at VLEN 256 (the class plugin, the K1 ISA
profile's -cpu), run through the K1 class model (docs/cost-model.md: LLVM's X60 table; a MODEL,
+39 % off the one published K1 point it could run). rvvkit's side is in
benchmarks/bench_precision.py (its `x60_model_ms`).

    python3 benchmarks/peer_ncnn.py --models squeezenet --vlens 256     # builds, converts
    python3 benchmarks/peer_ncnn_classes.py --models squeezenet mobilenet_v2_224 --variant k1

--variant k1: ncnn built and run as on a K1 (Zfh/Zvfh, float16 by default); fp32: its
float32 build. Work directory: peer_ncnn.py's (~/.cache/rvvkit-peer, or $RVVKIT_PEER_DIR).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import peer_ncnn as P  # noqa: E402
from rvvkit.measure import cycle_model  # noqa: E402
from rvvkit.runtime.counting import iclass  # noqa: E402

SHAPE = (3, 224, 224)     # every model peer_ncnn.py converts for this table takes one image
K1 = cycle_model.board_model("k1")


def work_dir() -> Path:
    return Path(os.environ.get("RVVKIT_PEER_DIR", Path.home() / ".cache" / "rvvkit-peer"))


def classes(name: str, variant: str, vlen: int) -> dict:
    """Class counts of one inference: a run with REPEAT=1 minus one with REPEAT=0."""
    base = work_dir()
    conv = json.loads((base / "models" / name / "fp32" / "pnnx" / "convert.json").read_text())
    runner = base / ("rv64-k1" if variant == "k1" else "rv64") / "bin" / "ncnn_runner"
    inp = base / "models" / name / "fp32" / "input.raw"
    if not runner.exists() or not inp.exists():
        raise P.PeerError(f"no ncnn {variant} build or input for {name}: run peer_ncnn.py first")

    def run(repeat: int) -> dict:
        with tempfile.TemporaryDirectory(prefix="peer-ncnn-cls-") as d:
            out = Path(d) / "classes.json"
            argv = P.qemu_prefix(vlen) + iclass.qemu_class_args(out) + P.ncnn_argv(
                runner, conv, inp, SHAPE, repeat, Path(d), [conv["output"]])
            subprocess.run(argv, check=True, capture_output=True, timeout=7200)
            return iclass.read_classes(out)
    return iclass.class_difference(run(1), run(0))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["squeezenet", "mobilenet_v2_224"])
    p.add_argument("--variant", choices=("k1", "fp32"), default="k1")
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args(argv)
    rows = []
    for name in a.models:
        d = classes(name, a.variant, K1.vlen)
        f = cycle_model.classes_fields(d["classes"], K1, K1.vlen)
        rows.append({"model": name, "variant": a.variant, "insns": d["insns"],
                     "x60_model_ms": f["class_model_ms"], "bound_by": f["bound_by"]})
        print(json.dumps(rows[-1]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
