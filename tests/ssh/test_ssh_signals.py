"""What rvvkit starts ends with it, on a board too: `rvvkit bench --on ssh://...` with a long
run in progress on the board, ended by SIGTERM, SIGINT, SIGHUP or its reader going away,
exits with 128 + the signal, kills the runner's process group on the board (as a timeout
does) and removes the session's temporary dir there. The board runs the runner behind the
wrapper `env RVVKIT_TEST_MARKER=...`, which marks it (tests/signal_support.py)."""
from __future__ import annotations

import os

import pytest

import rvvkit
from signal_support import ENDINGS, LONG_REPEAT, MARKER_VAR, Rvvkit, end_and_check
from ssh_support import needs_sshd, small_model

pytestmark = [pytest.mark.ssh, needs_sshd]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("ssh-signals") / "small.rvv"
    rvvkit.build(small_model()).save(path)
    return path


def _session_dir(runner_cmdline: str) -> str:
    """The session's temp dir on the board: where the runner's artifact is."""
    artifact = next(a for a in runner_cmdline.split() if a.endswith("/model.rvv"))
    return os.path.dirname(artifact)


@pytest.mark.parametrize("how", ENDINGS)
def test_board_run_ends_with_rvvkit(ssh_world, small, how):
    board = f"ssh://native-board?wrapper=env+{MARKER_VAR}={{marker}}"
    rv = Rvvkit(["bench", small, "--on", board, "--repeat", LONG_REPEAT, "--warmup", 0])
    runner = rv.wait_for_child("rvvkit_runner")
    session = _session_dir(next(iter(runner.values())))
    end_and_check(rv, how)
    assert os.path.isdir(os.path.dirname(session)) and not os.path.exists(session)
