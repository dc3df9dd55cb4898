"""A decoder's cache is kept at its --max-seq bound, but a generated token's attention reads
only the live prefix: under QEMU the exact instruction count per generated token does not grow
with the bound, in every form whose attention rvvkit runs itself (onnxruntime-genai's
GroupQueryAttention, ONNX opset-23 Attention with past/present)."""
import pytest

import rvvkit
from qemu_support import needs_qemu
from rvvkit import zoo_llm, zoo_llm_onnx

CFG = zoo_llm.DecoderConfig(vocab=64, hidden=128, heads=4, kv_heads=2, layers=1,
                            intermediate=32, qkv_bias=False)
FORMS = {"genai": zoo_llm.decoder, "onnx23": zoo_llm_onnx.decoder}


def per_token(model, bound: int) -> int:
    """Instructions of tokens 4..11 after a 4-token prompt (two counted runs' difference)."""
    with rvvkit.load(rvvkit.build(model, max_seq=bound), on="qemu", vlen=128,
                     threads=1) as sess:
        a = sess.generation_counts([1, 2, 3, 4], 4)
        b = sess.generation_counts([1, 2, 3, 4], 12)
    return (b["insns"] - a["insns"]) // 8


@needs_qemu
@pytest.mark.parametrize("form", sorted(FORMS))
def test_work_per_token_does_not_grow_with_the_bound(form):
    model = FORMS[form](CFG)
    small, large = per_token(model, 32), per_token(model, 256)
    # What stays per position of the bound is the mask's own work (its count of ones, about
    # 19 instructions a position here); the attention over the whole bound cost 366 a position
    # (4 heads of 32: scores, softmax, weighted values), measured before it read the prefix.
    assert (large - small) / (256 - 32) < 40, (small, large)
