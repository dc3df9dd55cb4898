"""onnxruntime-genai's model builder as its users run it, at Qwen2.5-0.5B's shape: a Qwen2 of
that configuration (seeded random weights, saved by transformers), the builder's CPU int4
default, then `rvvkit build` and greedy generation on the host and under QEMU against
onnxruntime-genai's own generator.

    python3 benchmarks/genai_builder_05b.py [--work DIR] [--tokens 16] [--vlen 256]

Needs torch, transformers and onnxruntime-genai (measuring tools, never rvvkit's
dependencies); the tests keep tiny builder outputs instead (tests/llm/export_genai.py)."""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "llm"))

from export_genai import greedy  # noqa: E402  (onnxruntime-genai's own generator)

PROMPT = [5, 17, 33, 2, 99, 1000, 20000]


def hf_model(where: Path) -> None:
    """Qwen2.5-0.5B's configuration (tied embedding, 32768 positions) with seeded weights."""
    import torch
    import transformers
    cfg = transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
        eos_token_id=151645, bos_token_id=151643)
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(cfg).save_pretrained(str(where))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", default="/tmp/rvvkit-genai-05b", help="where the files go")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--vlen", type=int, default=256)
    args = p.parse_args(argv)
    import rvvkit
    work = Path(args.work)
    hf, out, art = work / "hf", work / "int4", work / "model.rvv"
    if not (hf / "config.json").exists():
        hf_model(hf)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf),
                    "-o", str(out), "-p", "int4", "-e", "cpu"], check=True,
                   stdout=subprocess.DEVNULL)
    print(f"builder: {time.perf_counter() - t0:.0f} s")
    want = greedy(out, PROMPT, args.tokens)
    res = subprocess.run([sys.executable, "-m", "rvvkit", "build", str(out / "model.onnx"),
                          "--max-seq", "256", "-o", str(art)], capture_output=True, text=True)
    print(res.stderr.strip())
    if res.returncode:
        return res.returncode
    same = True
    for on, options in (("host", {}), ("qemu", {"vlen": args.vlen})):
        with rvvkit.load(str(art), on=on, **options) as sess:
            got = sess.generate(PROMPT, len(want), eos=[]).tokens
        same &= got == want
        print(f"{on} {options or ''}: {'the same' if got == want else 'OTHER'} "
              f"{len(want)} tokens as onnxruntime-genai ({got})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
