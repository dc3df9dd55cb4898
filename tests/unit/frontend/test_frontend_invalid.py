"""Invalid models are refused at build time with one clear ModelError naming the node (and the
attribute), never a traceback from deeper down or a model that builds and computes garbage."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model
from rvvkit.errors import ModelError
from rvvkit.frontend.onnx import MAX_ELEMENTS, from_onnx

node = helper.make_node
X = [("x", (1, 2, 6, 6))]
W = {"w": np.ones((3, 2, 3, 3), np.float32)}


def _refused(model, *words, input_shapes=None):
    with pytest.raises(ModelError) as info:
        from_onnx(model, input_shapes)
    msg = str(info.value)
    for w in words:
        assert w in msg, msg
    return msg


def test_two_nodes_writing_one_tensor():
    m = make_model([node("Relu", ["x"], ["y"], name="first"),
                    node("Neg", ["x"], ["y"], name="second")], X, ["y"])
    _refused(m, "second", "'y'", "one producer")


def test_a_node_writing_a_graph_input_or_initializer():
    m = make_model([node("Relu", ["x"], ["x"], name="self_loop")], X, ["x"])
    _refused(m, "self_loop", "'x'", "already defined")
    m = make_model([node("Relu", ["x"], ["w"], name="over_w")], X, ["w"], W)
    _refused(m, "over_w", "'w'")


@pytest.mark.parametrize("attrs, word", [
    (dict(strides=[0, 0]), "strides=[0, 0]"), (dict(dilations=[1, -1]), "dilations=[1, -1]"),
    (dict(pads=[-1, 0, 0, 0]), "pads=[-1, 0, 0, 0]"), (dict(group=0), "group=[0]")])
def test_conv_attribute_out_of_range(attrs, word):
    m = make_model([node("Conv", ["x", "w"], ["y"], name="the_conv", **attrs)], X, ["y"], W)
    _refused(m, "the_conv", word)


def test_pool_kernel_zero():
    m = make_model([node("MaxPool", ["x"], ["y"], name="the_pool", kernel_shape=[0, 0])], X,
                   ["y"])
    _refused(m, "the_pool", "kernel_shape=[0, 0]", "at least 1")


def test_opset_beyond_what_rvvkit_knows():
    _refused(make_model([node("Relu", ["x"], ["y"])], X, ["y"], opset=9999), "opset 9999")


def test_input_size_negative():
    m = make_model([node("Relu", ["x"], ["y"])], [("x", (1, -5, 4))], ["y"])
    _refused(m, "'x'", "size -5 at axis 1", "negative")
    _refused(make_model([node("Relu", ["x"], ["y"])], X, ["y"]), "negative",
             input_shapes={"x": [1, -1, 6, 6]})


def test_input_size_zero_is_an_empty_tensor():
    """0 is a size (an empty tensor), not a symbolic dimension."""
    g = from_onnx(make_model([node("Relu", ["x"], ["y"])], [("x", (1, 0, 4))], ["y"]))
    assert g.t("x").shape == (1, 0, 4)


def test_duplicate_graph_inputs_and_outputs():
    m = make_model([node("Relu", ["x"], ["y"])], X + X, ["y"])
    _refused(m, "'x'", "listed twice")
    m = make_model([node("Relu", ["x"], ["y"])], X, ["y", "y"])
    _refused(m, "'y'", "listed twice")


def test_element_count_beyond_32_bit_indexing():
    m = make_model([node("Expand", ["x", "s"], ["y"], name="big")], [("x", (1, 1))], ["y"],
                   {"s": np.array([2 ** 20, 2 ** 20], np.int64)})
    _refused(m, "big", str(2 ** 40), str(MAX_ELEMENTS))
    _refused(make_model([node("Relu", ["x"], ["y"])], X, ["y"]), "32-bit",
             input_shapes={"x": [2 ** 16, 2 ** 16]})


def test_non_utf8_attribute():
    n = node("Gelu", ["x"], ["y"], name="bad_text")
    n.attribute.append(helper.make_attribute("approximate", b"\xff\xfe"))
    _refused(make_model([n], X, ["y"], opset=20), "bad_text", "UTF-8")


def test_initializer_data_of_the_wrong_size():
    m = make_model([node("Add", ["x", "c"], ["y"])], X, ["y"])
    t = numpy_helper.from_array(np.ones(4, np.float32), "c")
    t.raw_data = t.raw_data[:6]
    m.graph.initializer.append(t)
    _refused(m, "'c'", "does not match")
