"""What rvvkit starts ends with it: a compile in progress (a compiler that takes long, made
by a wrapper that sleeps on the model's source) when the `rvvkit` command gets SIGTERM
(`timeout`, CI runners, service managers), SIGINT (Ctrl-C), SIGHUP (a closed terminal), or
loses the reader of its output (`| head`): rvvkit exits with 128 + the signal, says one line
at most, and no compiler is left running. The QEMU runner and a board's run: tests/qemu and
tests/ssh test_*signals.py."""
from __future__ import annotations

import os
import signal
import time

import pytest
from onnx import helper

import rvvkit
from conftest import make_model
from rvvkit.cli import main
from signal_support import ENDINGS, Rvvkit, end_and_check

SLEEP = "sleep 3000"  # the stand-in for a long compile: nothing else runs this command line


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("signals") / "tiny.rvv"
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 4))],
                       [("y", (1, 4))], {})
    rvvkit.build(model, cuda=False).save(path)
    return path


@pytest.fixture
def slow_cc(tmp_path):
    """gcc, except that compiling the model never ends (probes still answer at once)."""
    path = tmp_path / "slowcc"
    path.write_text(f'#!/bin/sh\ncase "$*" in *model.c*) exec {SLEEP};; esac\n'
                    'exec gcc "$@"\n')
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("how", ENDINGS)
def test_compile_ends_with_rvvkit(tiny, slow_cc, how):
    rv = Rvvkit(["run", tiny, "--no-cache"], env={"RVVKIT_COMPILER": str(slow_cc)})
    rv.wait_for_child(SLEEP)
    end_and_check(rv, how)


def test_hangup_ignored_from_the_start_stays_ignored(tiny, slow_cc):
    """`nohup rvvkit ...`: SIGHUP does not end it; SIGTERM still does."""
    rv = Rvvkit(["run", tiny, "--no-cache"], env={"RVVKIT_COMPILER": str(slow_cc)},
                ignored=["HUP"])
    try:
        rv.wait_for_child(SLEEP)
        os.kill(rv.proc.pid, signal.SIGHUP)
        time.sleep(1.0)  # time enough to end, had it been asked to
        assert rv.proc.poll() is None and rv.marked(), "SIGHUP ended a nohup rvvkit"
    finally:
        end_and_check(rv, "SIGTERM")


def test_main_called_from_python_keeps_the_callers_handlers(tmp_path):
    """The handlers are the command's: main() from Python puts the caller's back."""
    ours = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE)
    before = {s: signal.getsignal(s) for s in ours}
    assert main(["inspect", str(tmp_path / "missing.rvv")]) == 1
    assert {s: signal.getsignal(s) for s in ours} == before
