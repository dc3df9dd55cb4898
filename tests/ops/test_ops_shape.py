"""Operator cases: shape and data-movement ops (Reshape, Flatten, Transpose,
Concat, (Un)Squeeze).

Each case is a tiny model, built once and run on every executor of the session (the `executor`
argument: host, QEMU at several VLENs, the CUDA emulator; tests/executors.py), and compared
with onnxruntime (single-threaded). Shapes are deliberately awkward: primes, 1x1 spatial,
non-square windows, batch 2, padding on one side only."""
import numpy as np
import pytest
from onnx import helper

from conftest import assert_matches, make_model, rand
from ops_support import wrapped

node = helper.make_node


# Shape and data-movement ops. A Relu before and after keeps them between real kernels, so
# they are exercised as buffer aliases; the "_io" variants read a graph input / write a graph
# output directly, which needs a copy.

RESHAPE_CASES = [
    ("zero_and_minus1", (2, 3, 4), [0, -1]),
    ("minus1_middle", (2, 3, 4), [4, -1, 2]),
    ("flat", (2, 3, 4), [-1]),
    ("add_unit_dims", (2, 3, 4), [1, 2, 1, 12, 1]),
    ("zero_keeps_two", (2, 3, 5, 1), [0, 0, -1]),
]


@pytest.mark.parametrize("io", [False, True], ids=["alias", "io"])
@pytest.mark.parametrize("x_shape, shape", [c[1:] for c in RESHAPE_CASES],
                         ids=[c[0] for c in RESHAPE_CASES])
def test_reshape(x_shape, shape, io, executor):
    wrapped(executor, lambda i, o: [node("Reshape", [i, "shape"], [o])], x_shape,
             inits={"shape": np.asarray(shape, np.int64)}, io=io)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, 4, -1, -4])
def test_flatten(axis, executor):
    wrapped(executor, lambda i, o: [node("Flatten", [i], [o], axis=axis)], (2, 3, 4, 5))


def test_flatten_io(executor):
    wrapped(executor, lambda i, o: [node("Flatten", [i], [o])], (2, 3, 1, 5), io=True)


@pytest.mark.parametrize("x_shape, perm", [
    ((2, 3, 4, 5), (0, 2, 3, 1)),
    ((2, 3, 4, 5), (3, 1, 0, 2)),
    ((2, 3, 4), None),
    ((7, 13), (1, 0)),
    ((1, 5, 1, 3), (0, 3, 1, 2)),
], ids=["nchw_to_nhwc", "scramble4d", "default_reverse", "2d_primes", "unit_dims"])
def test_transpose(x_shape, perm, executor):
    attrs = {} if perm is None else {"perm": list(perm)}
    wrapped(executor, lambda i, o: [node("Transpose", [i], [o], **attrs)], x_shape)


CONCAT_CASES = [
    ("axis0", 0, [(1, 3, 4), (2, 3, 4)]),
    ("axis1_three", 1, [(2, 1, 4), (2, 3, 4), (2, 2, 4)]),
    ("axis2", 2, [(2, 3, 1), (2, 3, 5)]),
    ("axis3_nchw", 3, [(1, 2, 3, 4), (1, 2, 3, 1)]),
    ("axis_neg1", -1, [(3, 7), (3, 13)]),
    ("axis_neg3", -3, [(1, 2, 2, 2), (1, 5, 2, 2)]),
]


@pytest.mark.parametrize("axis, shapes", [c[1:] for c in CONCAT_CASES],
                         ids=[c[0] for c in CONCAT_CASES])
def test_concat(axis, shapes, executor):
    names = [f"x{i}" for i in range(len(shapes))]
    m = make_model([node("Concat", names, ["y"], axis=axis)], list(zip(names, shapes)), ["y"])
    feeds = {n: rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes))}
    assert_matches(m, feeds, on=executor)


def test_concat_with_constant_and_intermediate(executor):
    nodes = [node("Relu", ["x"], ["r"]), node("Concat", ["c", "r", "x"], ["y"], axis=1)]
    m = make_model(nodes, [("x", (2, 3, 5))], ["y"], {"c": rand(2, 2, 5, seed=3)})
    assert_matches(m, {"x": rand(2, 3, 5)}, on=executor)


