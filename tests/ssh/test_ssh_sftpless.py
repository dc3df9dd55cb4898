"""Boards whose SSH server has no SFTP (a real Dropbear, OpenSSH without `Subsystem sftp`):
files go over the exec channel, checked by size and sha256 at both ends; the same results as
onnxruntime; a transfer that arrives damaged is an error; a board that goes silent is given up
by the keepalives within seconds, not at the command timeout."""
from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

import rvvkit
from conftest import run_ort
from rvvkit.errors import ExecutionError
from rvvkit.runtime import exec_files
from rvvkit.runtime.boards import board_config
from rvvkit.runtime.remote import Board
from rvvkit.zoo import light_model, sample_inputs
from ssh_support import assert_close, needs_rvv, needs_sshd, small_feeds, small_model

pytestmark = [pytest.mark.ssh, needs_sshd]
BOARDS = ["nosftp-board", "dropbear-board", pytest.param("dropbear-rvv-board",
                                                         marks=needs_rvv)]


@pytest.fixture(scope="module")
def small():
    model = small_model()
    return rvvkit.build(model), run_ort(model, small_feeds())


@pytest.mark.parametrize("board", BOARDS)
def test_small_model_over_the_exec_channel(ssh_world, sftpless, small, board, caplog):
    if board.startswith("dropbear"):
        sftpless.need_dropbear()
    art, ref = small
    with caplog.at_level(logging.INFO, logger="rvvkit.ssh"):
        with rvvkit.load(art, on=f"ssh://{board}") as sess:
            assert sess.board.files.kind == "exec"
            assert sess.board.describe()["transfer"] == "exec (transfer = auto)"
            assert_close(sess.run(small_feeds()), ref, board)
            assert os.listdir(sess.tmpdir) == ["model.rvv"]  # no .part files left behind
    said = [r.getMessage() for r in caplog.records if "exec channel" in r.getMessage()]
    assert len(said) == 1 and "SFTP unavailable" in said[0] and board in said[0], said
    assert ssh_world.leftovers(ssh_world.workdir(board)) == []


def test_connection_dropped_after_refusing_sftp_is_made_again(ssh_world, sftpless, small,
                                                             monkeypatch, caplog):
    """Dropbear under load has dropped the connection right after refusing SFTP: the transfer
    probe, the first exec command, connects again and the run goes on."""
    art, ref = small
    real_sh, dropped = Board.sh, []

    def drop_first_probe(board, script, **kw):
        if kw.get("what") == "finding sha256 tool" and not dropped:
            dropped.append(board.transport)
            board.transport.close()
        return real_sh(board, script, **kw)

    monkeypatch.setattr(Board, "sh", drop_first_probe)
    with caplog.at_level(logging.INFO, logger="rvvkit.ssh"):
        with rvvkit.load(art, on="ssh://nosftp-board") as sess:
            assert sess.board.files.kind == "exec" and sess.board.alive()
            assert sess.board.transport is not dropped[0]
            assert_close(sess.run(small_feeds()), ref, "after reconnecting")
    assert any("over a new connection" in r.getMessage() for r in caplog.records)
    assert ssh_world.leftovers(ssh_world.workdir("nosftp-board")) == []


@pytest.mark.parametrize("board", ["dropbear-board", "nosftp-board"])
def test_squeezenet_without_sftp(ssh_world, sftpless, board):
    """Dropbear, and OpenSSH with no Subsystem sftp: SqueezeNet over the exec channel."""
    if board == "dropbear-board":
        sftpless.need_dropbear()
    model = light_model("squeezenet")
    feeds = sample_inputs(model)
    with rvvkit.load(rvvkit.build(model), on=f"ssh://{board}") as sess:
        assert sess.board.files.kind == "exec" and sess.board.files.hasher == "sha256sum"
        got = sess.run(feeds)
    assert_close(got, run_ort(model, feeds), f"squeezenet on {board}")
    assert ssh_world.leftovers(ssh_world.workdir(board)) == []


