"""What rvvkit starts ends with it: `rvvkit bench --on qemu` with a long run in progress,
ended by SIGTERM, SIGINT, SIGHUP or its reader going away, exits with 128 + the signal and
leaves no qemu-riscv64 behind (tests/signal_support.py)."""
from __future__ import annotations

import pytest

import rvvkit
from qemu_support import needs_qemu, small_model
from signal_support import ENDINGS, LONG_REPEAT, Rvvkit, end_and_check

pytestmark = [pytest.mark.qemu, needs_qemu]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("qemu-signals") / "small.rvv"
    rvvkit.build(small_model()).save(path)
    return path


@pytest.mark.parametrize("how", ENDINGS)
def test_qemu_runner_ends_with_rvvkit(small, how):
    rv = Rvvkit(["bench", small, "--on", "qemu", "--repeat", LONG_REPEAT, "--warmup", 0,
                 "--no-count"])
    rv.wait_for_child("qemu-riscv64")
    end_and_check(rv, how)
