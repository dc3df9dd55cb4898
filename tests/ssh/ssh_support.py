"""What the SSH tests share: a real OpenSSH server (Debian's openssh-server) on loopback with
throw-away host and user keys, an SSH config and a boards file describing two boards behind
it, and a small model.

Boards (both are this machine, reached over SSH):
  native-board   host gcc, no wrapper
  rvv-board      a riscv64 cross compiler (clang-16, else riscv64-linux-gnu-gcc) and the
                 wrapper qemu-riscv64 -cpu rv64,v=true,vlen=256,...: an emulated RVV board
  new-host-board the server again, with an empty known_hosts file of its own
  wrong-key-board the server again, with a user key it does not accept

The fixture skips (with the reason) only when /usr/sbin/sshd or ssh-keygen is missing;
scripts/setup.sh installs openssh-server. Not a conftest.py: tests/conftest.py is imported by
name, and a second module of that name would shadow it."""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
from onnx import helper

from model_building import make_model, rand
from rvvkit.jit.targets import riscv

RISCV = riscv()

SSHD = "/usr/sbin/sshd"
KEYGEN = shutil.which("ssh-keygen")
QEMU = shutil.which("qemu-riscv64")
CLANG = "clang-16" if shutil.which("clang-16") and shutil.which("ld.lld-16") else None
RV_GCC = "riscv64-linux-gnu-gcc" if shutil.which("riscv64-linux-gnu-gcc") else None
RV_COMPILER = CLANG or RV_GCC
# The board's wrapper: QEMU with the sysroot and CPU of toolchain/targets/riscv64-linux-gnu.toml.
WRAPPER = f"qemu-riscv64 -L {RISCV.sysroot} -cpu {RISCV.cpu_string(256)}"
RTOL, ATOL = 1e-3, 1e-4

needs_sshd = pytest.mark.skipif(
    not (os.path.exists(SSHD) and KEYGEN),
    reason="/usr/sbin/sshd or ssh-keygen missing: run scripts/setup.sh (openssh-server)")
needs_rvv = pytest.mark.skipif(
    not (QEMU and RV_COMPILER), reason="qemu-riscv64 or a riscv64 cross compiler missing: "
    "run scripts/setup.sh")


def keygen(path: Path) -> Path:
    subprocess.run([KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "rvvkit-test", "-f",
                    str(path)], check=True)
    return path


