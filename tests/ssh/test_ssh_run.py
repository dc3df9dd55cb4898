"""Models on boards over SSH (a real sshd on loopback): a native board (host gcc) and an
emulated RVV board (riscv64 cross compiler + qemu-riscv64 wrapper) match onnxruntime; the
runner is built once per board, kernels are cached on the board by content, and no temporary
directory outlives a run or a session."""
from __future__ import annotations

import os

import pytest

import rvvkit
from conftest import run_ort
from rvvkit.zoo import light_model, sample_inputs
from ssh_support import assert_close, needs_rvv, needs_sshd, small_feeds, small_model

pytestmark = [pytest.mark.ssh, needs_sshd]
BOARDS = ["native-board", pytest.param("rvv-board", marks=needs_rvv)]


@pytest.mark.parametrize("board", BOARDS)
def test_small_model_matches_onnxruntime(ssh_world, board):
    model, feeds = small_model(), small_feeds()
    with rvvkit.load(rvvkit.build(model), on=f"ssh://{board}") as sess:
        assert sess.executor == "ssh" and sess.target == f"ssh://{board}"
        assert_close(sess.run(feeds), run_ort(model, feeds), board)
        # A finished run leaves nothing but the session's artifact in its temporary dir.
        assert os.listdir(sess.tmpdir) == ["model.rvv"]
        rows = sess.profile(feeds, repeat=2)
        assert [r["kernel"] for r in rows] == [s["kernel"] for s in sess.steps]
        assert all(r["seconds"] >= 0 for r in rows) and sum(r["seconds"] for r in rows) > 0
        if board == "rvv-board":
            assert sess.compiler.is_riscv and "-march=rv64gcv" in sess.flags
        desc = sess.describe()
        assert desc["executor"] == "ssh" and desc["path"] == f"ssh://{board}"
        assert desc["label"].startswith(f"ssh://{board} (") and desc["emulated"] == \
            (board == "rvv-board")
        lat = sess.measure(feeds, repeat=2, warmup=1)
        assert lat["latency_stat"] == "mean" and lat["runs"] == 2 and lat["latency_ms"] > 0
        assert os.listdir(sess.tmpdir) == ["model.rvv"]
    assert ssh_world.leftovers(ssh_world.workdir(board)) == []


@pytest.mark.parametrize("board", BOARDS)
def test_squeezenet_matches_onnxruntime(ssh_world, board):
    model = light_model("squeezenet")
    feeds = sample_inputs(model)
    with rvvkit.load(rvvkit.build(model), on=f"ssh://{board}") as sess:
        got = sess.run(feeds)
    assert_close(got, run_ort(model, feeds), f"squeezenet on {board}")
    assert ssh_world.leftovers(ssh_world.workdir(board)) == []


def test_runner_built_once_per_board_and_kernels_cached(ssh_world, tmp_path):
    board = tmp_path / "board"  # a fresh board work dir: this test sees the first build
    url = f"ssh://native-board?workdir={board}"
    art_a = rvvkit.build(small_model())
    art_b = rvvkit.build(small_model(channels=5, size=9))
    with rvvkit.load(art_a, on=url) as sess:
        assert (sess.runner_cached, sess.kernels_cached) == (False, False)
        sess.run(small_feeds())
    runners = sorted(board.glob("runner-*/rvvkit_runner"))
    assert len(runners) == 1
    built_at = runners[0].stat().st_mtime_ns
    with rvvkit.load(art_b, on=url) as sess:  # another model: new kernels, same runner
        assert (sess.runner_cached, sess.kernels_cached) == (True, False)
        sess.run(small_feeds(size=9))
    with rvvkit.load(art_a, on=url) as sess:  # the first model again: everything cached
        assert (sess.runner_cached, sess.kernels_cached) == (True, True)
        assert sess.kernels_path.startswith(str(board / "kernels-"))
        sess.run(small_feeds())
    assert sorted(board.glob("runner-*/rvvkit_runner")) == runners
    assert runners[0].stat().st_mtime_ns == built_at
    assert len(list(board.glob("kernels-*/model.so"))) == 2
    # Each entry keeps its source and command, like the local cache.
    assert (runners[0].parent / "rvvkit_runner.c").is_file()
    assert "gcc" in (runners[0].parent / "cmd.txt").read_text()
    assert ssh_world.leftovers(board) == []


def test_no_cache_builds_in_the_session_dir(ssh_world, tmp_path):
    board = tmp_path / "board"
    with rvvkit.load(rvvkit.build(small_model()), on=f"ssh://native-board?workdir={board}",
                     use_cache=False) as sess:
        assert sess.kernels_path.startswith(sess.tmpdir + "/")
        sess.run(small_feeds())
    assert not list(board.glob("kernels-*")) and not list(board.glob("runner-*"))
    assert ssh_world.leftovers(board) == []
