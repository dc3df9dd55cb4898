"""Small decoder-only language models with seeded random weights, in the form onnxruntime-genai's
model builder writes (com.microsoft GroupQueryAttention with rotary inside, MatMulNBits or
float MatMul projections, SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization),
for tests, examples and benchmarks. Built with onnx.helper alone: no torch.

Interface of every model (one decoding step over S new tokens; the cache is shared past/present,
as onnxruntime-genai runs it):
  input_ids int64 [batch_size, sequence_length], seqlens_k int32 [batch_size] (= tokens so
  far including these, minus one), total_sequence_length int32 [] (= seqlens_k + 1),
  past_key_values.{i}.key|value float32 [batch_size, kv_heads, past_sequence_length, head]
  -> logits float32 [batch_size, sequence_length, vocab], present.{i}.key|value (the past's
  buffer with the new keys and values written at their positions). `max_seq` sizes the rotary
  caches (the longest context); `rvvkit build --max-seq N` (N <= max_seq) fixes the cache."""
from __future__ import annotations

from dataclasses import dataclass, replace  # noqa: F401 (replace: variants of SMALL)
from typing import Tuple

import numpy as np

from ..llm.proto_builder import ProtoBuilder, cache_io
from ..ops.llm import nbits


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int = 256
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    layers: int = 2
    intermediate: int = 128
    max_seq: int = 128
    rope_theta: float = 10000.0
    eps: float = 1e-6
    qkv_bias: bool = True      # Qwen2 has q/k/v biases; Llama has none
    bits: int = 0              # 0: float MatMul; 4 or 8: MatMulNBits
    block: int = 32
    zero_points: bool = False
    accuracy: int = 0          # MatMulNBits accuracy_level: 4 = int8 activations (genai's CPU int4)
    # an attention_mask input [batch, total_sequence_length] from which the graph computes
    # seqlens_k and the total length, as onnxruntime-genai's builder writes it (else those two
    # are inputs)
    mask: bool = False
    # RoPE as separate com.microsoft RotaryEmbedding nodes fed by a position_ids input (the
    # builder's older form), instead of inside GroupQueryAttention
    rotary_op: bool = False
    # the LM head is the token embedding (Qwen2.5-0.5B, SmolLM2, Llama-3.2-1B tie them): its
    # weight is the table's transpose, quantized alike, as the builder writes a tied model
    tied: bool = False
    # MatMulNBits scales rounded to bfloat16 values, as `rvvkit quantize` writes them
    bf16_scales: bool = False
    # float16 weights, scales, logits and key/value caches, as the builder writes a model
    # for GPUs (precision fp16)
    half: bool = False

    @property
    def head(self) -> int:
        return self.hidden // self.heads


SMALL = {
    "qwen2-tiny": DecoderConfig(),
    "llama-tiny": DecoderConfig(vocab=320, hidden=96, heads=6, kv_heads=2, layers=2,
                                intermediate=160, qkv_bias=False),
    # Qwen2.5-0.5B's shape (benchmarks only: 0.5 B parameters)
    "qwen2.5-0.5b": DecoderConfig(vocab=151936, hidden=896, heads=14, kv_heads=2, layers=24,
                                  intermediate=4864, max_seq=512, rope_theta=1e6, tied=True,
                                  bf16_scales=True),
}


class _Builder(ProtoBuilder):
    def __init__(self, cfg: DecoderConfig, seed: int):
        super().__init__()
        self.cfg, self.rng = cfg, np.random.default_rng(seed)

    def linear(self, x: str, k: int, n: int, name: str, scale: float = 0.0, w=None) -> str:
        """x [.., k] @ W [k, n] (random, or `w`): a float MatMul or a MatMulNBits of W's
        quantized form."""
        cfg = self.cfg
        if w is None:
            w = (self.rng.standard_normal((k, n)) * (scale or k ** -0.5)).astype(np.float32)
        if cfg.half:   # a float16 model's weights, quantized from their float16 values
            w = w.astype(np.float16).astype(np.float32)
        out = f"{name}/out"
        if not cfg.bits:
            return self.node("MatMul", [x, self.const(f"{name}.weight", w)], [out])[0]
        b, s, zp = nbits.quantize(w, cfg.bits, cfg.block, cfg.zero_points, cfg.bf16_scales)
        ins = [x, self.const(f"{name}.qweight", b), self.const(f"{name}.scales", s.ravel())]
        if zp is not None:
            ins.append(self.const(f"{name}.qzeros", zp.ravel()))
        return self.node("MatMulNBits", ins, [out], domain="com.microsoft", K=k, N=n,
                         bits=cfg.bits, block_size=cfg.block, accuracy_level=cfg.accuracy)[0]

    def norm_weight(self, name: str) -> str:
        return self.const(name, (1.0 + 0.1 * self.rng.standard_normal(self.cfg.hidden))
                          .astype(np.float32))


