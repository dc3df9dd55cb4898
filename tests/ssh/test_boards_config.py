"""Resolving ssh://... addresses: OpenSSH config, boards file, URL query and session arguments,
in that order of increasing precedence. No server needed."""
from __future__ import annotations

import pytest

from rvvkit.errors import RvvkitError
from rvvkit.runtime.boards import board_config, parse_url


@pytest.fixture
def files(tmp_path, monkeypatch):
    ssh = tmp_path / "ssh_config"
    ssh.write_text("Host k1-board\n    HostName 10.0.0.7\n    User bianbu\n    Port 2200\n"
                   "    IdentityFile ~/.ssh/k1\n    IdentitiesOnly yes\n"
                   f"    UserKnownHostsFile {tmp_path}/kh1 {tmp_path}/kh2\n"
                   "    ConnectTimeout 7\n    StrictHostKeyChecking accept-new\n"
                   "    ServerAliveInterval 9\n    ServerAliveCountMax 4\n\n"
                   "Host jumpy\n    ProxyJump gateway\n")
    boards = tmp_path / "boards.toml"
    boards.write_text('[k1-board]\ncompiler = "gcc-14"\ncflags = ["-O2", "-DX=1"]\n'
                      'wrapper = "taskset -c 0"\ncommand_timeout = 30\n\n'
                      '["10.1.1.1"]\ncompiler = "clang"\nbogus = 1\n')
    monkeypatch.setenv("RVVKIT_SSH_CONFIG", str(ssh))
    monkeypatch.setenv("RVVKIT_BOARDS", str(boards))
    return tmp_path


def test_parse_url_keeps_alias_case_and_decodes_query():
    assert parse_url("ssh://K1-Board") == ("", "K1-Board", None, {})
    assert parse_url("ssh://me@127.0.0.1:2222?cflags=-DA+-DB&trust_new_host=1") == \
        ("me", "127.0.0.1", 2222, {"cflags": "-DA -DB", "trust_new_host": "1"})
    assert parse_url("ssh://[::1]:22")[1:3] == ("::1", 22)
    for bad in ("k1-board", "http://x", "ssh://", "ssh://h:notaport", "ssh://h/path"):
        with pytest.raises(RvvkitError):
            parse_url(bad)


def test_ssh_config_then_boards_file_then_query_then_arguments(files):
    cfg = board_config("ssh://k1-board")
    assert (cfg.hostname, cfg.user, cfg.port) == ("10.0.0.7", "bianbu", 2200)
    assert cfg.identity_files[0].endswith("/.ssh/k1") and cfg.identities_only
    assert cfg.known_hosts == [f"{files}/kh1", f"{files}/kh2"]
    assert cfg.trust_new_host and cfg.connect_timeout == 7
    assert (cfg.compiler, cfg.cflags, cfg.wrapper) == ("gcc-14", ["-O2", "-DX=1"],
                                                       "taskset -c 0")
    assert cfg.command_timeout == 30 and cfg.workdir == "~/.cache/rvvkit"
    cfg = board_config("ssh://root@k1-board:22?compiler=cc&command_timeout=5",
                       command_timeout=9, compiler=None)
    assert (cfg.user, cfg.port, cfg.compiler, cfg.command_timeout) == ("root", 22, "cc", 9)


def test_bad_settings_are_named(files):
    with pytest.raises(RvvkitError, match="unknown board option 'bogus'"):
        board_config("ssh://10.1.1.1")
    with pytest.raises(RvvkitError, match="trust_new_host"):
        board_config("ssh://k1-board?trust_new_host=maybe")
    with pytest.raises(RvvkitError, match="positive number of seconds"):
        board_config("ssh://k1-board?command_timeout=-1")
    with pytest.raises(RvvkitError, match="ProxyJump"):
        board_config("ssh://jumpy")


def test_without_files_the_alias_is_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv("RVVKIT_SSH_CONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("RVVKIT_BOARDS", str(tmp_path / "absent.toml"))
    cfg = board_config("ssh://user@10.0.0.7:2222")
    assert (cfg.hostname, cfg.user, cfg.port, cfg.compiler) == ("10.0.0.7", "user", 2222, None)
    assert cfg.known_hosts[0].endswith("/.ssh/known_hosts") and not cfg.trust_new_host


def test_transfer_keepalive_and_cache_options(files):
    cfg = board_config("ssh://10.0.0.9")  # no table, no Host block: the defaults
    assert (cfg.transfer, cfg.keepalive_interval, cfg.keepalive_count_max, cfg.cache_size) == \
        ("auto", 5.0, 3, 256 << 20)
    cfg = board_config("ssh://k1-board")  # ServerAlive* of the SSH config
    assert (cfg.keepalive_interval, cfg.keepalive_count_max) == (9.0, 4)
    cfg = board_config("ssh://k1-board?transfer=EXEC&keepalive_interval=0"
                       "&keepalive_count_max=2&cache_size=1.5G")
    assert (cfg.transfer, cfg.keepalive_interval, cfg.keepalive_count_max, cfg.cache_size) == \
        ("exec", 0.0, 2, 3 << 29)
    for size, want in (("0", 0), ("512KiB", 512 << 10), ("1048576", 1 << 20), ("64MB", 64 << 20)):
        assert board_config(f"ssh://k1-board?cache_size={size}").cache_size == want
    for bad, match in (("transfer=scp", "use one of auto, sftp, exec"),
                       ("keepalive_interval=-1", "positive number of seconds"),
                       ("keepalive_count_max=0", "whole number"),
                       ("cache_size=lots", "not a size")):
        with pytest.raises(RvvkitError, match=match):
            board_config(f"ssh://k1-board?{bad}")
