"""Regenerates the stored onnxruntime-genai builder outputs: tests/models/llm/genai/<name>/
(model.onnx, the builder's genai_config.json, and reference.json: a prompt, onnxruntime-genai's
own greedy tokens for it, and the tool versions that made them).

A tiny Qwen2 (seeded random weights) saved by transformers, then the builder as its users run
it for a CPU, with its defaults (Q, K and V packed into one GroupQueryAttention input, caches
with a symbolic head dimension, `kv_cache_dim`):

    python -m onnxruntime_genai.models.builder -i HF_DIR -o OUT -p int4|int8|fp32 -e cpu

Developer tool (torch, transformers and onnxruntime-genai); rvvkit and its tests never need
them: from the repository root,  python3 tests/llm/export_genai.py"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "models" / "llm" / "genai"
PRECISIONS = ("int4", "int8", "fp32", "fp16")
PROMPT = [5, 17, 33, 2, 99]
NEW_TOKENS = 64


def hf_model(where: Path) -> None:
    import torch
    import transformers
    cfg = transformers.Qwen2Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=False, eos_token_id=7, bos_token_id=1)
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(cfg).save_pretrained(str(where))


def ort_reference(folder: Path) -> list:
    """onnxruntime's greedy tokens, a step at a time (tests/ort_decoder.py), for the fp16
    model, on which onnxruntime-genai 0.18 itself fails (a buffer reused at another shape);
    plain onnxruntime runs it once the graph's value_info and output dim names are dropped."""
    import onnx
    import onnxruntime as ort
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ort_decoder import ort_greedy
    model = onnx.load(str(folder / "model.onnx"))
    del model.graph.value_info[:]
    for out in model.graph.output:
        for dim in out.type.tensor_type.shape.dim:
            dim.dim_param = ""
    head = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]["head_size"]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return ort_greedy(sess, PROMPT, NEW_TOKENS, len(PROMPT) + NEW_TOKENS, growing=True,
                      head=head)[0]


def greedy(folder: Path, prompt=PROMPT, new_tokens: int = NEW_TOKENS) -> list:
    """onnxruntime-genai's own greedy generation of `new_tokens` after `prompt` (it stops
    early at the config's eos ids)."""
    import onnxruntime_genai as og
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt) + new_tokens, do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(prompt)
    tokens = []
    while not gen.is_done():
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
    return tokens


def versions() -> dict:
    import onnxruntime
    import onnxruntime_genai
    import torch
    import transformers
    return {"onnxruntime-genai": onnxruntime_genai.__version__,
            "onnxruntime": onnxruntime.__version__, "transformers": transformers.__version__,
            "torch": torch.__version__}


def main() -> int:
    import onnx
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf"
        hf_model(hf)
        for precision in PRECISIONS:
            built = Path(tmp) / precision
            subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i",
                            str(hf), "-o", str(built), "-p", precision, "-e", "cpu", "-c",
                            str(Path(tmp) / "cache")], check=True, capture_output=True)
            dest = OUT / f"qwen2_{precision}"
            dest.mkdir(parents=True, exist_ok=True)
            onnx.save(onnx.load(str(built / "model.onnx")), str(dest / "model.onnx"))
            (dest / "genai_config.json").write_text((built / "genai_config.json").read_text())
            by_genai = precision != "fp16"
            doc = {"prompt": PROMPT,
                   "tokens": greedy(built) if by_genai else ort_reference(built),
                   "reference": "onnxruntime-genai" if by_genai else "onnxruntime",
                   "versions": versions(),
                   "command": f"python -m onnxruntime_genai.models.builder -i HF_DIR -o OUT "
                              f"-p {precision} -e cpu"}
            (dest / "reference.json").write_text(json.dumps(doc, indent=1) + "\n")
            print(f"wrote {dest}: {doc['tokens']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
