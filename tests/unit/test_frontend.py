"""The ONNX frontend's error handling: every user mistake is a ModelError (or its subclass
UnsupportedOperator) that says what is wrong and where, raised before any code is generated."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import make_model, rand
from rvvkit.errors import ModelError, RvvkitError, UnsupportedOperator
from rvvkit.frontend.onnx import from_onnx

node = helper.make_node


def relu_model(shape=(1, 3, 4, 4), opset=13):
    return make_model([node("Relu", ["x"], ["y"], name="relu")], [("x", shape)], ["y"],
                      opset=opset)


def test_every_unsupported_operator_listed_at_once():
    nodes = [node("Relu", ["x"], ["a"], name="ok_relu"),
             node("Einsum", ["a"], ["b"], equation="ij->ji", name="einsum_first"),
             node("Erf", ["b"], ["c"], name="erf_node"),
             node("Einsum", ["c"], ["y"], equation="ij->ji", name="einsum_second")]
    m = make_model(nodes, [("x", (3, 4))], ["y"])
    with pytest.raises(UnsupportedOperator) as info:
        rvvkit.build(m)
    err = info.value
    assert isinstance(err, ModelError) and isinstance(err, RvvkitError)
    assert err.op_types == ["Einsum", "Erf"]
    assert sorted(err.ops) == [("Einsum", "einsum_first"), ("Einsum", "einsum_second"),
                               ("Erf", "erf_node")]
    msg = str(err)
    for word in ("Einsum", "Erf", "einsum_first", "einsum_second", "erf_node"):
        assert word in msg
    assert "ok_relu" not in msg


def test_unsupported_custom_domain_and_unnamed_node():
    nodes = [node("Relu", ["x"], ["a"]), node("MyOp", ["a"], ["y"], domain="com.example")]
    m = make_model(nodes, [("x", (3,))], ["y"])
    m.graph.node[1].name = ""
    with pytest.raises(UnsupportedOperator) as info:
        rvvkit.build(m)
    assert "com.example.MyOp" in str(info.value)
    assert "#1" in str(info.value)  # unnamed nodes are named by position


def test_malformed_bytes():
    with pytest.raises(ModelError, match="cannot parse"):
        rvvkit.build(b"\x08\x07this is not a protobuf\xff\xff\xff")


def test_malformed_file(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(ModelError, match="garbage.onnx"):
        rvvkit.build(str(path))


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ModelError, match="not found") as info:
        rvvkit.build(str(missing))
    assert "nope.onnx" in str(info.value)


def test_opset_too_old_names_the_opset():
    with pytest.raises(ModelError) as info:
        rvvkit.build(relu_model(opset=6))
    assert "opset 6" in str(info.value)


def test_model_file_path_and_bytes_are_accepted(tmp_path):
    m = relu_model()
    path = tmp_path / "relu.onnx"
    path.write_bytes(m.SerializeToString())
    for src in (str(path), path, m.SerializeToString(), m):
        g = from_onnx(src)
        assert [n.op for n in g.nodes] == ["Relu"]


def _symbolic(dims):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    return make_model([node("Relu", ["x"], ["y"])], [x], ["y"])


def test_symbolic_non_batch_dim_needs_input_shape():
    m = _symbolic(["N", 3, "H", 8])
    with pytest.raises(ModelError) as info:
        rvvkit.build(m)
    msg = str(info.value)
    assert "'x'" in msg and "H" in msg and "axis 2" in msg and "--input-shape" in msg


def test_input_shape_override():
    m = _symbolic(["N", 3, "H", 8])
    g = from_onnx(m, input_shapes={"x": (2, 3, 5, 8)})
    assert g.t("x").shape == (2, 3, 5, 8)
    art = rvvkit.build(m, input_shapes={"x": [2, 3, 5, 8]})
    assert art.meta["inputs"][0]["shape"] == [2, 3, 5, 8]
    assert art.meta["outputs"][0]["shape"] == [2, 3, 5, 8]


def test_input_shape_override_of_a_static_input():
    g = from_onnx(relu_model(shape=(1, 3, 4, 4)), input_shapes={"x": [2, 3, 4, 4]})
    assert g.t("x").shape == (2, 3, 4, 4)


def test_input_shape_for_unknown_input():
    with pytest.raises(ModelError, match="unknown input"):
        from_onnx(relu_model(), input_shapes={"data": [1, 3, 4, 4]})


def test_symbolic_batch_defaults_to_one(capsys):
    g = from_onnx(_symbolic(["batch", 3, 4, 4]))
    assert g.t("x").shape == (1, 3, 4, 4)
    assert "batch" in capsys.readouterr().err


def test_input_without_shape():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    m = make_model([node("Relu", ["x"], ["y"])], [x], ["y"])
    with pytest.raises(ModelError, match="no shape"):
        rvvkit.build(m)


@pytest.mark.parametrize("elem", [TensorProto.INT64, TensorProto.FLOAT16, TensorProto.DOUBLE],
                         ids=["int64", "float16", "double"])
def test_non_float_input(elem):
    x = helper.make_tensor_value_info("x", elem, [2, 3])
    m = make_model([node("Relu", ["x"], ["y"])], [x], ["y"])
    with pytest.raises(ModelError) as info:
        rvvkit.build(m)
    assert "'x'" in str(info.value) and "float32" in str(info.value)


def test_node_reading_undefined_tensor():
    nodes = [node("Relu", ["x"], ["a"], name="first"),
             node("Add", ["a", "ghost"], ["y"], name="adder")]
    m = make_model(nodes, [("x", (2, 3))], ["y"])
    with pytest.raises(ModelError) as info:
        rvvkit.build(m)
    msg = str(info.value)
    assert "adder" in msg and "ghost" in msg


def test_nodes_out_of_topological_order():
    nodes = [node("Relu", ["a"], ["y"], name="second"), node("Relu", ["x"], ["a"], name="first")]
    m = make_model(nodes, [("x", (2, 3))], ["y"])
    with pytest.raises(ModelError, match="second"):
        rvvkit.build(m)


def test_graph_output_not_produced():
    m = make_model([node("Relu", ["x"], ["y"])], [("x", (2, 3))], ["y", "nowhere"])
    with pytest.raises(ModelError, match="nowhere"):
        rvvkit.build(m)


def test_bad_shapes_name_the_node():
    m = make_model([node("Add", ["a", "b"], ["y"], name="bad_add")],
                   [("a", (2, 3)), ("b", (4,))], ["y"])
    with pytest.raises(ModelError) as info:
        rvvkit.build(m)
    assert "bad_add" in str(info.value) and "broadcast" in str(info.value)


def test_reshape_with_runtime_shape_is_rejected():
    m = make_model([node("Reshape", ["x", "s"], ["y"], name="dyn_reshape")],
                   [("x", (2, 3)), ("s", (2,))], ["y"])
    with pytest.raises(ModelError, match="dyn_reshape.*build-time constant"):
        rvvkit.build(m)


def test_batchnorm_training_mode_rejected():
    p = {k: np.ones(3, np.float32) for k in ("s", "b", "m", "v")}
    m = make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                         training_mode=1, name="bn_train")], [("x", (1, 3, 2, 2))], ["y"], p,
                   opset=15)
    with pytest.raises(ModelError, match="bn_train"):
        rvvkit.build(m)


def test_dropout_training_mode_rejected():
    m = make_model([node("Dropout", ["x", "", "t"], ["y"], name="drop_train")],
                   [("x", (2, 3))], ["y"], {"t": np.asarray(True)})
    with pytest.raises(ModelError, match="drop_train.*training_mode"):
        rvvkit.build(m)


def test_fold_only_op_on_runtime_tensor_is_unsupported():
    """Gather is supported on constants only: on an activation it is reported, with the node."""
    m = make_model([node("Gather", ["x", "i"], ["y"], name="gather_act")], [("x", (4, 3))],
                   ["y"], {"i": np.asarray([0, 2], np.int64)})
    with pytest.raises(UnsupportedOperator) as info:
        rvvkit.build(m)
    assert "gather_act" in str(info.value) and "Gather" in str(info.value)


def test_initializer_only_model_folds_to_constant_output():
    m = make_model([node("Add", ["a", "b"], ["y"])], [("x", (2,))], ["y"],
                   {"a": rand(2, seed=1), "b": rand(2, seed=2)})
    g = from_onnx(m)
    assert g.nodes == [] and g.is_const("y")
    np.testing.assert_allclose(g.const("y"), rand(2, seed=1) + rand(2, seed=2))


def test_internal_op_name_is_not_accepted_from_a_model():
    """rvvkit's own ops (the affine BN becomes) are outside the ONNX namespace: a model cannot
    name one, under its qualified name or any other."""
    for op in ("rvvkit.ChannelAffine", "ChannelAffine"):
        m = make_model([node(op, ["x", "s", "t"], ["y"], name="sneaky")], [("x", (1, 2, 3))],
                       ["y"], {"s": rand(2), "t": rand(2)})
        with pytest.raises(UnsupportedOperator) as info:
            from_onnx(m)
        assert info.value.ops == [(op, "sneaky")]


@pytest.mark.parametrize("opset, axis, coerce", [(11, 1, True), (13, 2, False)])
def test_opset_is_the_graphs_not_a_node_attribute(opset, axis, coerce):
    """Softmax changed meaning at opset 13; inference reads graph.opset and settles the axis
    (and whether the input is flattened there) into canonical attributes."""
    m = make_model([node("Softmax", ["x"], ["y"], name="sm")], [("x", (2, 3, 4))], ["y"],
                   opset=opset)
    g = from_onnx(m)
    assert g.opset == opset
    (sm,) = g.nodes
    assert (sm.attrs["axis"], sm.attrs["coerce"]) == (axis, coerce)
    assert not [k for n in g.nodes for k in n.attrs if k.startswith("_")]