def _rope_caches(cfg: DecoderConfig):
    half = cfg.head // 2
    inv = 1.0 / cfg.rope_theta ** (np.arange(half, dtype=np.float64) * 2 / cfg.head)
    ang = np.arange(cfg.max_seq, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def qkv(b: _Builder, i: int, x: str) -> Tuple[str, str, str]:
    """Layer i's query, key and value projections of x (with Qwen2's biases)."""
    cfg = b.cfg
    kvw = cfg.kv_heads * cfg.head
    q, k, v = (b.linear(x, cfg.hidden, n, f"layers.{i}.attn.{p}_proj")
               for p, n in (("q", cfg.hidden), ("k", kvw), ("v", kvw)))
    if cfg.qkv_bias:
        q, k, v = (b.node("Add", [t, b.const(f"layers.{i}.attn.{p}_proj.bias",
                                             (0.1 * b.rng.standard_normal(n)).astype(
                                                 np.float32))], [f"{t}/bias"])[0]
                   for t, p, n in ((q, "q", cfg.hidden), (k, "k", kvw), (v, "v", kvw)))
    return q, k, v


def _attention(b: _Builder, i: int, x: str, cos: str, sin: str) -> str:
    cfg = b.cfg
    q, k, v = qkv(b, i, x)
    if cfg.rotary_op:
        q, k = (b.node("RotaryEmbedding", [t, "position_ids", cos, sin], [f"{t}/rope"],
                       domain="com.microsoft", interleaved=0)[0] for t in (q, k))
    past = [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    present = [f"present.{i}.key", f"present.{i}.value"]
    out = b.node("GroupQueryAttention",
                 [q, k, v, *past, "seqlens_k", "total_sequence_length"] +
                 ([] if cfg.rotary_op else [cos, sin]),
                 [f"layers.{i}.attn/out", *present], domain="com.microsoft",
                 num_heads=cfg.heads, kv_num_heads=cfg.kv_heads,
                 do_rotary=0 if cfg.rotary_op else 1,
                 rotary_interleaved=0, scale=float(cfg.head ** -0.5))[0]
    return b.linear(out, cfg.hidden, cfg.hidden, f"layers.{i}.attn.o_proj")


def _mlp(b: _Builder, i: int, x: str) -> str:
    cfg = b.cfg
    gate = b.linear(x, cfg.hidden, cfg.intermediate, f"layers.{i}.mlp.gate_proj")
    up = b.linear(x, cfg.hidden, cfg.intermediate, f"layers.{i}.mlp.up_proj")
    sig = b.node("Sigmoid", [gate], [f"{gate}/sigmoid"])[0]
    act = b.node("Mul", [gate, sig], [f"{gate}/silu"])[0]
    prod = b.node("Mul", [act, up], [f"layers.{i}.mlp/prod"])[0]
    return b.linear(prod, cfg.intermediate, cfg.hidden, f"layers.{i}.mlp.down_proj")


def _mask_to_lengths(b: _Builder) -> None:
    """seqlens_k = sum(mask) - 1 and total_sequence_length = the mask's length, in the graph."""
    from onnx import TensorProto
    total = b.node("ReduceSum", ["attention_mask", b.const("mask_axes", np.array([1]))],
                   ["mask/sum"], keepdims=0)[0]
    less = b.node("Sub", [total, b.const("one", np.array(1, np.int64))], ["mask/sub"])[0]
    b.node("Cast", [less], ["seqlens_k"], to=TensorProto.INT32)
    shape = b.node("Shape", ["attention_mask"], ["mask/shape"])[0]
    width = b.node("Gather", [shape, b.const("one_index", np.array(1, np.int64))],
                   ["mask/width"], axis=0)[0]
    b.node("Cast", [width], ["total_sequence_length"], to=TensorProto.INT32)


def decoder(cfg: DecoderConfig = DecoderConfig(), seed: int = 0, name: str = "decoder"):
    """The onnx ModelProto of a random decoder of configuration `cfg`."""
    from onnx import TensorProto, helper
    b = _Builder(cfg, seed)
    if cfg.mask:
        _mask_to_lengths(b)
    cos, sin = (b.const(n, c) for n, c in zip(("cos_cache", "sin_cache"), _rope_caches(cfg)))
    table = (0.5 * b.rng.standard_normal((cfg.vocab, cfg.hidden))).astype(
        np.float16 if cfg.half else np.float32).astype(np.float32)
    emb = b.const("embed_tokens.weight", table)
    h = b.node("Gather", [emb, "input_ids"], ["embed/out"])[0]
    eps = dict(epsilon=cfg.eps)
    x = b.node("SimplifiedLayerNormalization", [h, b.norm_weight("layers.0.input_norm")],
               ["layers.0.input_norm/out"], axis=-1, stash_type=1, **eps)[0]
    residual = h
    for i in range(cfg.layers):
        attn = _attention(b, i, x, cos, sin)
        x, _, _, residual = b.node(
            "SkipSimplifiedLayerNormalization",
            [attn, residual, b.norm_weight(f"layers.{i}.post_attention_norm")],
            [f"layers.{i}.post_attention_norm/out", "", "", f"layers.{i}.attn/residual"],
            domain="com.microsoft", **eps)
        mlp = _mlp(b, i, x)
        last = i + 1 == cfg.layers
        norm = "final_norm" if last else f"layers.{i + 1}.input_norm"
        x, _, _, residual = b.node(
            "SkipSimplifiedLayerNormalization", [mlp, residual, b.norm_weight(norm)],
            [f"{norm}/out", "", "", f"layers.{i}.mlp/residual"], domain="com.microsoft", **eps)
    b.linear(x, cfg.hidden, cfg.vocab, "lm_head", scale=2.0 * cfg.hidden ** -0.5,
             w=np.ascontiguousarray(table.T) if cfg.tied else None)
    b.nodes[-1].output[0] = "logits"   # the head's output, under the name genai gives it
    # symbolic dimensions as onnxruntime-genai writes them: `rvvkit build --max-seq N`
    f32, batch, seq = TensorProto.FLOAT, "batch_size", "sequence_length"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])]
    if cfg.mask:
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                                    [batch, "total_sequence_length"]))
    else:
        inputs += [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [batch]),
                   helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    if cfg.rotary_op:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                                    [batch, seq]))
    past, present = cache_io(cfg.layers, cfg.kv_heads, cfg.head)
    outputs = [helper.make_tensor_value_info("logits", f32, [batch, seq, cfg.vocab])] + present
    graph = helper.make_graph(b.nodes, name, inputs + past, outputs, b.inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="rvvkit.zoo.llm")
    model.ir_version = 8
    return to_half(model) if cfg.half else model


