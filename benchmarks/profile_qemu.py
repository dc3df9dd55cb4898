"""Where one inference's RVV instructions go: LMUL-weighted counts per kernel function under
QEMU (exact, from the counting plugin's block profile; rvvkit.runtime.counting.iprofile), one thread.

    python3 benchmarks/profile_qemu.py resnet50 --vlen 512 [--top 25] [--functions] [--markdown]
    python3 benchmarks/profile_qemu.py mobilenet_v2_224 --precision auto --isa k1

Models: those of benchmarks/peer_ncnn.py (peer_ncnn_models.fp32_model: the onnx light models,
tests/models' float models, mobilenet_v2_224, encoder), or a path to an .onnx file (its inputs
from rvvkit.zoo.sample_inputs). Rows are kernel families (function names without shapes,
hashes and LMUL variants) unless --functions; "weighted" = instructions - vector instructions
+ LMUL-weighted vector operations (rvvkit.measure.cycle_model.weighted_instructions), as everywhere.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def _model(name: str):
    """(model, feeds): an .onnx file, or any model the ncnn peer benchmark knows (one place
    for the names: peer_ncnn_models.fp32_model)."""
    import onnx
    from rvvkit import zoo
    if name.endswith(".onnx"):
        model = onnx.load(name)
        return model, zoo.sample_inputs(model)
    from peer_ncnn_models import fp32_model
    model, feeds, _, _ = fp32_model(name)
    return model, feeds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--vlen", type=int, default=256)
    p.add_argument("--top", type=int, default=25, help="rows shown (default 25)")
    p.add_argument("--functions", action="store_true", help="one row per function")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "auto"),
                   help="rvvkit build --precision (default fp32)")
    p.add_argument("--isa", default=None, help="ISA profile, e.g. k1 (default: plain RVV)")
    args = p.parse_args(argv)
    os.environ["RVVKIT_NUM_THREADS"] = "1"      # exact: no worker wake-ups in the counts
    import rvvkit
    from rvvkit.measure.cycle_model import weighted_instructions
    from rvvkit.errors import RvvkitError
    from rvvkit.measure.report import table
    from rvvkit.runtime.counting.iprofile import family
    from rvvkit.runtime.qemu import QemuSession
    from peer_ncnn_build import PeerError
    try:
        model, feeds = _model(args.model)
        art = rvvkit.build(model, precision=args.precision, cuda=False)
        with QemuSession(art, vlen=args.vlen, isa=args.isa) as sess:
            sess.set_threads(1)   # one core's profile, the same on every machine
            prof = sess.instruction_profile(feeds)
    except (RvvkitError, OSError, PeerError) as exc:
        print(f"profile_qemu: error: {exc}", file=sys.stderr)
        return 1
    rows = {}
    for name, r in prof.items():
        key = name if args.functions else family(name)
        acc = rows.setdefault(key, [0, 0, 0])
        acc[0] += weighted_instructions(r)
        acc[1] += r["insns"] - r["vector_insns"]
        acc[2] += r["lmul_weighted_vector_ops"]
    total = sum(v[0] for v in rows.values())
    order = sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.top]
    heads = ["kernel", "weighted", "share", "scalar", "vector LMUL-weighted"]
    body = [[k, f"{w / 1e6:.2f} M", f"{100 * w / total:.1f} %", f"{s / 1e6:.2f} M",
             f"{v / 1e6:.2f} M"] for k, (w, s, v) in order]
    print(f"{args.model}, VLEN {args.vlen}, one inference, one thread: "
          f"{total / 1e6:.2f} M weighted")
    if args.markdown:
        print("| " + " | ".join(heads) + " |\n|---|" + "---:|" * (len(heads) - 1))
        for b in body:
            print("| " + " | ".join(b) + " |")
    else:
        print(table(heads, body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
