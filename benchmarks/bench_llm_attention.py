"""What a generated token's attention costs as the context grows, under QEMU: LMUL-weighted
instructions per generated token at 64, 512 and 2048 live positions.

    python3 benchmarks/bench_llm_attention.py [--lives 64,512,2048] [--vlen 256] [--isa k1]
                                              [--json F]

The model: Qwen2.5-0.5B's attention (hidden 896, 14 query heads, 2 key/value heads of 64,
rotary), int4 weights with int8 activations, but 2 layers, an intermediate size of 256 and a
vocabulary of 512, so that a 2048-token prompt runs under QEMU in a minute; the bound is 2112
positions. Per live length L: two `runner --generate` processes with an L-token prompt and 2
or 6 new tokens, differenced (bench_llm.py's scheme), so the figure is a generated token at
about L live positions. "attention per layer" = (the token at L less the token at the
smallest L) / layers: what the growing context adds per layer, to be multiplied by the 24
layers of the 0.5B (whose other work per token is 69 M at int4, bench_llm.py counts)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rvvkit  # noqa: E402
import peer_rvvkit as R  # noqa: E402
from llm_forms import COUNT_FORMS, count_model  # noqa: E402
from rvvkit.measure.cycle_model import weighted_instructions  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402
from rvvkit.runtime.counting import icount  # noqa: E402
from rvvkit.zoo import llm as zoo_llm  # noqa: E402

GEN = (2, 6)
LAYERS = 2


def config():
    return zoo_llm.replace(zoo_llm.SMALL["qwen2.5-0.5b"], **COUNT_FORMS["int4"], layers=LAYERS,
                           intermediate=256, vocab=512, tied=False, max_seq=2112)


def run(lives, vlen: int, isa: str) -> list:
    cfg = config()
    art = R.build(count_model(cfg), "fp32", max_seq=cfg.max_seq, prefill=16)
    doc = []
    with rvvkit.load(art, on="qemu", vlen=vlen, threads=1, isa=isa) as sess:
        for live in lives:
            a = sess.generation_counts([1] * live, GEN[0])
            b = sess.generation_counts([1] * live, GEN[1])
            per = weighted_instructions({k: b[k] - a[k] for k in icount.COUNT_KEYS})
            doc.append({"live": live, "weighted_per_token": per / (GEN[1] - GEN[0]),
                        "vlen": vlen, "isa": isa, "layers": LAYERS})
            print(f"  {live} live positions done", file=sys.stderr, flush=True)
    base = doc[0]["weighted_per_token"]
    rows = [[d["live"], f"{d['weighted_per_token'] / 1e6:.3f}",
             f"{(d['weighted_per_token'] - base) / LAYERS / 1e6:.3f}",
             f"{24 * (d['weighted_per_token'] - base) / LAYERS / 1e6:.2f}"] for d in doc]
    print(f"Qwen2.5-0.5B's attention in a {LAYERS}-layer int4 model, QEMU (ISA profile {isa}, "
          f"VLEN {vlen}), one thread: millions of LMUL-weighted instructions per generated "
          f"token")
    print(table(["live positions", "per token", f"added per layer vs {lives[0]}",
                 "x 24 layers"], rows, align="rrrr"))
    return doc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lives", default="64,512,2048")
    p.add_argument("--vlen", type=int, default=256)
    p.add_argument("--isa", default="k1")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    doc = run([int(x) for x in a.lives.split(",")], a.vlen, a.isa)
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
