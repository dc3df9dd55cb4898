"""Where a board is and how to use it: `ssh://[user@]host[:port][?option=value&...]` resolved
through the OpenSSH client config and rvvkit's boards file.

Precedence, first wins: keyword arguments of the session, URL (user, port, query options),
boards file table of the host alias, OpenSSH config (Host block of the alias), defaults.

OpenSSH config ($RVVKIT_SSH_CONFIG, else ~/.ssh/config): HostName, User, Port, IdentityFile,
IdentitiesOnly, UserKnownHostsFile, ConnectTimeout, ProxyCommand, ServerAliveInterval and
ServerAliveCountMax (keepalive_interval / keepalive_count_max), and `StrictHostKeyChecking
accept-new` (same as trust_new_host). SSH config cannot carry what rvvkit needs to know about
a board, so a TOML file ($RVVKIT_BOARDS, else ~/.config/rvvkit/boards.toml) holds it, one
table per alias:

    [k1-board]
    compiler = "gcc"                  # else the board's $RVVKIT_COMPILER / $TVM_RVV_COMPILER, else cc
    cflags = "-mtune=spacemit-x60"    # appended to the JIT's flags (string or list)
    wrapper = "qemu-riscv64 -L /usr/riscv64-linux-gnu -cpu rv64,v=true,vlen=256"  # shell text
    workdir = "~/.cache/rvvkit"       # caches and temporary dirs on the board
    preset = "k1"                     # seed options from toolchain/boards/k1.toml (k230, sg2044)
    transfer = "auto"                 # files over SFTP, else the exec channel; "sftp" or "exec" force one
    keepalive_interval = 5            # seconds between keepalives (0: none); ServerAliveInterval
    keepalive_count_max = 3           # unanswered keepalives before the board is given up
    cache_size = "256M"               # cap of the board-side build cache (LRU eviction; 0: no cap)

A preset's options come below the table's own (the table wins); its facts (cores, VLEN, compiler
hints) are what rvvkit assumes of that chip, shown by `rvvkit doctor`, never a measurement.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

from ..errors import RvvkitError
from ..jit.targets import board_preset, board_presets
from ..resources import load_toml
from .paramiko_import import paramiko_module

DEFAULT_WORKDIR = "~/.cache/rvvkit"
DEFAULT_CONNECT_TIMEOUT_S = 15.0
DEFAULT_COMMAND_TIMEOUT_S = 600.0
DEFAULT_KEEPALIVE_INTERVAL_S = 5.0
DEFAULT_KEEPALIVE_COUNT_MAX = 3
DEFAULT_CACHE_SIZE = 256 << 20
TRANSFERS = ("auto", "sftp", "exec")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")
# Options a boards-file table or a URL query may set, with their parsers.
OPTIONS = ("compiler", "cflags", "wrapper", "workdir", "arch", "trust_new_host",
           "connect_timeout", "command_timeout", "compile_timeout", "transfer",
           "keepalive_interval", "keepalive_count_max", "cache_size")


@dataclass
class BoardConfig:
    url: str                       # ssh://... as given (for messages)
    alias: str                     # the host part of the URL: ssh config Host, boards table
    hostname: str
    port: int = 22
    user: str = ""
    identity_files: List[str] = field(default_factory=list)
    identities_only: bool = False
    known_hosts: List[str] = field(default_factory=list)  # the first is written by trust_new_host
    proxy_command: str = ""
    compiler: Optional[str] = None
    cflags: List[str] = field(default_factory=list)
    wrapper: str = ""
    workdir: str = DEFAULT_WORKDIR
    arch: str = ""                 # what the board's programs run as; "" = ask (uname -m)
    trust_new_host: bool = False
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT_S
    compile_timeout: Optional[float] = None  # None: $RVVKIT_COMPILE_TIMEOUT, else 600
    preset: str = ""               # the toolchain/boards/ preset its table names, if any
    transfer: str = "auto"         # auto: SFTP where the server has it, else the exec channel
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL_S  # 0: no keepalives
    keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT_MAX
    cache_size: int = DEFAULT_CACHE_SIZE  # bytes of board-side cache kept; 0: no cap

    @property
    def label(self) -> str:
        return f"ssh://{self.alias}"

    @property
    def address(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.hostname}:{self.port}"


def ssh_config_path() -> Path:
    return Path(os.environ.get("RVVKIT_SSH_CONFIG") or "~/.ssh/config").expanduser()


def boards_path() -> Path:
    return Path(os.environ.get("RVVKIT_BOARDS") or "~/.config/rvvkit/boards.toml").expanduser()


def _unquote_query(text: str) -> str:
    return unquote(re.sub(r"(?<!\+)\+(?!\+)", " ", text))


def parse_url(url: str) -> Tuple[str, str, Optional[int], Dict[str, str]]:
    """(user, host, port or None, query options) of ssh://[user@]host[:port][?k=v&...]."""
    parts = urlsplit(url)
    if parts.scheme != "ssh" or not parts.hostname:
        raise RvvkitError(f"bad board address {url!r}: expected "
                          "ssh://[user@]host[:port][?option=value&...], e.g. ssh://k1-board")
    try:
        port = parts.port
    except ValueError:
        raise RvvkitError(f"bad port in board address {url!r}") from None
    if parts.path not in ("", "/"):
        raise RvvkitError(f"board address {url!r} has a path; put settings in the query "
                          "(?workdir=...) or in the boards file")
    # urlsplit lowercases hostname; an ssh config alias is case-sensitive, so take it as typed.
    hostport = parts.netloc.rpartition("@")[2]
    host = hostport[1:hostport.index("]")] if hostport.startswith("[") else \
        hostport.split(":", 1)[0]
    # A lone "+" is a space (?cflags=-O2+-DX), but parse_qsl also turned ?compiler=g++ into
    # "g  ": a run of "+" (g++, clang++, g++-13) stays literal; %2B is always a "+".
    query = {_unquote_query(k): _unquote_query(v) for k, _, v in
             (item.partition("=") for item in parts.query.split("&") if item)}
    return unquote(parts.username or ""), unquote(host), port, query


