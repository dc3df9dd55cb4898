"""rvvkit's CUDA path on a GPU against PyTorch eager and onnxruntime, as one table.

    python3 benchmarks/bench_gpu.py                          # every model below
    python3 benchmarks/bench_gpu.py --models light:squeezenet,torch:resnet50 --repeat 20
    python3 benchmarks/bench_gpu.py --jobs 12 --json out.json
    python3 benchmarks/bench_gpu.py --emulate --models m.onnx  # no GPU: the CPU emulator

The models: the nine ONNX light models, every stored family model (tests/models), and where
torch is installed resnet50, mobilenet_v2, efficientnet_b0 and ViT-B/16 from torchvision and
BERT-base (128 tokens) from a transformers config, all with random weights. Each model runs in
processes of its own (benchmarks/gpu_models.py), so a crash fails its row and nothing else:
first every build and CUDA compile, --jobs at a time (nvcc takes 5-28 s a model), then the
timed runs one at a time, the GPU to themselves.

Per model: rvvkit's latency (median of --repeat synchronised runs on uploaded inputs, no
copies), its kernel time (the sum of the per-step CUDA event times) and the rest, launch
overhead; PyTorch eager's latency for the torch models (fp32, TF32 off, cudnn.benchmark on,
batch 1) and the ratio (< 1: rvvkit faster); the largest absolute difference from onnxruntime
(CPU) and from PyTorch. Figures compare only within one run on one machine."""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List

from host_env import say  # noqa: I100 - finds rvvkit first
from gpu_models import TORCH_MODELS, key_of

from rvvkit.measure.report import table
from rvvkit.zoo import LIGHT_MODELS

HERE = Path(__file__).resolve().parent
WORKER = HERE / "gpu_models.py"
BUILD_TIMEOUT, RUN_TIMEOUT = 900, 600


def default_models() -> List[str]:
    stored = sorted(p.stem for p in (HERE.parent / "tests" / "models").glob("*.onnx"))
    specs = [f"light:{m}" for m in LIGHT_MODELS] + [f"stored:{m}" for m in stored]
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        specs += [f"torch:{m}" for m in TORCH_MODELS]
    except ImportError:
        say("torch/torchvision not installed: no PyTorch models or ratios")
    return specs


def phase(name: str, spec: str, out: Path, args) -> Dict:
    """One phase of one model in its own process; its JSON, or why there is none."""
    cmd = [sys.executable, str(WORKER), name, spec, str(out), "--repeat", str(args.repeat)]
    cmd += ["--emulate"] if args.emulate else []
    result = out / f"{key_of(spec)}.{name}.json"
    result.unlink(missing_ok=True)
    timeout = BUILD_TIMEOUT if name == "build" else RUN_TIMEOUT
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"{name} timed out after {timeout} s"}
    (out / f"{key_of(spec)}.{name}.log").write_text(proc.stdout + proc.stderr)
    if result.exists():
        return json.loads(result.read_text())
    why = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    return {"error": f"{name} crashed ({why}); log: {out / (key_of(spec) + '.' + name + '.log')}"}


def measure(specs: List[str], out: Path, args) -> Dict[str, Dict]:
    results: Dict[str, Dict] = {}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        for spec, res in zip(specs, pool.map(lambda s: phase("build", s, out, args), specs)):
            results[spec] = res
            say(f"built {spec}: {res.get('error') or 'ok'}")
    say(f"builds: {time.perf_counter() - t0:.0f} s")
    for spec in specs:
        if "error" not in results[spec]:
            results[spec].update(phase("run", spec, out, args))
            say(f"ran {spec}: {results[spec].get('error') or 'ok'}")
    return results


def fmt(value, style: str = ".2f") -> str:
    return "-" if value is None else format(value, style)


def report(results: Dict[str, Dict]) -> str:
    rows, ratios = [], []
    for spec, r in results.items():
        ratio = r["ms"] / r["torch_ms"] if "ms" in r and r.get("torch_ms") else None
        if ratio:
            ratios.append(ratio)
        rows.append([spec, r.get("steps", "-"), fmt(r.get("ms")), fmt(r.get("kernel_ms")),
                     fmt(r.get("overhead_ms")), fmt(r.get("torch_ms")), fmt(ratio),
                     fmt(r.get("err_ort"), ".1e"), fmt(r.get("err_torch"), ".1e"),
                     r.get("error", "")])
    ran = sum("err_ort" in r for r in results.values())
    devices = sorted({r["device"] for r in results.values() if "device" in r})
    lines = [f"device: {', '.join(devices) or 'none answered'}",
             table(["model", "steps", "rvvkit ms", "kernels ms", "overhead ms", "torch ms",
                    "x torch", "max err vs ort", "max err vs torch", "error"], rows),
             f"{ran} of {len(results)} models ran"]
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        lines.append(f"geometric mean rvvkit/torch over {len(ratios)} models: {geo:.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated specs (light:NAME, stored:NAME, "
                                     "torch:NAME, or an .onnx path); default: all")
    ap.add_argument("--repeat", type=int, default=50, help="timed runs (0: numerics only)")
    ap.add_argument("--jobs", type=int, default=max((os.cpu_count() or 2) - 2, 1))
    ap.add_argument("--emulate", action="store_true", help="the CPU emulator, not a GPU")
    ap.add_argument("--out", type=Path, default=Path("/tmp/rvvkit-bench-gpu"),
                    help="models, artifacts and logs (default %(default)s)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    specs = args.models.split(",") if args.models else default_models()
    args.out.mkdir(parents=True, exist_ok=True)
    results = measure(specs, args.out, args)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
