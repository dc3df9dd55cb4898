"""What keeping a growing cache at its bound costs: LMUL-weighted instructions per generated
token under QEMU (VLEN 256, one thread) for the same llama-tiny decoder in onnxruntime-genai's
form (GroupQueryAttention reads the live prefix, from seqlens_k) and in the ONNX opset-23
Attention form (the live prefix from the mask's count of ones; what a bound position still
costs is that count), at bounds of 64 and 256 positions: tokens 5-12 after a 4-token prompt,
as the difference of two counted runs (8 and 16 new tokens). Beside them, the stored exports
of a tiny Qwen2 by the tools users run (tests/models/llm: optimum's SDPA export, whose caches
grow by Concat, and onnxruntime-genai's builder at int4), each against its own bound.

    python3 benchmarks/bench_llm_forms.py"""
from pathlib import Path

import onnx

import rvvkit
from rvvkit.measure import cycle_model
from rvvkit.zoo import llm as zoo_llm, llm_onnx as zoo_llm_onnx


def per_token(model, bound: int):
    """(weighted, plain) instructions per generated token."""
    with rvvkit.load(rvvkit.build(model, max_seq=bound), on="qemu", vlen=256, threads=1) as s:
        a = s.generation_counts([1, 2, 3, 4], 8)
        b = s.generation_counts([1, 2, 3, 4], 16)
    diff = {k: b[k] - a[k] for k in b if isinstance(b[k], int)}
    return cycle_model.weighted_instructions(diff) / 8, diff["insns"] / 8


STORED = Path(__file__).resolve().parents[1] / "tests" / "models" / "llm"


def main() -> None:
    cfg = zoo_llm.SMALL["llama-tiny"]
    forms = (("llama-tiny, genai GroupQueryAttention", zoo_llm.decoder(cfg)),
             ("llama-tiny, ONNX Attention", zoo_llm_onnx.decoder(cfg)),
             ("tiny Qwen2, optimum SDPA export", onnx.load(
                 str(STORED / "optimum" / "qwen2_sdpa" / "model.onnx"))),
             ("tiny Qwen2, genai builder int4", onnx.load(
                 str(STORED / "genai" / "qwen2_int4" / "model.onnx"))))
    print("| bound | form | M weighted / token | M instructions / token |\n|---|---|---|---|")
    for bound in (64, 256):
        for name, model in forms:
            w, n = per_token(model, bound)
            print(f"| {bound} | {name} | {w / 1e6:.3f} | {n / 1e6:.3f} |")


if __name__ == "__main__":
    main()
