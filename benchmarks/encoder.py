"""A BERT-style encoder of realistic width, built with onnx.helper (no torch): the graph a
PyTorch BERT layer exports at opset 17 (MatMul + bias Add, heads by Reshape/Transpose,
QK^T / sqrt(d) + mask, Softmax, .V, output projection, residual, LayerNormalization, GELU in
its Erf form), seeded random weights. Benchmark material: the stored test encoder is 32 wide,
too small for threads to matter.

    from encoder import bert_encoder
    model, feeds = bert_encoder(layers=2, hidden=512, heads=8, seq=128, ffn=2048)
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Graph:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, what: str) -> str:
        self.n += 1
        return f"{what}_{self.n}"

    def const(self, value, what: str = "c") -> str:
        name = self.name(what)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape, scale: float = 0.05) -> str:
        return self.const((scale * self.rng.standard_normal(shape)).astype(np.float32), "w")

    def op(self, op: str, inputs, **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        return self.op("Add", [self.op("MatMul", [x, self.weight(n_in, n_out)]),
                               self.weight(n_out)])

    def layernorm(self, x: str, hidden: int) -> str:
        scale = self.const((1 + 0.1 * self.rng.standard_normal(hidden)).astype(np.float32))
        return self.op("LayerNormalization", [x, scale, self.weight(hidden)], axis=-1,
                       epsilon=1e-12)

    def gelu(self, x: str) -> str:   # x * 0.5 * (1 + erf(x / sqrt 2)), torch's export
        erf = self.op("Erf", [self.op("Div", [x, self.const(np.float32(np.sqrt(2.0)))])])
        half = self.op("Mul", [x, self.const(np.float32(0.5))])
        return self.op("Mul", [half, self.op("Add", [erf, self.const(np.float32(1.0))])])


def _attention(g: _Graph, x: str, mask: str, seq: int, hidden: int, heads: int) -> str:
    d = hidden // heads
    split = g.const(np.array([1, seq, heads, d], np.int64))

    def heads_of(t: str, perm):
        return g.op("Transpose", [g.op("Reshape", [t, split])], perm=perm)
    q = heads_of(g.linear(x, hidden, hidden), [0, 2, 1, 3])
    k = heads_of(g.linear(x, hidden, hidden), [0, 2, 3, 1])
    v = heads_of(g.linear(x, hidden, hidden), [0, 2, 1, 3])
    s = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(np.sqrt(d)))])
    p = g.op("Softmax", [g.op("Add", [s, mask])], axis=-1)
    o = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    o = g.op("Reshape", [o, g.const(np.array([1, seq, hidden], np.int64))])
    return g.layernorm(g.op("Add", [g.linear(o, hidden, hidden), x]), hidden)


def bert_encoder(layers: int = 2, hidden: int = 512, heads: int = 8, seq: int = 128,
                 ffn: int = 2048, seed: int = 0):
    """(ModelProto, feeds): `layers` encoder layers over an input of (1, seq, hidden)
    embeddings and a (1, seq) attention mask of ones and zeros."""
    g = _Graph(seed)
    # mask (1, seq) -> (1, 1, 1, seq) additive: (1 - m) * -10000, as BERT exports it
    m = g.op("Unsqueeze", ["mask", g.const(np.array([1, 2], np.int64))])
    m = g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0)), m]), g.const(np.float32(-1e4))])
    x = "x"
    for _ in range(layers):
        x = _attention(g, x, m, seq, hidden, heads)
        h = g.gelu(g.linear(x, hidden, ffn))
        x = g.layernorm(g.op("Add", [g.linear(h, ffn, hidden), x]), hidden)
    g.nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        g.nodes, "bert_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, seq])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    rng = np.random.default_rng(seed + 1)
    mask = np.ones((1, seq), np.float32)
    mask[0, seq - seq // 8:] = 0.0     # padding at the end, as a batch of unequal lengths has
    return model, {"x": rng.standard_normal((1, seq, hidden)).astype(np.float32), "mask": mask}
