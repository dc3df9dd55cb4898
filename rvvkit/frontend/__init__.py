"""ONNX to the Graph IR: `onnx.py` reads a model (opsets upgraded, initializers and external
data, every problem found reported at once), `types.py` and `schema.py` check types and node
schemas, `stored_floats.py` widens float16/float64 tensors to float32 where they are stored,
and `decoder_dims.py` fixes a decoder's run-time axes to the bounds `--max-seq` gives."""
