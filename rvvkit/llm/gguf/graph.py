"""A GGUF decoder (llama / qwen2) as the ONNX graph onnxruntime-genai's builder writes for
such a model, which rvvkit already builds with its cache, prefill and 4/8-bit paths:
GroupQueryAttention with rotary inside, (Skip)SimplifiedLayerNormalization, MatMulNBits for
block-quantized weights (MatMul for float ones) and GatherBlockQuantized for a quantized
token table. Interface as rvvkit.zoo.llm: input_ids, seqlens_k, total_sequence_length and
past_key_values.{i}.key|value in; logits and present.{i}.key|value out."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import ModelError
from ...ops.llm.blocks import INT8_ACTIVATIONS
from . import weights
from ..proto_builder import ProtoBuilder, cache_io
from .reader import GgufFile, Shape, rope_factors

MS = "com.microsoft"
# int8 activations per block (MatMulNBits accuracy_level 4), as llama.cpp's CPU dot products
# quantize them (Q8_0 / Q8_K), also with the float zero points of Q4_K and Q4_1 (which
# onnxruntime's accuracy level 4 leaves float: rvvkit's own attribute asks)
ACCURACY = 4


class _Graph(ProtoBuilder):
    def __init__(self, f: GgufFile, shape: Shape):
        super().__init__()
        self.f, self.s = f, shape
        self._blocked = {}

    def blocked(self, name: str) -> weights.Blocked:
        """The block-quantized tensor `name`, converted once (a tied token table is read by
        the embedding and by the head)."""
        if name not in self._blocked:
            kind, shape, data = self.f.tensor(name)
            self._blocked[name] = weights.blocked(kind, shape, data, name)
        return self._blocked[name]

    def vector(self, name: str) -> np.ndarray:
        kind, shape, data = self.f.tensor(name)
        if kind not in weights.FLOATS:
            raise ModelError(f"{self.f.path}: {name} is {kind}; a float vector is expected")
        return weights.floats(kind, (1, int(np.prod(shape))), data).reshape(-1)

    def linear(self, x: str, name: str, out: str, label: str = "") -> str:
        """x [.., K] times the GGUF weight `name` [N, K] (its bias added where it has one),
        its initializers named after `label` (default: `name`)."""
        kind, (n, k), data = self.f.tensor(name + ".weight")
        label = label or name
        if kind in weights.FLOATS:
            w = weights.floats(kind, (n, k), data)
            y = self.node("MatMul", [x, self.const(label + ".weight", w.T)], [out])[0]
        else:
            q = self.blocked(name + ".weight")
            ins = [x, self.const(label + ".qweight", q.packed()),
                   self.const(label + ".scales", q.scales.reshape(-1))]
            extra = {}
            if q.zeros is not None:
                ins.append(self.const(label + ".qzeros", q.zeros.reshape(-1)))
                extra[INT8_ACTIVATIONS] = 1
            y = self.node("MatMulNBits", ins, [out], domain=MS, K=k, N=n, bits=q.bits,
                          block_size=q.block, accuracy_level=ACCURACY, **extra)[0]
        if self.f.has(name + ".bias"):
            bias = self.const(name + ".bias", self.vector(name + ".bias"))
            y = self.node("Add", [y, bias], [out + "/bias"])[0]
        return y

    def embedding(self, ids: str) -> str:
        kind, shape, data = self.f.tensor("token_embd.weight")
        out = "embed/out"
        if kind in weights.FLOATS:
            table = self.const("token_embd.weight", weights.floats(kind, shape, data))
            return self.node("Gather", [table, ids], [out])[0]
        q = self.blocked("token_embd.weight")
        if q.zeros is not None:   # GatherBlockQuantized has no float zero points: float rows
            table = self.const("token_embd.weight", q.dequantized())
            return self.node("Gather", [table, ids], [out])[0]
        # the same bytes as a tied head's MatMulNBits: the artifact stores them once
        rows = q.packed().reshape(shape[0], -1)
        return self.node("GatherBlockQuantized",
                         [self.const("token_embd.qweight_rows", rows), ids,
                          self.const("token_embd.scales_rows", q.scales)], [out], domain=MS,
                         bits=q.bits, block_size=q.block, gather_axis=0, quantize_axis=1)[0]


def _rope(s: Shape, rows: int, factors: Optional[np.ndarray]):
    """cos and sin [rows, rope_dims / 2] of position times each frequency (llama 3 divides
    each frequency by its factor)."""
    half = s.rope_dims // 2
    inv = 1.0 / s.rope_theta ** (np.arange(half, dtype=np.float64) * 2 / s.rope_dims)
    if factors is not None:
        if factors.size != half:
            raise ModelError(f"rope_freqs has {factors.size} factors, {half} expected")
        inv = inv / factors.astype(np.float64)
    ang = np.arange(rows, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _head_norm(g: _Graph, x: str, heads: int, name: str) -> str:
    """x [B, S, heads * head] with an RMS norm over each head (qwen3's attn_q_norm/attn_k_norm,
    a weight [head] shared by the heads)."""
    head = g.s.head
    split = g.node("Reshape", [x, g.const(f"{name}/split", np.array([0, 0, heads, head],
                                                                    np.int64))],
                   [f"{name}/heads"])[0]
    normed = g.node("SimplifiedLayerNormalization",
                    [split, g.const(name + ".weight", g.vector(name + ".weight"))],
                    [f"{name}/out"], axis=-1, stash_type=1, epsilon=g.s.eps)[0]
    return g.node("Reshape", [normed, g.const(f"{name}/merge", np.array([0, 0, heads * head],
                                                                        np.int64))],
                  [f"{name}/merged"])[0]


def _attention(g: _Graph, i: int, x: str, cos: str, sin: str) -> str:
    s, p = g.s, f"blk.{i}."
    q, k, v = (g.linear(x, p + f"attn_{t}", f"{p}attn_{t}/out") for t in "qkv")
    if g.f.has(p + "attn_q_norm.weight"):
        q = _head_norm(g, q, s.heads, p + "attn_q_norm")
    if g.f.has(p + "attn_k_norm.weight"):
        k = _head_norm(g, k, s.kv_heads, p + "attn_k_norm")
    past = [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
    present = [f"present.{i}.key", f"present.{i}.value"]
    out = g.node("GroupQueryAttention",
                 [q, k, v, *past, "seqlens_k", "total_sequence_length", cos, sin],
                 [f"{p}attn/out", *present], domain=MS, num_heads=s.heads,
                 kv_num_heads=s.kv_heads, do_rotary=1, rotary_interleaved=s.interleaved,
                 scale=float(s.head ** -0.5))[0]
    return g.linear(out, p + "attn_output", f"{p}attn_output/out")


def _mlp(g: _Graph, i: int, x: str) -> str:
    p = f"blk.{i}."
    gate = g.linear(x, p + "ffn_gate", p + "ffn_gate/out")
    up = g.linear(x, p + "ffn_up", p + "ffn_up/out")
    sig = g.node("Sigmoid", [gate], [gate + "/sigmoid"])[0]
    act = g.node("Mul", [gate, sig], [gate + "/silu"])[0]
    prod = g.node("Mul", [act, up], [p + "ffn/prod"])[0]
    return g.linear(prod, p + "ffn_down", p + "ffn_down/out")


def _layers(g: _Graph, cos: str, sin: str) -> str:
    s, eps = g.s, dict(epsilon=g.s.eps)
    h = g.embedding("input_ids")
    x = g.node("SimplifiedLayerNormalization",
               [h, g.const("blk.0.attn_norm.weight", g.vector("blk.0.attn_norm.weight"))],
               ["blk.0.attn_norm/out"], axis=-1, stash_type=1, **eps)[0]
    residual = h
    for i in range(s.layers):
        attn = _attention(g, i, x, cos, sin)
        norm = f"blk.{i}.ffn_norm"
        x, _, _, residual = g.node(
            "SkipSimplifiedLayerNormalization",
            [attn, residual, g.const(norm + ".weight", g.vector(norm + ".weight"))],
            [norm + "/out", "", "", f"blk.{i}.attn/residual"], domain=MS, **eps)
        mlp = _mlp(g, i, x)
        norm = "output_norm" if i + 1 == s.layers else f"blk.{i + 1}.attn_norm"
        x, _, _, residual = g.node(
            "SkipSimplifiedLayerNormalization",
            [mlp, residual, g.const(norm + ".weight", g.vector(norm + ".weight"))],
            [norm + "/out", "", "", f"blk.{i}.ffn/residual"], domain=MS, **eps)
    # a model without its own output weight ties the head to the token table
    head = "output" if g.f.has("output.weight") else "token_embd"
    return g.linear(x, head, "logits", label="output")


def to_onnx(f: GgufFile, shape: Shape, positions: int):
    """The ModelProto of the decoder in `f`, with rotary tables for `positions` positions."""
    from onnx import TensorProto, helper
    g = _Graph(f, shape)
    cos, sin = (g.const(n, c) for n, c in zip(("cos_cache", "sin_cache"),
                                               _rope(shape, positions, rope_factors(f))))
    logits = _layers(g, cos, sin)
    if logits != "logits":
        g.nodes[-1].output[0] = "logits"   # the head's bias Add, where it has one
    batch, seq = "batch_size", "sequence_length"
    past, present = cache_io(shape.layers, shape.kv_heads, shape.head)
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [batch]),
              helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, []),
              *past]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             [batch, seq, shape.vocab])] + present
    graph = helper.make_graph(g.nodes, str(f.value("general.name", shape.arch)), inputs,
                              outputs, g.inits)
    model = helper.make_model(graph, producer_name="rvvkit.llm.gguf",
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model
