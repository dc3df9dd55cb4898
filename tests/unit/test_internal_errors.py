"""A failure of rvvkit's own code is told apart from a fault of the model: an exception that an
op's inference, folding or lowering did not raise on purpose is an InternalError (one line:
a bug, the op and node, the exception, please report; `rvvkit` exits 70), unless the node
breaks its ONNX schema, which explains it as a ModelError naming what is wrong."""
import contextlib
import io

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model
from rvvkit.errors import InternalError, ModelError
from rvvkit.ops import REGISTRY

node = helper.make_node
X = [("x", (1, 2, 6, 6))]


def _folding_relu():
    """Relu of a constant (folded at build time), added to the input."""
    return make_model([node("Relu", ["c"], ["r"], name="relu_of_c"),
                       node("Add", ["x", "r"], ["y"], name="add")], X, ["y"],
                      {"c": np.ones((1, 2, 6, 6), np.float32)})


def _raises(exc_type):
    def fail(*_args):
        raise exc_type("unexpected in rvvkit's code")
    return fail


@pytest.mark.parametrize("exc_type", [TypeError, IndexError, AttributeError, KeyError])
def test_an_exception_in_folding_is_an_internal_error(exc_type, monkeypatch):
    monkeypatch.setattr(REGISTRY["Relu"], "evaluate", _raises(exc_type))
    with pytest.raises(InternalError) as info:
        rvvkit.build(_folding_relu())
    err = info.value
    assert not isinstance(err, ModelError)
    assert (err.op, err.node) == ("Relu", "relu_of_c") and isinstance(err.exc, exc_type)
    msg = str(err)
    assert "\n" not in msg and msg.startswith("internal error (a bug in rvvkit")
    assert "Relu node 'relu_of_c'" in msg and exc_type.__name__ in msg and "report" in msg


def test_an_exception_in_lowering_is_an_internal_error(monkeypatch):
    monkeypatch.setattr(REGISTRY["Relu"], "lower", _raises(IndexError))
    m = make_model([node("Relu", ["x"], ["y"], name="the_relu")], X, ["y"])
    with pytest.raises(InternalError, match="Relu node 'the_relu': IndexError"):
        rvvkit.build(m)


def test_cli_reports_an_internal_error_in_one_line(tmp_path, monkeypatch):
    import onnx
    from rvvkit.cli import EXIT_INTERNAL, main
    monkeypatch.setattr(REGISTRY["Relu"], "evaluate", _raises(TypeError))
    path = tmp_path / "m.onnx"
    onnx.save(_folding_relu(), str(path))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["build", str(path), "-q", "-o", str(tmp_path / "m.rvv")])
    text = err.getvalue()
    assert code == EXIT_INTERNAL == 70 and "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("rvvkit: internal error (a bug in rvvkit")
    assert "Relu node 'relu_of_c'" in lines[0] and "TypeError" in lines[0]
    assert not (tmp_path / "m.rvv").exists()


@pytest.mark.parametrize("make, words", [
    (lambda: node("AveragePool", ["x"], ["y"], name="n"), ["required attribute 'kernel_shape'"]),
    (lambda: node("Gather", ["x"], ["y"], name="n"), ["1 input given", "takes 2"]),
    (lambda: node("Gather", ["x", ""], ["y"], name="n"), ["1 input given"]),
    (lambda: node("Transpose", ["x"], ["y"], name="n", perm=3), ["'perm'", "INT", "INTS"]),
], ids=["missing_attribute", "missing_input", "empty_input", "attribute_type"])
def test_a_node_that_breaks_its_schema_stays_a_model_error(make, words):
    """Such nodes make an op's inference fail unexpectedly (a KeyError, an IndexError): the
    schema names the fault, so the user reads what to fix in the model, not a bug report."""
    with pytest.raises(ModelError) as info:
        rvvkit.build(make_model([make()], X, ["y"]))
    msg = str(info.value)
    assert "n'" in msg and "internal error" not in msg
    for w in words:
        assert w in msg, msg
