"""transformers-style decomposed attention over growing caches (passes/cached_attention.py):
the variants exporters write — the scale after the scores (Div or Mul by a scalar) or split
over q and k before them, grouped-query heads through repeat_kv or plain multi-head — become
one Attention that reads the caches in place; a chain that is not plain attention (an ALiBi
bias added to the scores) is left as exported. Every variant generates onnxruntime's tokens."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rvvkit
from ort_decoder import ort_greedy

VOCAB, HEAD, BOUND, PROMPT = 40, 8, 24, [3, 1, 4]


def _decoder(heads: int, kv_heads: int, scale: str, alibi: bool = False):
    """input_ids -> embedding -> one attention block over past_key_values.0.* -> logits."""
    rng = np.random.default_rng(heads + kv_heads)
    hidden = heads * HEAD
    inits, nodes = {}, []

    def const(name, value):
        inits[name] = np.asarray(value)
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def heads_of(x, n, name):   # [1, S, n * HEAD] -> [1, n, S, HEAD]
        r = node("Reshape", [x, const(f"{name}_shape", np.array([1, -1, n, HEAD]))], name + "_r")
        return node("Transpose", [r], name + "_t", perm=[0, 2, 1, 3])

    def project(x, n, name):
        w = const(f"{name}.weight", (rng.standard_normal((hidden, n * HEAD)) * 0.3)
                  .astype(np.float32))
        return heads_of(node("MatMul", [x, w], name), n, name)

    def repeat(cache, name):    # transformers' repeat_kv
        if heads == kv_heads:
            return cache
        u = node("Unsqueeze", [cache, const(f"{name}_axes", np.array([2]))], name + "_u")
        e = node("Expand", [u, const(f"{name}_to", np.array([1, kv_heads, heads // kv_heads,
                                                             1, HEAD]))], name + "_e")
        return node("Reshape", [e, const(f"{name}_hs", np.array([1, heads, -1, HEAD]))],
                    name + "_rep")

    x = node("Gather", [const("embed", rng.standard_normal((VOCAB, hidden))
                              .astype(np.float32)), "input_ids"], "x")
    q = project(x, heads, "q")
    keys = {kind: node("Concat", [f"past_key_values.0.{kind}",
                                  project(x, kv_heads, kind[0])], f"present.0.{kind}", axis=2)
            for kind in ("key", "value")}
    kt = node("Transpose", [repeat(keys["key"], "k")], "kt", perm=[0, 1, 3, 2])
    root = np.float32(HEAD ** -0.25)
    if scale == "split":   # q and k each times HEAD^-1/4, as some exporters write it
        q = node("Mul", [q, const("q_scale", root)], "q_scaled")
        kt = node("Mul", [kt, const("k_scale", root)], "kt_scaled")
    s = node("MatMul", [q, kt], "scores")
    if scale == "div":
        s = node("Div", [s, const("sqrt_d", np.float32(math.sqrt(HEAD)))], "scores_scaled")
    elif scale == "mul":
        s = node("Mul", [s, const("inv_sqrt_d", np.float32(HEAD ** -0.5))], "scores_scaled")
    if alibi:
        s = node("Add", [s, const("alibi", rng.standard_normal((1, heads, 1, 1))
                                  .astype(np.float32))], "scores_alibi")
    m = node("Unsqueeze", ["attention_mask", const("mask_axes", np.array([1, 2]))], "m4")
    live = node("Cast", [m], "mask_bool", to=TensorProto.BOOL)
    add = node("Where", [live, const("zero", np.float32(0)),
                         const("lowest", np.float32(np.finfo(np.float32).min))], "mask_add")
    p = node("Softmax", [node("Add", [s, add], "masked")], "probs", axis=-1)
    y = node("MatMul", [p, repeat(keys["value"], "v")], "attended")
    t = node("Transpose", [y], "y_t", perm=[0, 2, 1, 3])
    flat = node("Reshape", [t, const("flat", np.array([1, -1, hidden]))], "y_flat")
    node("MatMul", [flat, const("lm_head", (rng.standard_normal((hidden, VOCAB)) * 0.5)
                                .astype(np.float32))], "logits")
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    cache = [1, kv_heads, "past_sequence_length", HEAD]
    inputs = [helper.make_tensor_value_info("input_ids", i64, [1, "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", i64, [1, "total_sequence_length"])]
    inputs += [helper.make_tensor_value_info(f"past_key_values.0.{k}", f32, cache)
               for k in ("key", "value")]
    outputs = [helper.make_tensor_value_info("logits", f32, [1, "sequence_length", VOCAB])]
    outputs += [helper.make_tensor_value_info(f"present.0.{k}", f32,
                                              [1, kv_heads, "total_sequence_length", HEAD])
                for k in ("key", "value")]
    graph = helper.make_graph(nodes, "attn", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("heads, kv_heads, scale, alibi, fused", [
    (4, 2, "div", False, True),
    (4, 1, "mul", False, True),
    (2, 2, "split", False, True),
    (4, 2, "div", True, False),
], ids=["gqa_div", "mqa_mul", "mha_split", "alibi_left_alone"])
def test_decomposed_attention_over_caches(heads, kv_heads, scale, alibi, fused):
    model = _decoder(heads, kv_heads, scale, alibi)
    art = rvvkit.build(model, max_seq=BOUND)
    ops = [s["op"] for s in art.meta["plan"]]
    assert ("Attention" in ops) == fused, ops
    assert ("Softmax" in ops) != fused
    if fused:   # the caches read in place: no repeat_kv copy left
        assert "Expand" not in ops
    want, rows = ort_greedy(model, PROMPT, 12, BOUND, growing=True)
    with rvvkit.load(art) as sess:
        got = sess.generate(PROMPT, 12, keep_logits=True)
    assert got.tokens == want
    np.testing.assert_allclose(np.array(got.logits), np.array(rows), rtol=1e-4, atol=1e-4)
