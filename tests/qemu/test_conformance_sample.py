"""A fixed sample of passing ONNX node conformance cases (QEMU_SAMPLE in
tests/host/conformance_lists.py: >= 150 small cases, a few per operator, chosen
deterministically by benchmarks/conformance.py --write-lists) on the `op_executor` set without
the host, which tests/host/test_onnx_backend.py runs every case on: QEMU at VLEN 128 and 512
with tail/mask-agnostic elements all ones, the CUDA emulator, and a GPU where there is one."""
import functools
import importlib.util
import os

import pytest

import executors
from rvvkit.conformance import suite as oc


def _lists():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "host",
                        "conformance_lists.py")
    spec = importlib.util.spec_from_file_location("conformance_lists", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLE = _lists().QEMU_SAMPLE
TARGETS = executors.params([e for e in executors.sample() if e.on != "host"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", SAMPLE)
def test_conformance_sample(name, target):
    case = oc.load_cases()[name]
    # a partial, not a lambda: a worker that has initialised CUDA (a GPU test ran in it)
    # starts the case from a fork server, which pickles it (rvvkit.conformance.forked)
    passed, why = oc.isolated(functools.partial(oc.run_rvvkit, case, on=target.on,
                                                **target.options))
    assert passed, why


def test_sample_is_large_enough():
    assert len(SAMPLE) >= 150 and len(set(SAMPLE)) == len(SAMPLE)
