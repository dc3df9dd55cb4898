"""MobileNetV2 at its published size (width 1.0, 224x224, 1000 classes; 300 M MACs), built
with onnx.helper (no torch): the graph torchvision's model exports once its BatchNorms are
folded (Conv + bias, Clip(0, 6), residual Add, GlobalAveragePool, Flatten, Gemm), seeded random
He-scaled weights. Benchmark material: tests/models' mobilenet_v2 is the width-0.25, 64x64 test
model (2.9 M MACs), where per-layer overhead, not the convolutions, sets the cost.

    from mobilenet import mobilenet_v2
    model, feeds = mobilenet_v2(width=1.0, size=224)
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from encoder import _Graph

OPSET = 13
# (expansion t, output channels c, repeats n, first stride s): the paper's table 2
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1)]


def _divisible(v: float, d: int = 8) -> int:
    """torchvision's _make_divisible: channels rounded to a multiple of 8, never 10 % below."""
    out = max(d, int(v + d / 2) // d * d)
    return out + d if out < 0.9 * v else out


def _conv(g: _Graph, x: str, cin: int, cout: int, k: int, stride: int, groups: int,
          relu6: bool) -> str:
    fan_in = cin // groups * k * k
    w = g.weight(cout, cin // groups, k, k, scale=float(np.sqrt(2.0 / fan_in)))
    y = g.op("Conv", [x, w, g.weight(cout, scale=0.01)], kernel_shape=[k, k],
             strides=[stride, stride], pads=[k // 2] * 4, group=groups)
    if relu6:
        y = g.op("Clip", [y, g.const(np.float32(0.0)), g.const(np.float32(6.0))])
    return y


def _inverted_residual(g: _Graph, x: str, cin: int, cout: int, t: int, stride: int) -> str:
    hidden = cin * t
    h = x if t == 1 else _conv(g, x, cin, hidden, 1, 1, 1, True)
    h = _conv(g, h, hidden, hidden, 3, stride, hidden, True)
    h = _conv(g, h, hidden, cout, 1, 1, 1, False)
    return g.op("Add", [x, h]) if stride == 1 and cin == cout else h


def mobilenet_v2(width: float = 1.0, size: int = 224, classes: int = 1000, seed: int = 0):
    """(ModelProto, feeds): MobileNetV2 on one (1, 3, size, size) image."""
    g = _Graph(seed)
    cin = _divisible(32 * width)
    x = _conv(g, "x", 3, cin, 3, 2, 1, True)
    for t, c, n, s in BLOCKS:
        cout = _divisible(c * width)
        for i in range(n):
            x = _inverted_residual(g, x, cin, cout, t, s if i == 0 else 1)
            cin = cout
    last = _divisible(1280 * max(1.0, width))
    x = _conv(g, x, cin, last, 1, 1, 1, True)
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    x = g.op("Gemm", [x, g.weight(classes, last, scale=float(np.sqrt(1.0 / last))),
                      g.weight(classes, scale=0.01)], transB=1)
    g.nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        g.nodes, "mobilenet_v2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    rng = np.random.default_rng(seed + 1)
    return model, {"x": rng.standard_normal((1, 3, size, size)).astype(np.float32)}
