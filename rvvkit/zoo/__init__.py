"""Model generators for the tests, the examples and the benchmarks; the pipeline never imports
them.

- `light.py`: the nine real architectures of the `onnx` wheel with seeded random weights
  (`python3 -m rvvkit.zoo NAME OUT.onnx`), re-exported here;
- `llm.py`: small random decoders as onnxruntime-genai's builder writes them
  (`python3 -m rvvkit.zoo.llm NAME OUT.onnx`);
- `llm_onnx.py`: the same decoders with ONNX opset 23's Attention;
- `quant.py`: the light models quantized by `onnxruntime.quantization` (QDQ, QOperator,
  dynamic)."""
from .light import (LIGHT_MODELS, expose_logits, light_dir, light_model, light_model_path,
                    main, randomize_weights, sample_inputs)

__all__ = ["LIGHT_MODELS", "expose_logits", "light_dir", "light_model", "light_model_path",
           "main", "randomize_weights", "sample_inputs"]
