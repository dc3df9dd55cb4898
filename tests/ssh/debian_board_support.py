"""The emulated Debian 13 riscv64 board of scripts/debian_board.sh, for the tests: a debootstrap
root under qemu-user-static (binfmt_misc) with the board's own GCC 14, GCC 13, python3-numpy,
python3-cffi and python3-pyelftools, and OpenSSH started in it by chroot on a loopback port.

`debian_board` (session fixture) gives the ssh config, boards file and host key that reach it as
`ssh://debian-board`. It skips, with the reason, when RVVKIT_SKIP_DEBIAN_BOARD=1, when not root
(debootstrap, chroot and mounts need root), or when the board is not built and this is not CI;
under CI=true it builds the board (cached: seconds when .ci/run built it already) and a build
failure fails the tests instead of skipping them. Parallel workers each start their own sshd
in the same root (the script serialises builds and counts servers before unmounting)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Dict

import pytest

from ssh_support import KEYGEN, keygen

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "debian_board.sh"
ALIAS = "debian-board"
# The board's work dir (inside its root): kept between sessions, so the runner and kernels
# compiled by the board's GCC under QEMU are cached like on a real board.
WORKDIR = "/var/tmp/rvvkit-tests"
BUILD_TIMEOUT_S = 1800


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout)


def _last_line(res: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {res.returncode}"


class DebianBoard:
    def __init__(self, root: Path, work: Path, port: int):
        self.root, self.work, self.port = root, work, port  # root: the board's / on this host
        self.user_key = keygen(work / "id_ed25519")
        self.ssh_config = work / "ssh_config"
        self.boards = work / "boards.toml"
        self.known_hosts = work / "known_hosts"

    def configure(self) -> None:
        pub = (self.root / f"etc/rvvkit-board/host_ed25519-{self.port}.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        self.ssh_config.write_text(
            f"Host {ALIAS}\n    HostName 127.0.0.1\n    Port {self.port}\n    User root\n"
            f"    IdentityFile {self.user_key}\n    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n    StrictHostKeyChecking yes\n"
            "    LogLevel ERROR\n")
        self.boards.write_text(f'[{ALIAS}]\nworkdir = "{WORKDIR}"\n')

    @property
    def env(self) -> Dict[str, str]:
        """What rvvkit reads to reach the board (for monkeypatch or a subprocess)."""
        return {"RVVKIT_SSH_CONFIG": str(self.ssh_config), "RVVKIT_BOARDS": str(self.boards)}

    def ssh(self, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run a shell command on the board with the OpenSSH client."""
        return subprocess.run(["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", ALIAS,
                               command], capture_output=True, text=True, timeout=timeout)

    def inside(self, path: str) -> Path:
        """The host path of a board path (the board is a directory of this machine)."""
        return self.root / path.lstrip("/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def debian_board(tmp_path_factory):
    if _truthy("RVVKIT_SKIP_DEBIAN_BOARD"):
        pytest.skip("RVVKIT_SKIP_DEBIAN_BOARD=1")
    if os.geteuid() != 0:
        pytest.skip("the Debian riscv64 board needs root (debootstrap, chroot, mounts): "
                    "run as root, or set RVVKIT_SKIP_DEBIAN_BOARD=1")
    if not (KEYGEN and shutil.which("ssh")):
        pytest.skip("ssh-keygen or the ssh client missing: run scripts/setup.sh")
    root = Path(_script("path").stdout.strip())
    if _truthy("CI"):
        # Never a silent skip in CI: build (cached) and fail with the script's own line.
        res = _script("build", timeout=BUILD_TIMEOUT_S)
        if res.returncode != 0:
            pytest.fail(f"scripts/debian_board.sh build failed: {_last_line(res)}")
    elif not (root / "rvvkit-board.stamp").is_file():
        pytest.skip("the Debian riscv64 board is not built: run 'bash scripts/setup.sh --board' "
                    "(the README's test command; 5 to 15 minutes once, then cached), or set "
                    "CI=true to build it here")
    board = DebianBoard(root, tmp_path_factory.mktemp("debian_board"), _free_port())
    res = _script("start", str(board.port), str(board.user_key) + ".pub")
    if res.returncode != 0:
        pytest.fail(f"scripts/debian_board.sh start failed: {_last_line(res)}")
    try:
        board.configure()
        yield board
    finally:
        _script("stop", str(board.port))
