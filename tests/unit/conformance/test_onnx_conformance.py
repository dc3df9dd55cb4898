"""The conformance harness itself (rvvkit/conformance/suite.py), on small hand-made models:
exclusion by category, parameter binding, and forked runs that survive crashes and hangs."""
import os
import signal
import time

import numpy as np
from onnx import TensorProto, helper

from conftest import make_model
from rvvkit.conformance import suite as oc

node = helper.make_node


def test_categories():
    dbl = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2])
    seq = helper.make_value_info("x", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    cases = {
        "dtypes outside rvvkit": make_model([node("Abs", ["x"], ["y"])], [dbl], ["y"]),
        "non-tensor graph I/O": make_model([node("Identity", ["x"], ["y"])], [seq], ["y"]),
        "random": make_model([node("RandomNormal", [], ["y"], shape=[2])], [], ["y"]),
        "dynamic output shape": make_model([node("NonZero", ["x"], ["y"])], [("x", (2,))],
                                           ["y"]),
        "training": make_model([node("Abs", ["x"], ["y"])], [("x", (2,))], ["y"]),
        None: make_model([node("Cast", ["x"], ["y"], to=TensorProto.INT64)], [("x", (2,))],
                         ["y"]),
    }
    for want, model in cases.items():
        name = "test_training_abs" if want == "training" else "test_x"
        assert oc.excluded(name, model) == want
    for category, reason, _ in oc.EXCLUDED:
        assert category and len(reason) > 20


def test_dtype_class():
    i64 = helper.make_tensor_value_info("x", TensorProto.INT64, [2])
    assert oc.dtype_class(make_model([node("Abs", ["x"], ["y"])], [("x", (2,))], [
        ("y", (2,))])) == "float32"
    assert oc.dtype_class(make_model([node("Abs", ["x"], ["y"])], [i64], ["y"])) == "int/bool"


def test_parameter_operands_become_initializers():
    shape = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    m = make_model([node("Reshape", ["x", "s"], ["y"])], [("x", (2, 3)), shape], ["y"])
    feeds = {"x": np.ones((2, 3), np.float32), "s": np.asarray([3, 2], np.int64)}
    bound, left = oc.bind(m, feeds)
    assert [vi.name for vi in bound.graph.input] == ["x"] and list(left) == ["x"]
    assert [i.name for i in bound.graph.initializer] == ["s"]
    assert [vi.name for vi in m.graph.input] == ["x", "s"]  # the case's model is untouched


def _crash():
    os.kill(os.getpid(), signal.SIGSEGV)


def _fail():
    raise AssertionError("values differ\nsecond line")


def test_forked_runs_report_pass_fail_crash_and_timeout():
    assert oc.isolated(lambda: None) == (True, "ok")
    assert oc.isolated(_fail) == (False, "AssertionError: values differ | second line")
    assert oc.isolated(_crash) == (False, f"crashed with signal {int(signal.SIGSEGV)}")
    t0 = time.monotonic()
    assert oc.isolated(lambda: time.sleep(30), timeout=1) == (False, "timeout after 1 s")
    assert time.monotonic() - t0 < 10
    results = sorted(oc.run_many([(i, (lambda: None) if i % 2 else _fail) for i in range(5)],
                                 jobs=2))
    assert [(k, ok) for k, ok, _ in results] == [(0, False), (1, True), (2, False), (3, True),
                                                 (4, False)]