def _boards_table(alias: str) -> Dict[str, Any]:
    path = boards_path()
    if not path.is_file():
        return {}
    doc = load_toml(path, what="boards file")
    table = doc.get(alias, {})
    if not isinstance(table, dict):
        raise RvvkitError(f"boards file {path}: [{alias}] must be a table")
    return {k: (v, f"{path} [{alias}]") for k, v in table.items()}


def _preset_options(table: Dict[str, Tuple[Any, str]]) -> Tuple[str, Dict[str, Any]]:
    """(preset name, the options it seeds) for a boards-file table naming `preset`, taken out
    of the table; ("", {}) when it names none."""
    if "preset" not in table:
        return "", {}
    name, where = table.pop("preset")
    if str(name) not in board_presets():
        raise RvvkitError(f"unknown preset {name!r} in {where}; known: "
                          f"{', '.join(board_presets())}")
    options = board_preset(str(name)).get("options", {})
    return str(name), {k: (v, f"preset {name!r} of {where}") for k, v in options.items()}


def _as_bool(value: Any, where: str, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise RvvkitError(f"{name} = {value!r} in {where} is not a boolean (use 1/0, true/false)")


def _as_seconds(value: Any, where: str, name: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise RvvkitError(f"{name} = {value!r} in {where} is not a positive number of seconds")
    return seconds


def _as_count(value: Any, where: str, name: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise RvvkitError(f"{name} = {value!r} in {where} is not a whole number >= 1")
    return int(text)


def _as_size(value: Any, where: str, name: str) -> int:
    """Bytes from 268435456, "256M", "1G", "512KiB" (binary units); 0 means no cap."""
    text = str(value).strip().upper().replace("IB", "").rstrip("B")
    number, unit = text.rstrip("KMGT"), text[len(text.rstrip("KMGT")):]
    try:
        size = float(number) * _SIZE_UNITS[unit]
    except (ValueError, KeyError):
        size = -1.0
    if isinstance(value, bool) or size < 0:
        raise RvvkitError(f"{name} = {value!r} in {where} is not a size (e.g. 256M, 1G, 0 "
                          "for no cap)")
    return int(size)


def _as_choice(value: Any, where: str, name: str, choices: Tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise RvvkitError(f"{name} = {value!r} in {where}: use one of {', '.join(choices)}")
    return text


def _apply(cfg: BoardConfig, options: Dict[str, Tuple[Any, str]]) -> None:
    """Set BoardConfig fields from {option: (value, where it came from)}."""
    for name, (value, where) in options.items():
        if name not in OPTIONS:
            raise RvvkitError(f"unknown board option {name!r} in {where}; known: "
                              f"{', '.join(OPTIONS)}")
        if value is None:
            continue
        if name == "cflags":
            cfg.cflags = list(value) if isinstance(value, list) else shlex.split(str(value))
        elif name == "trust_new_host":
            cfg.trust_new_host = _as_bool(value, where, name)
        elif name.endswith("_timeout"):
            setattr(cfg, name, _as_seconds(value, where, name))
        elif name == "keepalive_interval":  # 0 turns keepalives off, as in OpenSSH
            cfg.keepalive_interval = 0.0 if str(value).strip() in ("0", "0.0") else \
                _as_seconds(value, where, name)
        elif name == "keepalive_count_max":
            cfg.keepalive_count_max = _as_count(value, where, name)
        elif name == "cache_size":
            cfg.cache_size = _as_size(value, where, name)
        elif name == "transfer":
            cfg.transfer = _as_choice(value, where, name, TRANSFERS)
        else:
            setattr(cfg, name, str(value))


def _apply_ssh_config(cfg: BoardConfig) -> None:
    path = ssh_config_path()
    if not path.is_file():
        cfg.known_hosts = [os.path.expanduser("~/.ssh/known_hosts")]
        return
    paramiko = paramiko_module()
    try:
        entry = paramiko.SSHConfig.from_path(str(path)).lookup(cfg.alias)
    except Exception as exc:  # paramiko raises several types for a malformed file
        raise RvvkitError(f"cannot read SSH config {path}: {exc}") from None
    if "proxyjump" in entry:
        raise RvvkitError(f"{path}: ProxyJump (Host {cfg.alias}) is not supported; use "
                          "ProxyCommand ssh -W %h:%p JUMPHOST instead")
    cfg.hostname = entry.get("hostname", cfg.alias)
    cfg.user = entry.get("user", "")
    cfg.port = int(entry.get("port", 22))
    cfg.identity_files = [os.path.expanduser(p) for p in entry.get("identityfile", [])]
    cfg.identities_only = entry.get("identitiesonly", "no").lower() == "yes"
    files = entry.get("userknownhostsfile", "~/.ssh/known_hosts")
    cfg.known_hosts = [os.path.expanduser(p) for p in shlex.split(files)]
    cfg.proxy_command = entry.get("proxycommand", "") if entry.get("proxycommand") != "none" \
        else ""
    if entry.get("stricthostkeychecking", "").lower() == "accept-new":
        cfg.trust_new_host = True
    if "connecttimeout" in entry:
        cfg.connect_timeout = _as_seconds(entry["connecttimeout"], str(path), "ConnectTimeout")
    # OpenSSH's own keepalive settings mean what ours do; the boards file and URL still win.
    _apply(cfg, {ours: (entry[theirs], f"{path} (Host {cfg.alias})") for theirs, ours in
                 (("serveraliveinterval", "keepalive_interval"),
                  ("serveralivecountmax", "keepalive_count_max")) if theirs in entry})


def board_config(url: str, **overrides: Any) -> BoardConfig:
    """The settings of the board at `url`; `overrides` (None values ignored) win over all."""
    user, host, port, query = parse_url(url)
    cfg = BoardConfig(url=url, alias=host, hostname=host)
    _apply_ssh_config(cfg)
    table = _boards_table(host)
    cfg.preset, seeded = _preset_options(table)
    _apply(cfg, seeded)
    _apply(cfg, table)
    _apply(cfg, {k: (v, f"the query of {url}") for k, v in query.items()})
    _apply(cfg, {k: (v, "the session arguments") for k, v in overrides.items()})
    cfg.user = user or cfg.user
    cfg.port = port or cfg.port
    return cfg
