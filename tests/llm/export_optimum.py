"""Regenerates the stored optimum export: tests/models/llm/optimum/qwen2_sdpa/ (model.onnx, the
generation_config.json and config.json it wrote, and versions.json: the tools that made it).

A tiny Qwen2 (seeded random weights, transformers' default SDPA attention) exported as optimum's
users export a decoder:

    optimum-cli export onnx --model HF_DIR --task text-generation-with-past OUT

Its attention is SDPA's: q and k each scaled, repeat_kv, a boolean mask made -inf by Where,
Softmax, then Where(IsNaN(p), 0, p) before the product with v; the caches grow by Concat.

Developer tool (torch, transformers, optimum-onnx); rvvkit and its tests never need them (the
tests take their reference from onnxruntime on the stored file): from the repository root,
python3 tests/llm/export_optimum.py"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from export_genai import hf_model   # this folder: the script runs as tests/llm/...

OUT = Path(__file__).resolve().parents[1] / "models" / "llm" / "optimum" / "qwen2_sdpa"


def main() -> int:
    from importlib import metadata

    import onnx
    import torch
    import transformers
    with tempfile.TemporaryDirectory() as tmp:
        hf, out = Path(tmp) / "hf", Path(tmp) / "onnx"
        hf_model(hf)        # the same tiny Qwen2 as the genai builder's fixtures
        subprocess.run(["optimum-cli", "export", "onnx", "--model", str(hf), "--task",
                        "text-generation-with-past", str(out)], check=True, capture_output=True)
        OUT.mkdir(parents=True, exist_ok=True)
        onnx.save(onnx.load(str(out / "model.onnx")), str(OUT / "model.onnx"))
        for name in ("generation_config.json", "config.json"):
            shutil.copy(out / name, OUT / name)
        versions = {"optimum": metadata.version("optimum"),
                    "optimum-onnx": metadata.version("optimum-onnx"),
                    "transformers": transformers.__version__, "torch": torch.__version__,
                    "command": "optimum-cli export onnx --model HF_DIR --task "
                               "text-generation-with-past OUT"}
        (OUT / "versions.json").write_text(json.dumps(versions, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
