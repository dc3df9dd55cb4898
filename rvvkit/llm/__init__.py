"""Language models (decoders with key/value caches), around the ordinary build pipeline.

- `decoder.py`: the roles of a decoder's inputs and outputs (ids, caches, logits) in the meta;
- `prefill.py`: the second plan of a decoder artifact, for chunks of prompt tokens;
- `generate.py`: the generation loop (prompt chunks, greedy or sampled tokens) every session runs;
- `quantize.py`: `rvvkit quantize`, an ONNX model's MatMul weights and embeddings to 4/8 bits.

The format of 4/8-bit weights is an operator's semantics (rvvkit/ops/llm/nbits.py) and the
kernels live in the code generator (rvvkit/codegen/kernels/llm/); this package emits no kernel."""
