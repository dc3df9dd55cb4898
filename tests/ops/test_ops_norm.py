"""Operator cases: LayerNormalization, RMSNormalization, GroupNormalization (opset 18 per-group
and opset 21 per-channel affine), InstanceNormalization, LpNormalization,
MeanVarianceNormalization; compared with onnxruntime on every sampled executor. Row lengths
are primes or longer than one LMUL-8 register group at VLEN 512."""
import pytest
from onnx import helper

from conftest import assert_matches, make_model, rand

node = helper.make_node


def _check(op_executor, nodes, x, inits, opset, outputs=("y",), extra_inputs=()):
    ins = [("x", x.shape)] + [(n, a.shape) for n, a in extra_inputs]
    feeds = {"x": x, **dict(extra_inputs)}
    m = make_model(nodes, ins, list(outputs), inits, opset=opset)
    assert_matches(m, feeds, on=op_executor)


LAYER_CASES = [
    # id, shape, axis, bias, scale shape (None: the normalised shape), epsilon
    ("last_bias", (3, 7, 64), -1, True, None, 1e-5),
    ("prime_row_no_bias", (5, 37), -1, False, None, 1e-5),
    ("long_row", (2, 1100), 1, True, None, 1e-6),
    ("two_axes", (2, 3, 5, 7), 2, True, None, 1e-5),
    ("broadcast_scale", (2, 3, 5, 7), 2, True, (1, 7), 1e-3),
]


@pytest.mark.parametrize("shape, axis, bias, sshape, eps", [c[1:] for c in LAYER_CASES],
                         ids=[c[0] for c in LAYER_CASES])
def test_layernorm(shape, axis, bias, sshape, eps, op_executor):
    norm = shape[axis:]
    sshape = sshape or norm
    inits = {"s": rand(*sshape, seed=1) + 1, "b": rand(*sshape, seed=2)}
    ins = ["x", "s", "b"] if bias else ["x", "s"]
    if not bias:
        del inits["b"]
    n = node("LayerNormalization", ins, ["y"], axis=axis, epsilon=eps)
    _check(op_executor, [n], rand(*shape, scale=3) + 1, inits, 17)


def test_layernorm_stats_outputs(op_executor):
    n = node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=1)
    _check(op_executor, [n], rand(3, 4, 9), {"s": rand(4, 9, seed=1)}, 17,
           outputs=("y", "mean", "inv"))


def test_layernorm_runtime_scale(op_executor):
    n = node("LayerNormalization", ["x", "s", "b"], ["y"])
    _check(op_executor, [n], rand(4, 33), None, 17,
           extra_inputs=[("s", rand(33, seed=1)), ("b", rand(33, seed=2))])


@pytest.mark.parametrize("shape, axis", [((3, 5, 33), -1), ((2, 4, 3, 5), 1)],
                         ids=["last", "three_axes"])
def test_rmsnorm(shape, axis, op_executor):
    n = node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-5)
    _check(op_executor, [n], rand(*shape), {"s": rand(*shape[axis:], seed=1)}, 23)


GROUP_CASES = [
    # id, shape, groups, opset
    ("per_group18", (2, 6, 5, 7), 3, 18),
    ("per_channel21", (2, 6, 4, 3), 2, 21),
    ("one_group21", (1, 4, 9), 1, 21),
    ("long_groups21", (1, 4, 40, 30), 2, 21),
]


@pytest.mark.parametrize("shape, groups, opset", [c[1:] for c in GROUP_CASES],
                         ids=[c[0] for c in GROUP_CASES])
def test_groupnorm(shape, groups, opset, op_executor):
    k = shape[1] if opset >= 21 else groups
    inits = {"s": rand(k, seed=1), "b": rand(k, seed=2)}
    n = node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-4)
    _check(op_executor, [n], rand(*shape, scale=2), inits, opset)


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 4, 9)], ids=["2d", "1d"])
def test_instancenorm(shape, op_executor):
    c = shape[1]
    n = node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)
    _check(op_executor, [n], rand(*shape), {"s": rand(c, seed=1), "b": rand(c, seed=2)}, 13)


@pytest.mark.parametrize("axis, p", [(-1, 2), (-1, 1), (1, 1)],
                         ids=["l2_last", "l1_last", "l1_mid"])
def test_lpnorm(axis, p, op_executor):
    _check(op_executor, [node("LpNormalization", ["x"], ["y"], axis=axis, p=p)],
           rand(3, 5, 70), None, 13)


def _with_zero_lines(axis, tiny):
    """rand(3, 5, 70) with a line along `axis` all zero, and with `tiny` one whose float32
    squares underflow: their norm is 0, and ONNX's reference gives 0 there, not 0/0."""
    x = rand(3, 5, 70)
    line = [0, 2, slice(None)] if axis == -1 else [0, slice(None), 4]
    x[tuple(line)] = 0.0
    if tiny:
        line[1 if axis == -1 else 2] = 3
        x[tuple(line)] = 1e-30
    return x


@pytest.mark.parametrize("axis, p", [(-1, 2), (-1, 1), (1, 2)],
                         ids=["l2_last", "l1_last", "l2_mid"])
@pytest.mark.parametrize("folded", [False, True], ids=["run_time", "folded"])
def test_lpnorm_zero_line(axis, p, folded, op_executor):
    """At run time (the contiguous RVV path and the strided one) and folded from a constant
    (in float64, where the tiny line's squares do not underflow: only the zero line)."""
    n = node("LpNormalization", ["c" if folded else "x"], ["l" if folded else "y"], axis=axis,
             p=p)
    x = _with_zero_lines(axis, tiny=not folded)
    if folded:
        _check(op_executor, [n, node("Add", ["l", "x"], ["y"])], rand(3, 5, 70, seed=1),
               {"c": x}, 13)
    else:
        _check(op_executor, [n], x, None, 13)


@pytest.mark.parametrize("axes", [None, [1], [0, 1, 3]], ids=["default", "one", "split"])
def test_mvn(axes, op_executor):
    attrs = {} if axes is None else {"axes": axes}
    _check(op_executor, [node("MeanVarianceNormalization", ["x"], ["y"], **attrs)],
           rand(2, 3, 5, 7, scale=2) + 1, None, 13)


REFUSED = [
    # id, node, inputs (name, shape), initializers, opset, message
    ("stats_half", node("LayerNormalization", ["x", "s"], ["y", "mean"], axis=1),
     [("x", (3, 4)), ("s", (4,))], None, 17, "supported only together"),
    ("runtime_broadcast_scale", node("LayerNormalization", ["x", "s"], ["y"], axis=1),
     [("x", (3, 4, 5)), ("s", (5,))], None, 17, "only for a constant"),
    ("groups_do_not_divide", node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4),
     [("x", (2, 6, 3))], {"s": rand(4), "b": rand(4)}, 21, "do not split into 4 groups"),
    ("lp_p3", node("LpNormalization", ["x"], ["y"], p=3), [("x", (2, 3))], None, 13,
     "only 1 and 2"),
]


@pytest.mark.parametrize("n, ins, inits, opset, why", [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_refused_with_a_reason(n, ins, inits, opset, why):
    import rvvkit
    from rvvkit.errors import ModelError
    with pytest.raises(ModelError, match=why):
        rvvkit.build(make_model([n], ins, [o for o in n.output], inits, opset=opset))
