"""A decoder's cache is kept at its --max-seq bound, but a generated token's attention reads
only the live prefix: under QEMU the exact instruction count per generated token grows with the
bound by only the mask's own work, in every form (onnxruntime-genai's GroupQueryAttention,
ONNX opset-23 Attention with past/present, and transformers' decomposed attention, eager or
SDPA (optimum's export), which passes/cached_attention.py makes one Attention)."""
from pathlib import Path

import onnx
import pytest

import rvvkit
from qemu_support import needs_qemu
from rvvkit.zoo import llm as zoo_llm, llm_onnx as zoo_llm_onnx

CFG = zoo_llm.DecoderConfig(vocab=64, hidden=128, heads=4, kv_heads=2, layers=1,
                            intermediate=32, qkv_bias=False)
STORED = Path(__file__).resolve().parents[1] / "models" / "llm"
# form -> (model, most instructions a bound position may add per generated token). Measured
# on these models before the attention read the live prefix, a position cost 366 (genai's
# shape, ONNX form) and 346 (the stored transformers Llama: 2 layers of 2 heads of 32); 18.6
# and 46 while each cache write still counted the mask's ones itself. What stays is the mask's
# work: its count of ones (once a run: 11.5 and 28.5), and the exported mask arithmetic.
FORMS = {"genai": (lambda: zoo_llm.decoder(CFG), 20),
         "onnx23": (lambda: zoo_llm_onnx.decoder(CFG), 20),
         "transformers": (lambda: onnx.load(str(STORED / "llama_tf.onnx")), 40),
         # a float16 export: its probabilities' round trip through half is fused away too
         "transformers_f16": (lambda: onnx.load(str(STORED / "qwen2_tf_f16.onnx")), 40),
         # optimum's SDPA export (a NaN guard after the softmax; 429 a position before it
         # was recognised)
         "optimum_sdpa": (lambda: onnx.load(str(STORED / "optimum" / "qwen2_sdpa" /
                                                 "model.onnx")), 40)}


def per_token(model, bound: int) -> int:
    """Instructions of tokens 4..11 after a 4-token prompt (two counted runs' difference)."""
    with rvvkit.load(rvvkit.build(model, max_seq=bound), on="qemu", vlen=128,
                     threads=1) as sess:
        a = sess.generation_counts([1, 2, 3, 4], 4)
        b = sess.generation_counts([1, 2, 3, 4], 12)
    return (b["insns"] - a["insns"]) // 8


@needs_qemu
@pytest.mark.parametrize("form", sorted(FORMS))
def test_work_per_token_grows_with_the_bound_only_by_the_masks(form):
    make, most = FORMS[form]
    model = make()
    small, large = per_token(model, 32), per_token(model, 256)
    assert (large - small) / (256 - 32) < most, (small, large)
