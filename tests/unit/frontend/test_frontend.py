"""The ONNX frontend's error handling: every user mistake is a ModelError (or its subclass
UnsupportedOperator) that says what is wrong and where, raised before any code is generated."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from conftest import make_model, rand
from rvvkit.errors import ModelError, ModelProblems, RvvkitError, UnsupportedOperator
from rvvkit.frontend.onnx import from_onnx

node = helper.make_node


def relu_model(shape=(1, 3, 4, 4), opset=13):
    return make_model([node("Relu", ["x"], ["y"], name="relu")], [("x", shape)], ["y"],
                      opset=opset)


def test_every_unsupported_operator_listed_at_once():
    nodes = [node("Relu", ["x"], ["a"], name="ok_relu"),
             node("MadeUpOpA", ["a"], ["b"], name="first_a"),
             node("MadeUpOpB", ["x"], ["c"], name="only_b"),
             node("MadeUpOpA", ["c"], ["y"], name="second_a")]
    m = make_model(nodes, [("x", (3, 4))], ["y", "b"])
    with pytest.raises(UnsupportedOperator) as info:
        rvvkit.build(m)
    err = info.value
    assert isinstance(err, ModelError) and isinstance(err, RvvkitError)
    assert err.op_types == ["MadeUpOpA", "MadeUpOpB"]
    # second_a reads only_b's output: it is unsupported in its own right, so it is listed too
    assert sorted(err.ops) == [("MadeUpOpA", "first_a"), ("MadeUpOpA", "second_a"),
                               ("MadeUpOpB", "only_b")]
    msg = str(err)
    for word in ("MadeUpOpA", "MadeUpOpB", "first_a", "only_b"):
        assert word in msg
    assert "ok_relu" not in msg


def test_every_problem_in_one_error(monkeypatch):
    """Unsupported op, bad attribute value, unsupported input dtype, a dimension that cannot be
    made static and a fold-only op on a run-time tensor: one error, one line each, with the
    node or input named, and nothing generated."""
    import dataclasses
    from rvvkit.ops import REGISTRY
    monkeypatch.setitem(REGISTRY, "Relu", dataclasses.replace(REGISTRY["Relu"], lower=None))
    half = helper.make_tensor_value_info("h", TensorProto.INT16, [2, 3])
    sym = helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, "W"])
    nodes = [node("MadeUpOp", ["x"], ["a"], name="mystery"),
             node("Softmax", ["x"], ["b"], axis=7, name="bad_axis"),
             node("Relu", ["x"], ["c"], name="fold_only"),
             node("Neg", ["h"], ["d"], name="reads_half"),
             node("Neg", ["s"], ["e"], name="reads_sym"),
             node("Neg", ["x"], ["f"], name="fine")]
    m = make_model(nodes, [("x", (2, 3)), half, sym], ["a", "b", "c", "d", "e", "f"])
    with pytest.raises(ModelProblems) as info:
        rvvkit.build(m)
    err = info.value
    lines = str(err).splitlines()
    assert lines[0] == "5 problems in the model:"
    for where in ("mystery", "bad_axis", "fold_only", "'h'", "'s'"):
        assert sum(where in line for line in lines[1:]) == 1, (where, lines)
    assert not any(w in str(err) for w in ("reads_half", "reads_sym", "'fine'"))
    assert ("MadeUpOp", "mystery") in err.ops and ("Relu", "fold_only") in err.ops
    assert isinstance(err, UnsupportedOperator)


def test_cli_lists_every_problem_without_traceback(tmp_path):
    import onnx
    from rvvkit.cli import main
    nodes = [node("MadeUpOp", ["x"], ["a"], name="mystery"),
             node("Softmax", ["x"], ["b"], axis=7, name="bad_axis")]
    path = tmp_path / "two.onnx"
    onnx.save(make_model(nodes, [("x", (2, 3))], ["a", "b"]), str(path))
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["build", str(path), "-q", "-o", str(tmp_path / "two.rvv")])
    text = err.getvalue()
    assert code == 1 and "Traceback" not in text
    lines = text.strip().splitlines()
    assert lines[0] == "rvvkit: error: 2 problems in the model:"
    assert len(lines) == 3 and "mystery" in lines[1] and "bad_axis" in lines[2]
    assert not (tmp_path / "two.rvv").exists()


def _typed(kind_name):
    elem = helper.make_tensor_type_proto(TensorProto.FLOAT, [2])
    return {"sequence": helper.make_sequence_type_proto(elem),
            "optional": helper.make_optional_type_proto(elem),
            "map": helper.make_map_type_proto(TensorProto.INT64, elem),
            "sparse": helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, [2, 3])}[kind_name]


@pytest.mark.parametrize("kind, shown", [("sequence", "sequence(tensor(float))"),
                                         ("optional", "optional(tensor(float))"),
                                         ("map", "map(int64, tensor(float))"),
                                         ("sparse", "sparse_tensor(float)")])
def test_non_tensor_input_is_named_with_its_type(kind, shown):
    vi = helper.make_value_info("seq_in", _typed(kind))
    m = make_model([node("Identity", ["seq_in"], ["y"])], [vi], ["y"])
    with pytest.raises(ModelError) as info:
        from_onnx(m)
    msg = str(info.value)
    assert "'seq_in'" in msg and shown in msg and "KeyError" not in msg


def test_non_tensor_output_is_named_with_its_type():
    m = make_model([node("Relu", ["x"], ["y"])], [("x", (2,))], ["y"])
    m.graph.output[0].CopyFrom(helper.make_value_info("y", _typed("sequence")))
    with pytest.raises(ModelError, match=r"output 'y'.*sequence\(tensor\(float\)\)"):
        from_onnx(m)


def test_dropout_mask_is_all_true():
    m = make_model([node("Dropout", ["x"], ["y", "mask"], name="drop")], [("x", (3, 5))],
                   ["y", "mask"])
    x = rand(3, 5)
    for _ in range(2):  # the second run finds the arena dirty: the mask must be written
        with rvvkit.load(rvvkit.build(m)) as sess:
            out = sess.run({"x": x})
        np.testing.assert_array_equal(out["y"], x)
        assert out["mask"].dtype == np.bool_ and out["mask"].all()


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


def test_empty_file_is_not_a_model(tmp_path):
    """Empty bytes parse as an empty ModelProto: named as no model, not as an old opset."""
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelError, match="empty.onnx is not an ONNX model"):
        rvvkit.build(str(path))
    with pytest.raises(ModelError, match="model bytes is not an ONNX model"):
        rvvkit.build(b"")


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ModelError, match="not found") as info:
        rvvkit.build(str(missing))
    assert "nope.onnx" in str(info.value)


def test_old_opset_is_upgraded(capsys):
    g = from_onnx(relu_model(opset=6))
    assert g.opset >= 7 and [n.op for n in g.nodes] == ["Relu"]
    err = capsys.readouterr().err
    assert "opset 6" in err and "upgraded" in err and len(err.strip().splitlines()) == 1


def test_old_opset_that_cannot_be_upgraded():
    m = make_model([node("Upsample", ["x"], ["y"], scales=[1.0, 2.0], name="up")],
                   [("x", (2, 3))], ["y"], opset=6)
    with pytest.raises(ModelError) as info:
        from_onnx(m)
    msg = str(info.value)
    assert "opset 6" in msg and "version_converter" in msg and "Upsample" in msg


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


@pytest.mark.parametrize("elem", [TensorProto.INT64, TensorProto.INT16, TensorProto.UINT32],
                         ids=["int64", "int16", "uint32"])
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


def test_fold_only_op_on_runtime_tensor_is_unsupported(monkeypatch):
    """An op supported on constants only is reported on an activation, with the node."""
    import dataclasses
    from rvvkit.ops import REGISTRY
    monkeypatch.setitem(REGISTRY, "Gather", dataclasses.replace(REGISTRY["Gather"], lower=None))
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


def test_cli_build_says_the_opset_was_upgraded(tmp_path):
    import contextlib
    import io
    import onnx
    from rvvkit.cli import main
    path = tmp_path / "old.onnx"
    onnx.save(relu_model(opset=6), str(path))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["build", str(path), "-q", "-o", str(tmp_path / "old.rvv")])
    assert code == 0 and (tmp_path / "old.rvv").exists()
    assert err.getvalue().strip() == ("rvvkit: model uses opset 6; upgraded to opset 13 with "
                                      "onnx.version_converter")
