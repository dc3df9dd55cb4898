"""rvvkit.conformance.forked in a process that has initialised CUDA: its children start from a fork
server (a clean process), never by forking it, and report pass, failure, crash and timeout as forked
children do; a callable the fork server cannot take is one clear error."""
import functools
import os
import signal
import time

import pytest

from rvvkit.conformance import forked
from rvvkit.errors import ExecutionError
from rvvkit.runtime import cuda_state


def _not_forked_from(pid: int) -> None:
    assert os.getppid() != pid, "forked from the CUDA-initialised process"
    assert cuda_state.fork_error("x") is None, "the child inherited the CUDA state"


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _fail() -> None:
    raise AssertionError("values differ\nsecond line")


@pytest.fixture
def cuda_initialised(monkeypatch):
    monkeypatch.setattr(cuda_state, "_init_pid", os.getpid())


def test_children_of_a_cuda_process_come_from_the_fork_server(cuda_initialised):
    assert forked.isolated(functools.partial(_not_forked_from, os.getpid())) == (True, "ok")
    assert forked.isolated(_fail) == (False, "AssertionError: values differ | second line")
    assert forked.isolated(_crash) == (False, f"crashed with signal {int(signal.SIGSEGV)}")
    t0 = time.monotonic()
    assert forked.isolated(functools.partial(time.sleep, 30), timeout=1) == \
        (False, "timeout after 1 s")
    assert time.monotonic() - t0 < 10


def test_a_lambda_is_refused_in_one_line(cuda_initialised):
    with pytest.raises(ExecutionError, match="initialised CUDA.*picklable callable") as err:
        forked.isolated(lambda: None)
    assert "\n" not in str(err.value)


def test_without_cuda_children_are_forked():
    assert forked.isolated(functools.partial(_is_child_of, os.getpid())) == (True, "ok")
    assert forked.isolated(lambda: None) == (True, "ok")   # lambdas are fine when forking


def _is_child_of(pid: int) -> None:
    assert os.getppid() == pid
