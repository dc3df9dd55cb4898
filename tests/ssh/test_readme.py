"""Every command in the README runs, as written: the short tour line by line in one directory
(its board, `ssh://my-board`, is the loopback RVV board of ssh_support under that alias), then
its Python snippet there. The two set-up commands are what CI and the examples test run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest

from ssh_support import needs_rvv, needs_sshd

pytestmark = [pytest.mark.ssh, pytest.mark.qemu, needs_sshd, needs_rvv]

ROOT = Path(__file__).resolve().parents[2]
SETUP_COMMANDS = ("bash scripts/setup.sh && bash examples/quickstart.sh",
                  "bash scripts/setup.sh --board && python3 -m pytest -n 2 -q")


def code_blocks(lang: str) -> List[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def commands() -> Tuple[List[str], List[str]]:
    """(set-up commands, tour commands) of the README's sh blocks, comments stripped."""
    setup, tour = [], []
    for block in code_blocks("sh"):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            if line:
                (setup if line.startswith("bash ") else tour).append(line)
    return setup, tour


def test_the_setup_commands_are_what_ci_and_the_examples_test_run():
    setup, _ = commands()
    assert tuple(setup) == SETUP_COMMANDS
    assert SETUP_COMMANDS[1] in (ROOT / ".ci" / "run").read_text()
    examples_test = (ROOT / "tests" / "examples" / "test_examples.py").read_text()
    assert "quickstart.sh" in examples_test


@pytest.fixture()
def my_board(ssh_world, tmp_path):  # noqa: F811 (fixture)
    """RVVKIT_SSH_CONFIG / RVVKIT_BOARDS that name the loopback RVV board `my-board`."""
    config = tmp_path / "ssh_config"
    config.write_text(ssh_world.host_block("my-board", ssh_world.server.port))
    rvv = ssh_world.boards.read_text().split("[rvv-board]\n", 1)[1].split("\n\n", 1)[0]
    boards = tmp_path / "boards.toml"
    boards.write_text(f"[my-board]\n{rvv}\n")
    return {"RVVKIT_SSH_CONFIG": str(config), "RVVKIT_BOARDS": str(boards)}


def test_the_tour_runs_as_written(my_board, tmp_path):
    _, tour = commands()
    assert any("ssh://my-board" in c for c in tour) and any("--on qemu" in c for c in tour)
    work = tmp_path / "tour"
    work.mkdir()
    env = dict(os.environ, **my_board)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    said = {}   # the command's first two words -> its process
    for command in tour:
        proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, command
        said[" ".join(command.split()[:2]) if "ssh://" not in command else "ssh"] = proc
    with np.load(work / "out.npz") as out:
        assert out["softmaxout_1"].shape == (1, 1000, 1, 1)
    compared = said["rvvkit compare"].stdout
    assert compared.count(" ok ") >= 2 and "skipped" in compared
    assert (work / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ssh://my-board" in said["ssh"].stderr and "softmaxout_1" in said["ssh"].stdout
    assert "dyn" in said["rvvkit bench"].stdout

    (snippet,) = code_blocks("python")
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (work / "squeezenet.rvv").stat().st_size > 1_000_000
