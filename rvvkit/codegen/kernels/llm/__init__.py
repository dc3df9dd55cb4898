"""Kernels of transformer and decoder blocks (semantics: rvvkit/ops/llm/ and the Attention op):
`attention.py` (ai.onnx Attention, direct over a key/value cache's live prefix), `blocks.py`
(RMS normalisation with its skip sum, and GroupQueryAttention over a cache read up to its live
length), `rope.py` (RotaryEmbedding
and SwiGLU), and the 4/8-bit weights: `nbits_layout.py` (the column layout), `nbits_f32.py` and
`nbits_int8.py` (MatMulNBits with float or int8 activations), `gather_bq.py`
(GatherBlockQuantized embeddings)."""
