"""The issue-level host figure in one run: the nine light models (bench_host.py) and the stored
model families (bench_models.py: torchvision, timm, transformers, RNN and YOLO-style exports),
rvvkit vs onnxruntime at the same thread count, and the geometric mean of the ratios over each
set and over all of them together.

    python3 benchmarks/bench_all.py --threads 1
    python3 benchmarks/bench_all.py --threads 2 --repeat 15 --json all2.json

Each part prints its own table as it goes (see those scripts for what is measured); this one
adds the summary. Not a test: figures only compare within one run.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from host_env import say  # noqa: I100 - finds rvvkit first
from host_report import geomean

import bench_host
import bench_models


def _ratios(doc: dict):
    return [m["ratio"] for m in doc["models"] if "error" not in m]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for both engines (default 1)")
    ap.add_argument("--repeat", type=int, default=15,
                    help="timed calls per model and engine (default 15)")
    ap.add_argument("--json", metavar="FILE", help="write both parts and the summary")
    args = ap.parse_args(argv)
    common = ["--threads", str(args.threads), "--repeat", str(args.repeat)]
    with tempfile.TemporaryDirectory(prefix="rvvkit-bench-all-") as tmp:
        light_json, suite_json = Path(tmp) / "light.json", Path(tmp) / "suite.json"
        say("part 1: the nine light models (bench_host.py)")
        rc = bench_host.main(common + ["--warm-runs", "1", "--json", str(light_json)])
        say("part 2: the stored model families (bench_models.py)")
        rc |= bench_models.main(common + ["--json", str(suite_json)])
        light = json.loads(light_json.read_text())
        suite = json.loads(suite_json.read_text())
    lr, sr = _ratios(light), _ratios(suite)
    summary = {"threads": args.threads, "light_models": len(lr), "light_geomean": geomean(lr),
               "families_models": len(sr), "families_geomean": geomean(sr),
               "all_models": len(lr) + len(sr), "all_geomean": geomean(lr + sr)}
    print(f"\nrvvkit/onnxruntime, {args.threads} thread(s) each, geometric means of median "
          f"latency ratios:")
    for part in ("light", "families", "all"):
        gm = summary[f"{part}_geomean"]
        print(f"  {part:<9} {summary[f'{part}_models']:>3} models  "
              f"{gm:.3f}" if not math.isnan(gm) else f"  {part:<9} no models measured")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "light": light,
                                               "families": suite}, indent=1))
        say(f"wrote {args.json}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
