"""SSH servers without SFTP, for the exec-channel transfer tests: a real Dropbear
(`dropbear-bin`) and OpenSSH with no `Subsystem sftp` line, both on loopback beside
ssh_support's server, and the boards behind them:

  dropbear-board      Dropbear, host gcc
  dropbear-rvv-board  Dropbear, riscv64 cross compiler + the qemu-riscv64 wrapper
  nosftp-board        OpenSSH without SFTP, host gcc

Dropbear reads only the login user's ~/.ssh/authorized_keys and serves SFTP whenever OpenSSH's
sftp-server is installed (TOOLCHAIN_NOTES.md), so it runs in a private mount namespace
(`unshare -m`, root only) where an empty dir hides /usr/lib/openssh and a throw-away dir is
mounted over the user's home: nothing of the real home or system is touched."""
from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from ssh_support import RV_COMPILER, WRAPPER, SshServer, SshWorld

DROPBEAR = shutil.which("dropbear") or "/usr/sbin/dropbear"
DROPBEARKEY = shutil.which("dropbearkey")
UNSHARE = shutil.which("unshare")
SFTP_SERVER_DIR = "/usr/lib/openssh"  # where Debian's sftp-server lives (/usr/lib/sftp-server)


def dropbear_missing(root: Path = None) -> str:
    """Why the Dropbear boards cannot run here, or ""."""
    if not (os.path.exists(DROPBEAR) and DROPBEARKEY):
        return "dropbear missing: run scripts/setup.sh (installs dropbear-bin)"
    if os.geteuid() != 0 or not UNSHARE:
        return ("the Dropbear boards need root and unshare (a private mount namespace hides "
                "sftp-server and gives Dropbear its own authorized_keys)")
    home = pwd.getpwuid(os.getuid()).pw_dir
    if root is not None and str(root).startswith(home.rstrip("/") + "/"):
        return f"the test dir {root} is inside {home}, which the Dropbear board hides"
    return ""


class NoSftpServer(SshServer):
    """OpenSSH as ssh_support starts it, minus the Subsystem line: no SFTP at all."""

    def _config(self) -> Path:
        path = super()._config()
        path.write_text(path.read_text().replace("Subsystem sftp internal-sftp\n", ""))
        return path


class DropbearServer(SshServer):
    """dropbear -F on 127.0.0.1; each connection is a forked child (its descendants)."""

    def __init__(self, root: Path, host_key: Path, home: Path):
        super().__init__(root, host_key, home / ".ssh" / "authorized_keys")
        self.home = home

    def start(self) -> "DropbearServer":
        empty = self.root / "empty"
        empty.mkdir(exist_ok=True)
        real_home = pwd.getpwuid(os.getuid()).pw_dir
        hide = f"mount --bind {empty} {SFTP_SERVER_DIR} && " \
            if os.path.isdir(SFTP_SERVER_DIR) else ""
        for _ in range(5):  # the free port can be taken between probing and binding
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            script = (f"{hide}mount --bind {self.home} {real_home} && exec {DROPBEAR} -F -E "
                      f"-s -p 127.0.0.1:{self.port} -r {self.host_key} "
                      f"-P {self.root}/dropbear_{self.port}.pid")
            log = open(self.root / f"dropbear_{self.port}.log", "wb")
            self.proc = subprocess.Popen([UNSHARE, "-m", "--propagation", "private", "sh", "-c",
                                          script], stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            log.close()
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"dropbear did not start; see {self.root}/dropbear_*.log")

    def connections(self):
        """Pids of the per-connection Dropbear processes (the server's dropbear children)."""
        kids = [p for p in self.descendants() if _comm(p) == "dropbear"]
        return [p for p in kids if p != self.proc.pid]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class SftplessWorld:
    """The two servers and their boards, added to the ssh_world's SSH config, boards file and
    known_hosts (all boards of the test session share them). Without dropbear (or root) only
    nosftp-board exists and `why_no_dropbear` says why."""

    def __init__(self, world: SshWorld):
        self.world = world
        root = world.root / "sftpless"
        root.mkdir()
        self.root = root
        self.dropbear_key = root / "dropbear_ed25519"
        subprocess.run([DROPBEARKEY, "-t", "ed25519", "-f", str(self.dropbear_key)],
                       check=True, capture_output=True)
        pub = subprocess.run([DROPBEARKEY, "-y", "-f", str(self.dropbear_key)], check=True,
                             capture_output=True, text=True).stdout
        self.dropbear_pub = next(ln for ln in pub.splitlines() if ln.startswith("ssh-"))
        self.home = root / "home"  # the login user's home as Dropbear sees it
        (self.home / ".ssh").mkdir(parents=True)
        os.chmod(self.home, 0o700)
        os.chmod(self.home / ".ssh", 0o700)
        keys = self.home / ".ssh" / "authorized_keys"
        keys.write_text(world.authorized_keys.read_text())
        os.chmod(keys, 0o600)
        self.nosftp = NoSftpServer(root, world.host_key, world.authorized_keys).start()
        self.why_no_dropbear = dropbear_missing(root)
        self.dropbear = None if self.why_no_dropbear else self.start_dropbear()
        host_pub = (world.root / "host_ed25519.pub").read_text().split()
        with open(world.known_hosts, "a") as fh:
            fh.write(f"[127.0.0.1]:{self.nosftp.port} {host_pub[0]} {host_pub[1]}\n")
        with open(world.ssh_config, "a") as fh:
            fh.write(world.host_block("nosftp-board", self.nosftp.port))
            if self.dropbear:
                fh.write(world.host_block("dropbear-board dropbear-rvv-board",
                                          self.dropbear.port))
        rv = RV_COMPILER or "riscv64-linux-gnu-gcc"
        with open(world.boards, "a") as fh:
            fh.write(f'\n[nosftp-board]\ncompiler = "gcc"\n'
                     f'workdir = "{world.workdir("nosftp-board")}"\n\n'
                     f'[dropbear-board]\ncompiler = "gcc"\n'
                     f'workdir = "{world.workdir("dropbear-board")}"\n\n'
                     f'[dropbear-rvv-board]\ncompiler = "{rv}"\nwrapper = "{WRAPPER}"\n'
                     f'workdir = "{world.workdir("dropbear-rvv-board")}"\n')

    def start_dropbear(self) -> DropbearServer:
        """A Dropbear server of its own (the keepalive test freezes one), known to
        known_hosts under its port."""
        server = DropbearServer(self.root, self.dropbear_key, self.home).start()
        key = self.dropbear_pub.split()
        with open(self.world.known_hosts, "a") as fh:
            fh.write(f"[127.0.0.1]:{server.port} {key[0]} {key[1]}\n")
        return server

    def need_dropbear(self) -> None:
        if self.dropbear is None:
            pytest.skip(self.why_no_dropbear)

    def stop(self) -> None:
        self.nosftp.stop()
        if self.dropbear:
            self.dropbear.stop()


@pytest.fixture(scope="session")
def sftpless(ssh_world):
    """The servers without SFTP; tests on the Dropbear boards call need_dropbear()."""
    world = SftplessWorld(ssh_world)
    try:
        yield world
    finally:
        world.stop()
