"""ONNX's whole node conformance suite (onnx.backend.test, ~1900 cases) run through
rvvkit.conformance.backend on the host, one pytest case per ONNX case (xdist-friendly: `-n auto`).

Three lists decide what each case must do (rvvkit/conformance/suite.py holds the logic):
- EXCLUDED (rvvkit/conformance/suite.py): out of scope by category, each with its reason
  (other domains, non-tensor graph I/O, dtypes outside rvvkit's table, training, random,
  data-dependent output shapes, control flow). Not collected; test_exclusion_categories_in_use
  checks every category still matches a case.
- NOT_YET (tests/host/conformance_lists.py, generated): in scope but failing today. Each is
  run and must still FAIL, so the list cannot go stale: a case that starts passing fails here
  until it is removed.
- everything else must pass (outputs compared as ONNX does: dtype, shape, rtol/atol).
The Cast and CastLike cases excluded for their dtypes are still built, once: each must be
refused with a ModelError naming the type (test_casts_to_and_from_types_outside_rvvkit_...).

Node tests feed build-time operands (Reshape's shape, Slice's starts, weights, ...) as graph
inputs; the runner binds them as initializers (PARAM_OPERANDS in rvvkit/conformance/suite.py).
Each case runs in a forked child, so a crash in generated code fails that case only.

Time: ~1380 cases, 17 min run one at a time on 2 busy cores (CI: `-n auto`); the QEMU/CUDA-
emulator sample (tests/qemu/test_conformance_sample.py, 160 cases x 3 executors) 15 min.
Regenerate the lists after adding or fixing operators (runs the suite on rvvkit and
onnxruntime, 2 cases at a time: ~7 min):

    python3 benchmarks/conformance.py --write-lists tests/host/conformance_lists.py
"""
import importlib.util
import os
import re

import numpy as np
import pytest

from executors import ci_share
from rvvkit.conformance import suite as oc
from rvvkit.errors import ModelError
from rvvkit.conformance.backend import RvvkitBackend

REGENERATE = "python3 benchmarks/conformance.py --write-lists tests/host/conformance_lists.py"


def load_lists():
    """tests/host/conformance_lists.py, by path (also imported from tests/qemu)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance_lists.py")
    spec = importlib.util.spec_from_file_location("conformance_lists", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LISTS = load_lists()
CASES = oc.load_cases()
IN_SCOPE = sorted(n for n, c in CASES.items() if not oc.excluded(n, c.model))
# CI's matrix runs half of them (a stable hash of the name), scripts/nightly.sh all
# (tests/executors.py ci_share); QEMU_SAMPLE and the CUDA emulator cover others in CI.
RUN = [n for n in IN_SCOPE if ci_share(n, 2)]


@pytest.mark.parametrize("name", RUN)
def test_node(name):
    passed, why = oc.isolated(lambda: oc.run_rvvkit(CASES[name]))
    if name in LISTS.NOT_YET:
        assert not passed, (f"{name} passes now: take it off NOT_YET ({REGENERATE})")
    else:
        assert passed, why


# Cast and CastLike cases out of scope for their dtypes (bfloat16, float8,
# int4, ...): a user may still hand rvvkit such a model
CAST_CASES = sorted(n for n, c in CASES.items()
                    if n.startswith("test_cast") and oc.excluded(n, c.model))
OUTSIDE_TYPES = re.compile(r"\b(float64|b?float16|float[48]\w*|u?int[24]|u?int16|uint32|uint64|"
                           r"string)\b")


def test_casts_to_and_from_types_outside_rvvkit_are_refused():
    """Each is refused at build time with a ModelError naming the type, never a crash (Cast
    to float64 once died of KeyError: 'float64' in its lowering) nor a wrong number."""
    assert len(CAST_CASES) > 100
    for name in CAST_CASES:
        with pytest.raises(ModelError) as info:
            oc.run_rvvkit(CASES[name])
        msg = str(info.value)
        assert OUTSIDE_TYPES.search(msg) and "internal error" not in msg, (name, msg)


def test_lists_name_in_scope_cases():
    stale = sorted(set(LISTS.NOT_YET) - set(IN_SCOPE))
    assert not stale, f"not in-scope cases (renamed or excluded?): {stale}; {REGENERATE}"
    assert set(LISTS.QEMU_SAMPLE) <= set(IN_SCOPE) - set(LISTS.NOT_YET)


def test_exclusion_categories_in_use():
    used = {oc.excluded(n, c.model) for n, c in CASES.items()}
    for category, reason, _ in oc.EXCLUDED:
        assert reason and category in used, f"category {category!r} excludes no case"


def test_backend_rep_takes_list_or_dict():
    from onnx import helper
    from conftest import make_model, rand
    m = make_model([helper.make_node("Sub", ["a", "b"], ["y"])], [("a", (2, 3)), ("b", (3,))],
                   [("y", (2, 3))], {"unused": rand(4)})
    rep = RvvkitBackend.prepare(m)
    a, b = rand(2, 3, seed=1), rand(3, seed=2)
    (by_order,) = rep.run([a, b])
    np.testing.assert_allclose(by_order, a - b, rtol=1e-6)
    np.testing.assert_allclose(rep.run({"b": b, "a": a}).y, a - b, rtol=1e-6)
    np.testing.assert_allclose(RvvkitBackend.run_model(m, [a, b])[0], a - b, rtol=1e-6)
    try:
        rep.run([a])
    except ValueError as exc:
        assert "['a', 'b']" in str(exc)
    else:
        raise AssertionError("a missing input must be refused")
    assert RvvkitBackend.supports_device("CPU") and not RvvkitBackend.supports_device("CUDA")
