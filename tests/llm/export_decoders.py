"""Regenerates the stored transformers decoders: tests/models/llm/<name>.onnx, one decoding step
with a key/value cache as users export it from transformers (attention, RoPE and grouped-query
heads decomposed into MatMul/Softmax/Concat/Expand/...; the cache grows by Concat).

Developer tool; torch is never needed to run rvvkit or its tests. One-time set-up of a venv
outside the repository (CPU torch, no torchvision; TOOLCHAIN_NOTES.md):

    python3 -m venv /opt/tvenv && /opt/tvenv/bin/pip install torch==2.13.0 transformers onnx

then, from the repository root:  /opt/tvenv/bin/python tests/llm/export_decoders.py

Each config gets seeded random weights (norm scales perturbed so none is an identity). The
export is the legacy (TorchScript) exporter at opset 17 with transformers' DynamicCache built
from the past tensors, the input and output names optimum uses:
  input_ids [batch_size, sequence_length], attention_mask [batch_size, total_sequence_length],
  position_ids [batch_size, sequence_length],
  past_key_values.{i}.key|value [batch_size, kv_heads, past_sequence_length, head]
  -> logits [batch_size, sequence_length, vocab], present.{i}.key|value (total length)."""
from __future__ import annotations

import sys
from pathlib import Path

import onnx
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
from transformers.cache_utils import DynamicCache

OUT = Path(__file__).resolve().parents[1] / "models" / "llm"
COMMON = dict(vocab_size=256, max_position_embeddings=512, rms_norm_eps=1e-6,
              attn_implementation="eager", use_cache=True)
CONFIGS = {
    # Qwen2: q/k/v biases, GQA (4 query heads on 2 key/value heads)
    "qwen2_tf": (Qwen2ForCausalLM, Qwen2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=False, **COMMON)),
    # Llama with one key/value head (MQA) and a head of 32
    "llama_tf": (LlamaForCausalLM, LlamaConfig(
        hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, rope_theta=10000.0, tie_word_embeddings=False, **COMMON)),
    # SmolLM2-shaped: three query heads on one key/value head, tied embeddings
    "smollm_tf": (LlamaForCausalLM, LlamaConfig(
        hidden_size=48, intermediate_size=128, num_hidden_layers=3, num_attention_heads=3,
        num_key_value_heads=1, rope_theta=10000.0, tie_word_embeddings=True, **COMMON)),
}
# torch's dynamo exporter (torch.export, then onnxscript), as transformers' own ONNX docs now
# run it, with transformers' default SDPA attention: at opset 18 decomposed (keys transposed in
# 3-D, a NaN guard), at opset 23 the ONNX Attention operator fed by repeat_kv. Each name:
# (the config it exports, the opset)
DYNAMO = {"qwen2_dynamo": ("qwen2_tf", 18), "llama_dynamo23": ("llama_tf", 23)}
# the Qwen2 config in float16 (model.half(): weights, caches and logits float16, as
# `optimum-cli export onnx --dtype fp16` writes a decoder)
CONFIGS["qwen2_tf_f16"] = CONFIGS["qwen2_tf"]


class Step(torch.nn.Module):
    """One decoding step over plain tensors: (ids, mask, positions, *past) -> (logits, *present)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.layers = model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


def export(name: str) -> Path:
    base, opset = DYNAMO.get(name, (name, 17))
    cls, cfg = CONFIGS[base]
    torch.manual_seed(sum(map(ord, name)))
    dtype = torch.float16 if name.endswith("_f16") else torch.float32
    model = cls(cfg).eval()
    if name in DYNAMO:
        model.set_attn_implementation("sdpa")
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    model = model.to(dtype)
    kvh = cfg.num_key_value_heads
    head = cfg.hidden_size // cfg.num_attention_heads
    past_len, seq = 3, 2   # neither 1: the tracer must not specialise either length
    ids = torch.randint(0, cfg.vocab_size, (1, seq))
    mask = torch.ones(1, past_len + seq, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + seq).unsqueeze(0)
    past = [torch.randn(1, kvh, past_len, head, dtype=dtype)
            for _ in range(2 * cfg.num_hidden_layers)]
    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_out = ["logits"]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    for i in range(cfg.num_hidden_layers):
        for kind in ("key", "value"):
            names_in.append(f"past_key_values.{i}.{kind}")
            names_out.append(f"present.{i}.{kind}")
            axes[names_in[-1]] = {0: "batch_size", 2: "past_sequence_length"}
            axes[names_out[-1]] = {0: "batch_size", 2: "total_sequence_length"}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.onnx"
    with torch.no_grad():
        if name in DYNAMO:
            _dynamo(Step(model), (ids, mask, pos, *past), path, opset, names_in, names_out,
                    axes)
        else:
            torch.onnx.export(Step(model), (ids, mask, pos, *past), str(path), dynamo=False,
                              opset_version=17, input_names=names_in, output_names=names_out,
                              dynamic_axes=axes)
    proto = onnx.load(str(path))
    proto.producer_name = "transformers-dynamo-export" if name in DYNAMO else \
        "transformers-legacy-export"
    proto.producer_version = ""
    del proto.metadata_props[:]
    onnx.save(proto, str(path))
    return path


def _dynamo(step, args, path: Path, opset: int, names_in, names_out, axes) -> None:
    """torch.onnx.export(dynamo=True): the symbolic axes as torch.export dimensions, the
    caches (forward's *past) as one tuple of them."""
    dims = {}

    def spec(name):
        return {axis: dims.setdefault(sym, torch.export.Dim(sym))
                for axis, sym in axes[name].items()}
    shapes = [spec(n) for n in names_in]
    torch.onnx.export(step, args, str(path), dynamo=True, opset_version=opset,
                      input_names=names_in, output_names=names_out,
                      dynamic_shapes=(*shapes[:3], tuple(shapes[3:])), external_data=False)


def main(argv=None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(CONFIGS) + list(DYNAMO)
    for name in names:
        path = export(name)
        ops = sorted({n.op_type for n in onnx.load(str(path)).graph.node})
        print(f"{path}: {path.stat().st_size} bytes; ops {', '.join(ops)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
