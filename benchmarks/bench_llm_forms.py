"""What keeping a growing cache at its bound costs: LMUL-weighted instructions per generated
token under QEMU (VLEN 256, one thread) for the same llama-tiny decoder in onnxruntime-genai's
form (GroupQueryAttention reads the live prefix, from seqlens_k) and in the ONNX opset-23
Attention form (the live prefix from the mask's count of ones; what a bound position still
costs is that count), at bounds of 64 and 256 positions: tokens 5-12 after a 4-token prompt,
as the difference of two counted runs (8 and 16 new tokens).

    python3 benchmarks/bench_llm_forms.py"""
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


def main() -> None:
    cfg = zoo_llm.SMALL["llama-tiny"]
    print("| bound | form | M weighted / token | M instructions / token |\n|---|---|---|---|")
    for bound in (64, 256):
        for name, model in (("genai GroupQueryAttention", zoo_llm.decoder(cfg)),
                            ("ONNX Attention", zoo_llm_onnx.decoder(cfg))):
            w, n = per_token(model, bound)
            print(f"| {bound} | {name} | {w / 1e6:.3f} | {n / 1e6:.3f} |")


if __name__ == "__main__":
    main()
