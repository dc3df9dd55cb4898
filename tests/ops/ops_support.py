"""What the operator tests share: small model builders and the one-node check. Every test of
tests/ops takes an `executor` (tests/executors.py) and runs there; tests/conftest.py
parametrizes it over the session's executors.

Not a conftest.py: tests/conftest.py is imported by name (`from conftest import ...`)."""
import numpy as np
from onnx import helper

import rvvkit
from conftest import assert_matches, make_model, rand

node = helper.make_node


def positive(*shape, seed=0):
    """Values in [0.5, 2.5): safe denominators."""
    return np.asarray(0.5 + 2 * np.random.default_rng(seed).random(shape), np.float32)


def check_single(executor, op, x_shape, attrs=None, opset=13, extra_inputs=(),
                 initializers=None, x=None):
    """One node `op` reading `x` (plus constant extra inputs) and writing `y`."""
    m = make_model([node(op, ["x", *extra_inputs], ["y"], **(attrs or {}))],
                   [("x", x_shape)], ["y"], initializers, opset=opset)
    return assert_matches(m, {"x": rand(*x_shape) if x is None else x}, on=executor)


def plan_ops(art):
    return [s["op"] for s in art.meta["plan"]]


def conv_inits(cin=3, cout=4, seed=1):
    return {"w": rand(cout, cin, 3, 3, seed=seed), "b": rand(cout, seed=seed + 1)}


def fused(executor, m, feeds, expect_ops):
    art = rvvkit.build(m)
    assert plan_ops(art) == expect_ops
    assert_matches(m, feeds, artifact=art, on=executor)


def wrapped(executor, op_nodes, x_shape, opset=13, inits=None, io=False):
    if io:
        nodes = op_nodes("x", "y")
    else:
        nodes = [node("Relu", ["x"], ["r0"])] + op_nodes("r0", "r1") + \
                [node("Relu", ["r1"], ["y"])]
    m = make_model(nodes, [("x", x_shape)], ["y"], inits, opset=opset)
    return assert_matches(m, {"x": rand(*x_shape)}, on=executor)
