"""`rvvkit run/bench/doctor --on ssh://...` from the command line, as a user runs them."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import rvvkit
from conftest import run_ort
from ssh_support import assert_close, needs_rvv, needs_sshd, small_feeds, small_model

pytestmark = [pytest.mark.ssh, needs_sshd]


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "rvvkit", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("ssh-cli")
    model = small_model()
    rvvkit.build(model).save(root / "small.rvv")
    np.savez(root / "in.npz", **small_feeds())
    return root, run_ort(model, small_feeds())


def test_run_on_board_writes_outputs(ssh_world, small):
    root, ref = small
    out = root / "out.npz"
    proc = cli("run", root / "small.rvv", "--inputs", root / "in.npz", "--output", out,
               "--on", "ssh://native-board")
    assert proc.returncode == 0, proc.stderr
    assert "ssh://native-board" in proc.stderr
    with np.load(out) as got:
        assert_close({k: got[k] for k in got.files}, ref, "rvvkit run --on ssh://native-board")
    assert ssh_world.leftovers(ssh_world.workdir("native-board")) == []


def test_run_failing_on_board_writes_nothing(ssh_world, small):
    root, _ = small
    out = root / "never.npz"
    proc = cli("run", root / "small.rvv", "--inputs", root / "in.npz", "--output", out,
               "--on", "ssh://native-board?cflags=-DRVK_BREAK+-include+/nonexistent.h")
    assert proc.returncode == 1
    assert "/nonexistent.h" in proc.stderr and "ssh://native-board" in proc.stderr
    assert not out.exists() and not [p for p in os.listdir(root) if "never" in p]


@needs_rvv
def test_bench_two_boards_one_table(ssh_world, small):
    root, _ = small
    proc = cli("bench", root / "small.rvv", "--on", "ssh://native-board,ssh://rvv-board",
               "--repeat", 2, "--warmup", 1)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert sum(1 for ln in lines if ln.startswith("executor")) == 1
    rows = [ln for ln in lines if ln.startswith("ssh://")]
    assert [r.split()[0] for r in rows] == ["ssh://native-board", "ssh://rvv-board"]
    assert "gcc" in rows[0] and "qemu latency is emulation speed" in proc.stdout


def test_bench_reports_a_failing_board_and_the_others(ssh_world, small):
    root, _ = small
    proc = cli("bench", root / "small.rvv", "--on",
               "ssh://native-board,ssh://native-board?compiler=/nonexistent", "--repeat", 1)
    assert proc.returncode == 1
    assert "/nonexistent" in proc.stderr
    assert [ln.split()[0] for ln in proc.stdout.splitlines() if ln.startswith("ssh://")] == \
        ["ssh://native-board"]


@needs_rvv
def test_doctor_on_rvv_board(ssh_world):
    proc = cli("doctor", "--on", "ssh://rvv-board")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    rows = {ln.split()[0]: ln for ln in text.splitlines() if ln.startswith("  ")}
    assert "accepted" in rows["-march=rv64gcv"]
    assert "256 bits" in rows["VLEN"]  # the wrapper's vlen=256, measured by a program
    assert rows["runs"].split()[-1] == "riscv64"
    assert "cores" in rows and "OS" in rows and "selected" in rows


def test_doctor_here_and_on_native_board(ssh_world):
    proc = cli("doctor")
    assert proc.returncode == 0, proc.stderr
    for section in ("host compilers", "riscv64 cross compilers", "QEMU", "CUDA"):
        assert section in proc.stdout
    proc = cli("doctor", "--on", "ssh://native-board")
    assert proc.returncode == 0, proc.stderr
    assert "not applicable" in proc.stdout and "gcc" in proc.stdout
    proc = cli("doctor", "--on", "ssh://wrong-key-board")
    assert proc.returncode == 1 and "authentication" in proc.stderr
