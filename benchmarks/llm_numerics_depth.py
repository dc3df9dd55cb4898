"""How far apart int8-activation decoders land as they get deeper: one int4 artifact
(accuracy level 4, Qwen2.5-0.5B's widths, seeded random weights) at 1 to 24 layers, its
logits on the host, under QEMU (and on the CUDA emulator) against each other and against
onnxruntime, beside onnxruntime against itself with its graph optimisations off.

    python3 benchmarks/llm_numerics_depth.py [--layers 1,4,24] [--vlens 128,256] [--steps 2]
                                             [--cuda-emu]

Why: a deep decoder with int8 activations carries any last-bit difference on. An activation
an ulp from a rounding boundary rounds one way in one engine and the other way in another, and
every later layer carries that quantum on. rvvkit's executors take the same operations in the
same order (e^x: rvvkit/codegen/expmath.py; the attention: kernels/llm/gqa_host.py; an
activation's int8 form from the rounded product), so their columns should read 0. The last
column is onnxruntime disagreeing with itself: what two engines that order their sums
differently can promise at that depth."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import rvvkit  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.zoo import llm as zoo_llm  # noqa: E402


def _ort_rows(model, prompt, steps: int, bound: int, optimise: bool):
    import onnxruntime as ort
    from ort_decoder import ort_greedy
    so = ort.SessionOptions()
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return ort_greedy(sess, prompt, steps, bound)[1]


def _gap(a, b) -> float:
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def depth_row(layers: int, vlens, steps: int, emu: bool, bound: int = 64) -> list:
    cfg = zoo_llm.replace(zoo_llm.SMALL["qwen2.5-0.5b"], bits=4, block=32, accuracy=4,
                          layers=layers)
    model = zoo_llm.decoder(cfg, seed=0)
    prompt = [int(t) for t in np.random.default_rng(7).integers(0, 256, 20)]
    ort_rows = _ort_rows(model, prompt, steps, bound, True)
    ort_plain = _ort_rows(model, prompt, steps, bound, False)
    art = rvvkit.build(model, max_seq=bound)
    runs = {}
    ons = [("host", {})] + [("qemu", {"vlen": v}) for v in vlens] + \
        ([("cuda-emu", {})] if emu else [])
    for on, opts in ons:
        t0 = time.perf_counter()
        with rvvkit.load(art, on=on, **opts) as sess:
            runs[f"{on}{opts.get('vlen', '')}"] = sess.generate(prompt, steps, eos=[],
                                                                 keep_logits=True).logits
        print(f"  {layers} layers, {on} {opts}: {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    host = runs.pop("host")
    scale = float(np.abs(np.asarray(ort_rows)).max())
    others = [f"{_gap(host, r):.1e}" for r in runs.values()]
    return [str(layers), f"{scale:.1f}", *others, f"{_gap(host, ort_rows):.1e}",
            f"{_gap(ort_rows, ort_plain):.1e}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", default="1,4,24")
    p.add_argument("--vlens", default="128,256")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--cuda-emu", action="store_true", help="also the CUDA emulator (slow)")
    args = p.parse_args(argv)
    vlens = [int(v) for v in args.vlens.split(",")]
    rows = [depth_row(int(n), vlens, args.steps, args.cuda_emu) for n in args.layers.split(",")]
    emu = ["host - CUDA emulator"] if args.cuda_emu else []
    print(table(["layers", "max |logit|", *[f"host - QEMU {v}" for v in vlens], *emu,
                 "host - onnxruntime", "onnxruntime - onnxruntime, no graph opt"],
                rows, align="r" * (4 + len(vlens) + len(emu))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