def test_file_operations_forced_over_exec(ssh_world, tmp_path):
    """transfer=exec on a server that has SFTP: every operation means what it does over SFTP."""
    board = Board(board_config(f"ssh://native-board?transfer=exec&workdir={tmp_path}"))
    try:
        assert board.files.kind == "exec"
        blob = bytes(range(256)) * 4099 + b"\n\r\x00 $(rm -rf /) '\""
        d = board.mktemp("ops-")
        assert oct(os.stat(d).st_mode & 0o777) == "0o700"
        board.put(blob, f"{d}/a b.bin")  # a name the shell must quote
        assert (tmp_path / "tmp" / os.path.basename(d) / "a b.bin").read_bytes() == blob
        assert board.get(f"{d}/a b.bin") == blob and board.size(f"{d}/a b.bin") == len(blob)
        assert board.size(f"{d}/absent") == -1
        board.put(b"", f"{d}/empty")
        assert board.get(f"{d}/empty") == b"" and board.size(f"{d}/empty") == 0
        with pytest.raises(ExecutionError, match="downloading .*absent"):
            board.get(f"{d}/absent")
        board.mkdir(f"{d}/x")
        board.mkdir(f"{d}/y")
        with pytest.raises(ExecutionError, match="creating"):
            board.mkdir(f"{d}/x")                      # exists: as SFTP, an error
        board.put(b"1", f"{d}/x/f")
        assert board.rename(f"{d}/x", f"{d}/y") is False  # never into or over an existing dir
        assert sorted(os.listdir(f"{d}/y")) == [] and os.listdir(f"{d}/x") == ["f"]
        assert board.rename(f"{d}/x", f"{d}/z") is True and os.listdir(f"{d}/z") == ["f"]
        assert board.rename(f"{d}/empty", f"{d}/a b.bin") is False  # files: no clobber
        board.remove("/tmp")                           # outside the work root: ignored
        board.remove(d)
        assert not os.path.exists(d)
    finally:
        board.close()


def test_transfer_sftp_forced_on_a_server_without_it(ssh_world, sftpless, tmp_path):
    board = Board(board_config(f"ssh://nosftp-board?transfer=sftp&workdir={tmp_path}"))
    try:
        with pytest.raises(ExecutionError, match="nosftp-board: opening SFTP failed.*transfer"):
            board.mktemp("x-")
    finally:
        board.close()


def test_damaged_transfers_are_errors(ssh_world, tmp_path, monkeypatch):
    board = Board(board_config(f"ssh://native-board?transfer=exec&workdir={tmp_path}"))
    try:
        d = board.mktemp("damage-")
        data = os.urandom(100_000)
        # Upload: one flipped byte and one lost byte on the way: refused on the board, and
        # nothing appears under the name (nor a .part file).
        for damage in (lambda b: b[:500] + bytes([b[500] ^ 1]) + b[501:], lambda b: b[:-1]):
            monkeypatch.setattr(exec_files.ExecFiles, "_send", lambda self, b, f=damage: f(b))
            with pytest.raises(ExecutionError, match=r"native-board: upload of .*/f over the "
                               r"exec channel arrived damaged: sent 100000 bytes"):
                board.put(data, f"{d}/f")
            assert os.listdir(d) == []
        monkeypatch.undo()
        board.put(data, f"{d}/f")
        # Download: bytes changed after the board measured them.
        real_run = board.run

        def corrupting(script, **kw):
            res = real_run(script, **kw)
            if kw.get("what", "").startswith("downloading"):
                res.out = res.out[:-1] + bytes([res.out[-1] ^ 0xFF])
            return res
        monkeypatch.setattr(board, "run", corrupting)
        with pytest.raises(ExecutionError, match="download of .*arrived damaged"):
            board.get(f"{d}/f")
    finally:
        board.close()


def test_silent_board_is_given_up_by_keepalives(ssh_world, sftpless, tmp_path):
    """The per-connection Dropbear process stopped (SIGSTOP): TCP stays open, nothing answers.
    A command that would run 60 s (timeout 120 s) fails within a few seconds."""
    sftpless.need_dropbear()
    server = sftpless.start_dropbear()  # its own server: freezing it disturbs no other test
    frozen = []
    try:
        url = (f"ssh://127.0.0.1:{server.port}?compiler=gcc&workdir={tmp_path}"
               "&keepalive_interval=1&keepalive_count_max=3")
        cfg = board_config(url)
        cfg.identity_files, cfg.identities_only = [str(ssh_world.user_key)], True
        cfg.known_hosts = [str(ssh_world.known_hosts)]
        board = Board(cfg)
        frozen += server.connections()
        assert frozen, "no per-connection dropbear process"
        timer = threading.Timer(1.0, lambda: [os.kill(p, signal.SIGSTOP) for p in frozen])
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(ExecutionError) as err:
            board.sh("sleep 60", timeout=120, what="a long command")
        elapsed = time.monotonic() - t0
        timer.join()
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith("ssh://127.0.0.1: connection lost (no "
                                                  "answer to 3 keepalives"), msg
        assert elapsed < 10, f"detected after {elapsed:.1f} s"
        board.close()
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        server.stop()
