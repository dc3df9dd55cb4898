"""The decoders of rvvkit.zoo.llm in the third form users export: standard ONNX opset 23 only,
with Attention taking past_key/past_value and returning present_key/present_value (the cache
grows by the new token each step, as in transformers' exports), RotaryEmbedding on [batch,
heads, seq, head] and RMSNormalization. Built with onnx.helper alone: no torch.

Interface: input_ids int64 [batch_size, sequence_length], attention_mask int64 [batch_size,
total_sequence_length], position_ids int64 [batch_size, sequence_length],
past_key_values.{i}.key|value float32 [batch_size, kv_heads, past_sequence_length, head]
-> logits [batch_size, sequence_length, vocab], present.{i}.key|value (total length)."""
from __future__ import annotations

import numpy as np

from ..llm.proto_builder import cache_io
from .llm import DecoderConfig, _Builder, _mlp, _rope_caches, qkv, to_half


def _heads(b: _Builder, t: str, heads: int, head: int) -> str:
    """[B, S, heads * head] -> [B, heads, S, head]."""
    shape = b.const(f"{t}/shape", np.array([0, 0, heads, head], np.int64))
    r = b.node("Reshape", [t, shape], [f"{t}/split"])[0]
    return b.node("Transpose", [r], [f"{t}/bnsh"], perm=[0, 2, 1, 3])[0]


def _attention(b: _Builder, i: int, x: str, cos: str, sin: str, mask: str) -> str:
    cfg = b.cfg
    q, k, v = qkv(b, i, x)
    q = _heads(b, q, cfg.heads, cfg.head)
    k = _heads(b, k, cfg.kv_heads, cfg.head)
    v = _heads(b, v, cfg.kv_heads, cfg.head)
    q, k = (b.node("RotaryEmbedding", [t, cos, sin, "position_ids"], [f"{t}/rope"],
                   interleaved=0)[0] for t in (q, k))
    past = [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    present = [f"present.{i}.key", f"present.{i}.value"]
    y = b.node("Attention", [q, k, v, mask, *past], [f"layers.{i}.attn/y", *present],
               scale=float(cfg.head ** -0.5))[0]
    t = b.node("Transpose", [y], [f"{y}/bsnh"], perm=[0, 2, 1, 3])[0]
    flat = b.node("Reshape", [t, b.const(f"{y}/shape", np.array([0, 0, -1], np.int64))],
                  [f"layers.{i}.attn/out"])[0]
    return b.linear(flat, cfg.hidden, cfg.hidden, f"layers.{i}.attn.o_proj")


def _norm(b: _Builder, x: str, name: str) -> str:
    return b.node("RMSNormalization", [x, b.norm_weight(name)], [f"{name}/out"], axis=-1,
                  epsilon=b.cfg.eps)[0]


def _causal_mask(b: _Builder) -> str:
    """bool [batch, 1, seq, total]: query i (at position total - seq + i) attends to the keys
    the attention mask marks live, up to its own position (several new tokens at once are a
    prompt, and each sees only those before it)."""
    from onnx import TensorProto

    def scalar(name: str, value: int) -> str:
        return b.const(name, np.array(value, np.int64))

    def length(of: str, axis: int) -> str:
        dims = b.node("Shape", [of], [f"mask/{of}_shape"])[0]
        return b.node("Gather", [dims, scalar(f"mask/{of}_axis", axis)],
                      [f"mask/{of}_len"], axis=0)[0]

    total, seq = length("attention_mask", 1), length("input_ids", 1)
    one, zero = scalar("mask/one", 1), scalar("mask/zero", 0)
    keys = b.node("Range", [zero, total, one], ["mask/keys"])[0]
    first = b.node("Sub", [total, seq], ["mask/first_query"])[0]
    queries = b.node("Range", [first, total, one], ["mask/queries"])[0]
    column = b.node("Unsqueeze", [queries, b.const("mask/col_axes", np.array([1], np.int64))],
                    ["mask/queries_col"])[0]
    causal = b.node("LessOrEqual", [keys, column], ["mask/causal"])[0]
    live = b.node("Cast", ["attention_mask"], ["mask/bool"], to=TensorProto.BOOL)[0]
    live = b.node("Unsqueeze", [live, b.const("mask_axes", np.array([1, 2], np.int64))],
                  ["mask/b11t"])[0]
    return b.node("And", [live, causal], ["mask/bnst"])[0]


def decoder(cfg: DecoderConfig = DecoderConfig(), seed: int = 0, name: str = "decoder"):
    """The onnx ModelProto (opset 23) of a random decoder of configuration `cfg`."""
    from onnx import TensorProto, helper
    b = _Builder(cfg, seed)
    mask = _causal_mask(b)
    cos, sin = (b.const(n, c) for n, c in zip(("cos_cache", "sin_cache"), _rope_caches(cfg)))
    table = (0.5 * b.rng.standard_normal((cfg.vocab, cfg.hidden))).astype(np.float32)
    emb = b.const("embed_tokens.weight", table)
    h = b.node("Gather", [emb, "input_ids"], ["embed/out"])[0]
    for i in range(cfg.layers):
        attn = _attention(b, i, _norm(b, h, f"layers.{i}.input_norm"), cos, sin, mask)
        h = b.node("Add", [h, attn], [f"layers.{i}.attn/residual"])[0]
        mlp = _mlp(b, i, _norm(b, h, f"layers.{i}.post_attention_norm"))
        h = b.node("Add", [h, mlp], [f"layers.{i}.mlp/residual"])[0]
    b.linear(_norm(b, h, "final_norm"), cfg.hidden, cfg.vocab, "lm_head",
             scale=2.0 * cfg.hidden ** -0.5, w=np.ascontiguousarray(table.T) if cfg.tied else None)
    b.nodes[-1].output[0] = "logits"
    f32, i64, batch, seq = TensorProto.FLOAT, TensorProto.INT64, "batch_size", "sequence_length"
    inputs = [helper.make_tensor_value_info("input_ids", i64, [batch, seq]),
              helper.make_tensor_value_info("attention_mask", i64,
                                            [batch, "total_sequence_length"]),
              helper.make_tensor_value_info("position_ids", i64, [batch, seq])]
    past, present = cache_io(cfg.layers, cfg.kv_heads, cfg.head)
    outputs = [helper.make_tensor_value_info("logits", f32, [batch, seq, cfg.vocab])] + present
    graph = helper.make_graph(b.nodes, name, inputs + past, outputs, b.inits)
    opsets = [helper.make_opsetid("", 23)] + \
        ([helper.make_opsetid("com.microsoft", 1)] if cfg.bits else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="rvvkit.zoo.llm_onnx")
    model.ir_version = 10
    return to_half(model) if cfg.half else model
