"""Failures on the way to a board and on it: each is a clear rvvkit error naming the board,
arrives quickly (no hang), and leaves no partial output and no temporary directory."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from urllib.parse import quote

import numpy as np
import pytest

import rvvkit
from rvvkit.errors import BoardConnectionError, CompileError, CompilerNotFound, ExecutionError
from rvvkit.runtime.boards import board_config
from rvvkit.runtime.remote import Board
from ssh_support import SshServer, cmdline, needs_sshd, small_feeds, small_model

pytestmark = [pytest.mark.ssh, needs_sshd]


@pytest.fixture(scope="module")
def art():
    return rvvkit.build(small_model())


def test_unknown_host_key_is_refused_then_trusted_on_request(ssh_world):
    ssh_world.new_known_hosts.write_text("")
    with pytest.raises(BoardConnectionError) as err:
        Board(board_config("ssh://new-host-board"))
    msg = str(err.value)
    assert "127.0.0.1" in msg and "new-host-board" in msg and "not in known_hosts" in msg
    assert "trust_new_host=1" in msg and str(ssh_world.new_known_hosts) in msg
    assert ssh_world.new_known_hosts.read_text() == ""  # refusing records nothing
    Board(board_config("ssh://new-host-board?trust_new_host=1")).close()
    recorded = ssh_world.new_known_hosts.read_text()
    assert recorded.startswith(f"[127.0.0.1]:{ssh_world.server.port} ssh-ed25519 ")
    Board(board_config("ssh://new-host-board")).close()  # known now: no option needed


def test_changed_host_key_is_refused(ssh_world, tmp_path):
    other = tmp_path / "kh"
    pub = (ssh_world.wrong_key.with_suffix(".pub")).read_text().split()  # not the host's key
    other.write_text(f"[127.0.0.1]:{ssh_world.server.port} {pub[0]} {pub[1]}\n")
    cfg = board_config("ssh://native-board")
    cfg.known_hosts = [str(other)]
    with pytest.raises(BoardConnectionError, match="CHANGED"):
        Board(cfg)


def test_wrong_user_key(ssh_world, art):
    t0 = time.monotonic()
    with pytest.raises(BoardConnectionError, match="authentication") as err:
        rvvkit.load(art, on="ssh://wrong-key-board")
    assert "wrong-key-board" in str(err.value) and str(ssh_world.wrong_key) in str(err.value)
    assert time.monotonic() - t0 < 15


def test_nothing_listening(art):
    with pytest.raises(BoardConnectionError, match="cannot connect"):
        rvvkit.load(art, on="ssh://127.0.0.1:1?connect_timeout=3")


def test_board_without_compiler(ssh_world, art, tmp_path):
    url = f"ssh://native-board?compiler=/nonexistent&workdir={tmp_path}"
    with pytest.raises(CompilerNotFound) as err:
        rvvkit.load(art, on=url)
    assert "/nonexistent" in str(err.value) and "ssh://native-board" in str(err.value)
    assert ssh_world.leftovers(tmp_path) == []


def test_compile_error_on_board_shows_its_stderr(ssh_world, art, tmp_path):
    flags = quote("-DRVK_BREAK -include /nonexistent.h")
    with pytest.raises(CompileError) as err:
        rvvkit.load(art, on=f"ssh://native-board?cflags={flags}&workdir={tmp_path}")
    exc = err.value
    assert "/nonexistent.h" in exc.stderr and "No such file" in exc.stderr
    assert "-include" in exc.cmd and "[ssh://native-board]" in exc.cmd
    assert exc.returncode == 1 and "/nonexistent.h" in str(exc)
    assert ssh_world.leftovers(tmp_path) == []
    assert not list(tmp_path.glob("runner-*")) and not list(tmp_path.glob("kernels-*"))


def test_command_timeout_kills_the_remote_process(ssh_world, art, tmp_path):
    url = f"ssh://native-board?wrapper=sleep+43%3B&command_timeout=2&workdir={tmp_path}"
    with rvvkit.load(art, on=url) as sess:
        t0 = time.monotonic()
        with pytest.raises(ExecutionError, match="did not finish within 2 s"):
            sess.run(small_feeds())
        elapsed = time.monotonic() - t0
    assert 1.9 < elapsed < 6, elapsed
    sleepers = [p for p in ssh_world.server.descendants() if cmdline(p) == "sleep 43"]
    assert sleepers == [], "the timed-out command still runs on the board"
    assert ssh_world.leftovers(tmp_path) == []


def test_server_killed_during_a_run(ssh_world, tmp_path, monkeypatch):
    """A second sshd, killed (with its sessions) while `rvvkit run` waits on a long run: the
    command fails within seconds, says the connection was lost, and writes no output."""
    server = SshServer(tmp_path, ssh_world.host_key, ssh_world.authorized_keys).start()
    try:
        config = tmp_path / "ssh_config"
        (tmp_path / "kh").write_text(ssh_world.known_hosts.read_text().replace(
            f":{ssh_world.server.port} ", f":{server.port} "))
        config.write_text(ssh_world.host_block("doomed-board", server.port,
                                               known_hosts=tmp_path / "kh"))
        monkeypatch.setenv("RVVKIT_SSH_CONFIG", str(config))
        rvvkit.build(small_model()).save(tmp_path / "m.rvv")
        np.savez(tmp_path / "in.npz", **small_feeds())
        out = tmp_path / "out.npz"
        url = f"ssh://doomed-board?compiler=gcc&wrapper=sleep+42%3B&workdir={tmp_path / 'b'}"
        proc = subprocess.Popen([sys.executable, "-m", "rvvkit", "run", str(tmp_path / "m.rvv"),
                                 "--inputs", str(tmp_path / "in.npz"), "--output", str(out),
                                 "--on", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        end = time.monotonic() + 120
        while not any(cmdline(p) == "sleep 42" for p in server.descendants()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the run never started"
            time.sleep(0.05)
        server.kill()
        t0 = time.monotonic()
        _, stderr = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 5, "no prompt error after the server died"
        assert proc.returncode == 1 and "connection lost" in stderr, stderr
        assert "ssh://doomed-board" in stderr
        assert not out.exists()
    finally:
        server.stop()


def test_sessions_in_parallel_threads(ssh_world, art):
    """bench drives boards from threads: sessions must not share state."""
    results, errors = {}, []

    def work(i):
        try:
            with rvvkit.load(art, on="ssh://native-board") as sess:
                results[i] = sess.run(small_feeds())
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(results) == 3
    for i in (1, 2):
        np.testing.assert_array_equal(results[i]["probs"], results[0]["probs"])


def test_a_dropped_channel_is_opened_again_while_the_connection_is_up(ssh_world, tmp_path,
                                                                       monkeypatch):
    """A live server that fails a channel open (Dropbear under load did, once): the command
    still runs, once; on a closed connection the same failure is an error at once."""
    paramiko = pytest.importorskip("paramiko")
    board = Board(board_config(f"ssh://native-board?workdir={tmp_path}"))
    try:
        transport = board.client.get_transport()
        real_open, failures = transport.open_session, []

        def flaky_open(**kw):
            if len(failures) < 2:
                failures.append(kw)
                raise paramiko.SSHException("Unable to open channel.")
            return real_open(**kw)
        monkeypatch.setattr(transport, "open_session", flaky_open)
        res = board.sh(f"echo x >> {tmp_path}/runs; cat {tmp_path}/runs", timeout=30,
                       what="a counted command")
        assert (res.rc, res.out, len(failures)) == (0, "x\n", 2)
        monkeypatch.setattr(transport, "is_active", lambda: False)
        failures.clear()
        t0 = time.monotonic()
        with pytest.raises(ExecutionError, match="native-board: a dead end failed: connection "
                                                 "lost"):
            board.sh("true", timeout=30, what="a dead end")
        assert len(failures) == 1 and time.monotonic() - t0 < 1
    finally:
        monkeypatch.undo()
        board.close()
