"""Every operator test of tests/host/test_ops.py again, run under QEMU at VLEN 128, 256, 512 and
1024 and once with tail/mask-agnostic elements set to all ones (which catches code that reads
lanes past vl), each compared with onnxruntime exactly as on the host. The kernels compile once
per case (the RVV object does not depend on VLEN); only the QEMU runs repeat."""
import os
import sys

import pytest

import conftest
from qemu_support import needs_qemu

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "host"))
from test_ops import *  # noqa: E402,F401,F403  (collects every operator test here too)

QEMU_EXECUTORS = [("qemu", {"vlen": v}) for v in (128, 256, 512, 1024)] + \
    [("qemu", {"vlen": 128, "tail_ones": True})]

pytestmark = [pytest.mark.qemu, needs_qemu]


@pytest.fixture(autouse=True)
def _run_on_qemu(monkeypatch):
    monkeypatch.setattr(conftest, "EXECUTORS", QEMU_EXECUTORS)
    # The imported tests must reach the patched list, not a copy (else this file tests nothing).
    assert assert_matches.__globals__ is vars(conftest)  # noqa: F405