def test_concat_in_place_nested_with_extra_reader(executor):
    """Batch-1 concats of computed tensors are written in place (slices of one buffer), also
    when nested and when an input has another reader after the concat."""
    nodes = [node("Relu", ["x"], ["a"]), node("Sigmoid", ["x"], ["b"]),
             node("Concat", ["a", "b"], ["c"], axis=1),
             node("Tanh", ["a"], ["d"]),
             node("Concat", ["c", "d"], ["e"], axis=1),
             node("Mul", ["e", "e"], ["y"]),
             node("Add", ["a", "d"], ["z"])]
    m = make_model(nodes, [("x", (1, 3, 5))], ["y", "z"])
    assert_matches(m, {"x": rand(1, 3, 5, scale=2)}, on=executor)


@pytest.mark.parametrize("axis, batch", [(1, 1), (1, 2), (2, 1), (3, 1)],
                         ids=["axis1_batch1", "axis1_batch2", "axis2_batch1", "axis3_batch1"])
def test_concat_of_convs(axis, batch, executor):
    nodes = [node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Conv", ["x", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Concat", ["c1", "c2"], ["cat"], axis=axis),
             node("Relu", ["cat"], ["y"])]
    inits = {"w1": rand(2, 3, 3, 3, seed=1), "w2": rand(2, 3, 3, 3, seed=2)}
    m = make_model(nodes, [("x", (batch, 3, 5, 5))], ["y"], inits)
    assert_matches(m, {"x": rand(batch, 3, 5, 5)}, on=executor)


UNSQUEEZE_CASES = [
    # id, opset, x shape, axes
    ("opset11_axis0", 11, (3, 4), [0]),
    ("opset11_two_axes", 11, (3, 4), [1, 3]),
    ("opset11_negative", 11, (3, 4), [-1]),
    ("opset13_axis0", 13, (3, 4), [0]),
    ("opset13_unsorted", 13, (3, 4, 5), [4, 0]),
    ("opset13_negative", 13, (3, 4), [-2]),
]


@pytest.mark.parametrize("opset, x_shape, axes", [c[1:] for c in UNSQUEEZE_CASES],
                         ids=[c[0] for c in UNSQUEEZE_CASES])
def test_unsqueeze(opset, x_shape, axes, executor):
    if opset < 13:
        ops, inits = (lambda i, o: [node("Unsqueeze", [i], [o], axes=axes)]), None
    else:
        ops, inits = (lambda i, o: [node("Unsqueeze", [i, "axes"], [o])]), \
            {"axes": np.asarray(axes, np.int64)}
    wrapped(executor, ops, x_shape, opset=opset, inits=inits)


SQUEEZE_CASES = [
    ("opset11_axis1", 11, (3, 1, 4), [1]),
    ("opset11_all", 11, (1, 3, 1, 4, 1), None),
    ("opset11_negative", 11, (3, 4, 1), [-1]),
    ("opset13_two_axes", 13, (1, 3, 1, 4), [0, 2]),
    ("opset13_negative", 13, (1, 3, 1, 4), [-2]),
    ("opset13_all", 13, (1, 5, 1, 1), None),
]


@pytest.mark.parametrize("opset, x_shape, axes", [c[1:] for c in SQUEEZE_CASES],
                         ids=[c[0] for c in SQUEEZE_CASES])
def test_squeeze(opset, x_shape, axes, executor):
    if axes is None:
        ops, inits = (lambda i, o: [node("Squeeze", [i], [o])]), None
    elif opset < 13:
        ops, inits = (lambda i, o: [node("Squeeze", [i], [o], axes=axes)]), None
    else:
        ops, inits = (lambda i, o: [node("Squeeze", [i, "axes"], [o])]), \
            {"axes": np.asarray(axes, np.int64)}
    wrapped(executor, ops, x_shape, opset=opset, inits=inits)


# ---------------------------------------------------------------------------------------------
