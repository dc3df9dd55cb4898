"""Write the generated C, CUDA and meta of a fixed set of builds into a folder, so a refactoring
can show that it changes no generated code: snapshot before and after, then `diff -r`.

    python3 scripts/codegen_snapshot.py /tmp/before          # on the old commit
    python3 scripts/codegen_snapshot.py /tmp/after           # on the new one
    diff -r /tmp/before /tmp/after

The set: three light models (one at a fixed VLEN), squeezenet quantized three ways, eight stored
exports (recurrent, attention, detector, transformer encoder) and six decoders (genai forms at
float32, 4 and 8 bits, with an attention mask; ONNX opset 23; a transformers export), each with
its prefill plan. Names given after the folder pick a subset. Generated C names the Python
module that wrote a helper in comments, so a move of such a module shows in the diff as a
changed path in a comment and nothing else."""
import hashlib
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import rvvkit

try:                        # the layout since the package was grouped by purpose
    from rvvkit.zoo import llm_onnx
    from rvvkit.zoo.light import light_model
    from rvvkit.zoo.llm import SMALL, decoder
    from rvvkit.zoo.quant import quantized
except ImportError:         # the flat layout before it, so an old commit can be snapshot too
    import rvvkit.zoo_llm_onnx as llm_onnx
    from rvvkit.zoo import light_model
    from rvvkit.zoo_llm import SMALL, decoder
    from rvvkit.zoo_quant import quantized

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "tests" / "models"
EXPORTS = ("lstm_kws_legacy", "gru_kws_dynamo", "bert_legacy", "yolo_dynamo",
           "mobilenet_v3_small_legacy", "detr_legacy", "whisper_encoder_dynamo",
           "convnext_legacy")


def cases(tmp: str):
    qwen, llama = SMALL["qwen2-tiny"], SMALL["llama-tiny"]
    out = {
        "squeezenet": lambda: (light_model("squeezenet"), {}),
        "squeezenet_v256": lambda: (light_model("squeezenet"), {"vlen": 256}),
        "inception_v2": lambda: (light_model("inception_v2"), {}),
        "dec_f32": lambda: (decoder(qwen), {"max_seq": 64}),
        "dec_q4": lambda: (decoder(replace(qwen, bits=4)), {"max_seq": 64}),
        "dec_q8_acc4": lambda: (decoder(replace(llama, bits=8, accuracy=4)), {"max_seq": 64}),
        "dec_q4_mask": lambda: (decoder(replace(qwen, bits=4, mask=True)), {"max_seq": 64}),
        "dec_onnx23": lambda: (llm_onnx.decoder(qwen), {"max_seq": 64}),
        "qwen2_tf": lambda: (str(STORED / "llm" / "qwen2_tf.onnx"), {"max_seq": 64}),
    }
    for name in EXPORTS:
        out[name] = lambda name=name: (str(STORED / f"{name}.onnx"), {})
    for fmt in ("qdq", "qop", "dynamic"):
        out[f"squeezenet_{fmt}"] = lambda fmt=fmt: (quantized("squeezenet", fmt, tmp)[0], {})
    return out


def main(argv) -> int:
    if not argv:
        print(__doc__)
        return 2
    folder, only = Path(argv[0]), set(argv[1:])
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases(tmp).items():
            if only and name not in only:
                continue
            model, options = make()
            art = rvvkit.build(model, **options)
            (folder / f"{name}.c").write_text(art.c_source)
            (folder / f"{name}.cu").write_text(art.cu_source or "")
            (folder / f"{name}.meta.json").write_text(
                json.dumps(art.meta, indent=1, sort_keys=True, default=str))
            (folder / f"{name}.weights.sha256").write_text(
                hashlib.sha256(bytes(art.weights)).hexdigest() + "\n")
            print(f"{name}: {len(art.c_source.splitlines())} lines of C", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