def _children() -> Dict[int, List[int]]:
    kids: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(name))
    return kids


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class SshServer:
    """sshd -D on 127.0.0.1 and a free high port; its sessions are its descendants."""

    def __init__(self, root: Path, host_key: Path, authorized_keys: Path):
        self.root, self.host_key, self.authorized_keys = root, host_key, authorized_keys
        self.proc = None
        self.port = 0

    def _config(self) -> Path:
        path = self.root / f"sshd_config_{self.port}"
        path.write_text("\n".join([
            f"ListenAddress 127.0.0.1:{self.port}", f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {self.authorized_keys}", "StrictModes no", "UsePAM no",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password", "PidFile none", "PrintMotd no",
            "Subsystem sftp internal-sftp", "LogLevel VERBOSE", ""]))
        return path

    def start(self) -> "SshServer":
        try:
            os.makedirs("/run/sshd", exist_ok=True)  # privilege separation dir (as root)
        except PermissionError:
            pass
        for _ in range(5):  # the free port can be taken between probing and binding
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            log = open(self.root / f"sshd_{self.port}.log", "wb")
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self._config())],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            log.close()
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"sshd did not start; see {self.root}/sshd_*.log")

    def _wait_ready(self, seconds: float = 10.0) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def descendants(self) -> List[int]:
        if self.proc is None:
            return []
        kids, out, todo = _children(), [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            out += kids.get(pid, [])
            todo += kids.get(pid, [])
        return out

    def kill(self) -> None:
        """SIGKILL the server and every session it started, at once (a board losing power)."""
        if self.proc is None:
            return
        pids = self.descendants()  # before the parent dies and they are re-parented
        for pid in [self.proc.pid, *pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    stop = kill


class SshWorld:
    """Paths and server of the test boards; `leftovers` lists a board's temporary dirs."""

    def __init__(self, root: Path):
        self.root = root
        self.host_key = keygen(root / "host_ed25519")
        self.user_key = keygen(root / "id_ed25519")
        self.wrong_key = keygen(root / "wrong_ed25519")
        self.authorized_keys = root / "authorized_keys"
        self.authorized_keys.write_text((root / "id_ed25519.pub").read_text())
        self.known_hosts = root / "known_hosts"
        self.new_known_hosts = root / "known_hosts_new"
        self.ssh_config = root / "ssh_config"
        self.boards = root / "boards.toml"
        self.server = SshServer(root, self.host_key, self.authorized_keys).start()
        pub = (root / "host_ed25519.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.server.port} {pub[0]} {pub[1]}\n")
        self.new_known_hosts.write_text("")
        self.ssh_config.write_text(self.host_block(
            "native-board rvv-board", self.server.port) + self.host_block(
            "new-host-board", self.server.port, known_hosts=self.new_known_hosts)
            + self.host_block("wrong-key-board", self.server.port, key=self.wrong_key))
        rv = RV_COMPILER or "riscv64-linux-gnu-gcc"
        self.boards.write_text(
            f'[native-board]\ncompiler = "gcc"\nworkdir = "{self.workdir("native-board")}"\n\n'
            f'[rvv-board]\ncompiler = "{rv}"\nwrapper = "{WRAPPER}"\n'
            f'workdir = "{self.workdir("rvv-board")}"\n\n'
            f'[new-host-board]\ncompiler = "gcc"\nworkdir = "{self.workdir("native-board")}"\n')

    def host_block(self, names: str, port: int, *, key: Path = None,
                   known_hosts: Path = None) -> str:
        return (f"Host {names}\n    HostName 127.0.0.1\n    Port {port}\n"
                f"    User {getpass.getuser()}\n    IdentityFile {key or self.user_key}\n"
                f"    IdentitiesOnly yes\n"
                f"    UserKnownHostsFile {known_hosts or self.known_hosts}\n\n")

    def workdir(self, board: str) -> Path:
        return self.root / "boards" / board

    @staticmethod
    def leftovers(workdir: Path) -> List[str]:
        """Temporary dirs left under a board work dir (runs, sessions, failed builds)."""
        tmp = Path(workdir) / "tmp"
        return sorted(os.listdir(tmp)) if tmp.is_dir() else []


@pytest.fixture(scope="session")
def ssh_world(tmp_path_factory):
    if not (os.path.exists(SSHD) and KEYGEN):
        pytest.skip("/usr/sbin/sshd or ssh-keygen missing: run scripts/setup.sh "
                    "(installs openssh-server)")
    world = SshWorld(tmp_path_factory.mktemp("ssh"))
    mp = pytest.MonkeyPatch()
    mp.setenv("RVVKIT_SSH_CONFIG", str(world.ssh_config))
    mp.setenv("RVVKIT_BOARDS", str(world.boards))
    try:
        yield world
    finally:
        mp.undo()
        world.server.stop()


# ---------------------------------------------------------------------------------------------
# A small model: every kernel family on odd sizes

node = helper.make_node


def small_model(channels: int = 6, size: int = 11):
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "wd", "bd"], ["c2"], group=channels, pads=[1, 1, 1, 1],
                  strides=[2, 2]),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                  pads=[1, 1, 1, 1]),
             node("Add", ["c2", "p1"], ["s"]),
             node("Sigmoid", ["s"], ["sg"]),
             node("GlobalAveragePool", ["sg"], ["gap"]),
             node("Flatten", ["gap"], ["f"]),
             node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
             node("Softmax", ["logits"], ["probs"])]
    inits = {"w1": rand(channels, 3, 3, 3, seed=1, scale=0.3),
             "b1": rand(channels, seed=2, scale=0.1),
             "wd": rand(channels, 1, 3, 3, seed=3, scale=0.3),
             "bd": rand(channels, seed=4, scale=0.1),
             "fw": rand(7, channels, seed=5), "fb": rand(7, seed=6)}
    return make_model(nodes, [("x", (1, 3, size, size))], ["probs", "logits"], inits,
                      name=f"ssh_small_{channels}_{size}")


def small_feeds(size: int = 11) -> Dict[str, np.ndarray]:
    return {"x": rand(1, 3, size, size, seed=7)}


def assert_close(got, want, what: str) -> None:
    """Same outputs and shapes, values within rtol 1e-3 / atol 1e-4, the same argmax."""
    assert sorted(got) == sorted(want), (what, sorted(got), sorted(want))
    for name, ref in want.items():
        out = got[name]
        assert out.shape == ref.shape, f"{what}/{name}: shape {out.shape} != {ref.shape}"
        np.testing.assert_allclose(out, ref, rtol=RTOL, atol=ATOL, err_msg=f"{what}: {name}")
        assert int(np.argmax(out)) == int(np.argmax(ref)), f"{what}/{name}: argmax differs"