def to_half(model):
    """Every float32 initializer and graph input/output of `model` as float16 (the operators
    then compute on float16, as the builder's fp16 precision writes them)."""
    from onnx import TensorProto, numpy_helper
    g = model.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16),
                                               t.name))
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model


def main(argv=None) -> int:
    """python3 -m rvvkit.zoo.llm NAME OUT.onnx [--bits 4 --block 32 --accuracy 4]: a random
    decoder of one of the SMALL configurations, for trying generation end to end."""
    import argparse
    import os

    import onnx
    p = argparse.ArgumentParser(prog="python3 -m rvvkit.zoo.llm", description=main.__doc__)
    p.add_argument("name", choices=sorted(SMALL))
    p.add_argument("output")
    p.add_argument("--bits", type=int, default=0, choices=[0, 4, 8],
                   help="0: float MatMul weights; 4 or 8: MatMulNBits")
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--accuracy", type=int, default=0, choices=[0, 4],
                   help="MatMulNBits accuracy_level (4: int8 activations)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    cfg = replace(SMALL[args.name], bits=args.bits, block=args.block, accuracy=args.accuracy)
    model = decoder(cfg, args.seed, name=args.name)
    # protobuf stops at 2 GiB: a bigger model keeps its weights in a file beside it
    big = sum(len(t.raw_data) for t in model.graph.initializer) >= 2 ** 31 - 2 ** 24
    onnx.save(model, args.output, save_as_external_data=big,
              location=os.path.basename(args.output) + ".data")
    print(f"wrote {args.output}: {args.name}, {cfg.layers} layers, hidden {cfg.hidden}, "
          f"vocab {cfg.vocab}, {'float' if not cfg.bits else f'int{cfg.bits}'} weights")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
