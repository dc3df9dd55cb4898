"""The build cache on a board: least-recently-used eviction down to cache_size after each new
entry (never what the session itself uses), and `rvvkit boards clean`."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import rvvkit
from rvvkit.runtime import board_cache
from rvvkit.runtime.boards import board_config
from rvvkit.runtime.remote import Board
from ssh_support import needs_sshd, small_feeds, small_model

pytestmark = [pytest.mark.ssh, needs_sshd]


def fake_entry(root, name: str, kib: int, age_s: float):
    """A cache entry dir holding `kib` KiB, last used `age_s` seconds ago."""
    d = root / name
    d.mkdir(parents=True)
    (d / "model.so").write_bytes(os.urandom(kib << 10))
    t = time.time() - age_s
    os.utime(d, (t, t))
    return d


def entries(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith(("runner-", "kernels-")))


def test_least_recently_used_entries_go_first(ssh_world, tmp_path):
    root = tmp_path / "board"
    old_runner = fake_entry(root, "runner-0", 40, age_s=500)  # in use: kept whatever its age
    for i, age in enumerate((400, 300, 200, 100), 1):
        fake_entry(root, f"kernels-{i}", 100, age_s=age)
    board = Board(board_config(f"ssh://native-board?workdir={root}&cache_size=300K"))
    try:
        assert board_cache.lookup(board, str(root / "kernels-1"), "model.so")  # used now
        assert not board_cache.lookup(board, str(root / "kernels-9"), "model.so")
        assert board.cache_in_use == [str(root / "kernels-1")]
        board.cache_in_use.append(str(old_runner))
        removed, kept_kib = board_cache.evict(board)
        # Newest first: kernels-1 (touched, in use) and 4 fit in 300 KiB (104 KiB each with
        # the dir); 3 and 2 would not: the least recently used go. The runner stays (in use).
        assert entries(root) == ["kernels-1", "kernels-4", "runner-0"], entries(root)
        assert removed == 2 and 200 < kept_kib <= 300
        board.cfg.cache_size = 0  # no cap: nothing goes
        assert board_cache.evict(board) == (0, -1) and len(entries(root)) == 3
    finally:
        board.close()


def test_a_new_entry_evicts_but_never_the_session_own(ssh_world, tmp_path):
    root = tmp_path / "board"
    stale = fake_entry(root, "kernels-stale", 4, age_s=1000)
    with rvvkit.load(rvvkit.build(small_model()),
                     on=f"ssh://native-board?workdir={root}&cache_size=1K") as sess:
        sess.run(small_feeds())  # its runner and kernels alone pass 1 KiB: both stay
        names = [p.rsplit("/", 2)[-2] for p in (sess.runner_path, sess.kernels_path)]
    assert not stale.exists() and sorted(entries(root)) == sorted(names)
    assert ssh_world.leftovers(root) == []


def cli(*args):
    return subprocess.run([sys.executable, "-m", "rvvkit", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_boards_clean(ssh_world, tmp_path, monkeypatch):
    root = tmp_path / "board"
    url = f"ssh://native-board?workdir={root}"
    fake_entry(root, "runner-a", 1024, age_s=0)
    fake_entry(root, "kernels-b", 512, age_s=0)
    (root / "tmp" / "session-running").mkdir(parents=True)  # a running session: left alone
    proc = cli("boards", "clean", url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ssh://native-board: removed 2 cache entries (1.5 MiB) from " \
        f"{root}\n", proc.stdout
    assert entries(root) == [] and (root / "tmp" / "session-running").is_dir()
    proc = cli("boards", "clean", url)  # nothing left: still a success
    assert proc.returncode == 0 and "removed 0 cache entries (0.0 MiB)" in proc.stdout
    # Every board of a boards file; one unreachable: reported, the others cleaned, exit 1.
    fake_entry(root, "kernels-c", 1, age_s=0)
    boards = tmp_path / "boards.toml"
    boards.write_text(f'[native-board]\ncompiler = "gcc"\nworkdir = "{root}"\n\n'
                      '[wrong-key-board]\n')
    monkeypatch.setenv("RVVKIT_BOARDS", str(boards))
    proc = cli("boards", "clean")
    assert proc.returncode == 1, proc.stderr
    assert "native-board: removed 1 cache entry" in proc.stdout and entries(root) == []
    assert "wrong-key-board" in proc.stderr and "authentication" in proc.stderr
    # Usage errors: exit 2, as in every command.
    assert cli("boards").returncode == 2
    assert cli("boards", "clean", "ssh://").returncode == 2
    boards.write_text("")
    proc = cli("boards", "clean")
    assert proc.returncode == 2 and "name a board" in proc.stderr
