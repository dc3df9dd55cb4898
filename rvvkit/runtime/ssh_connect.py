"""Logging in to a board: paramiko with host-key checking on (known_hosts files from the SSH
config, plus the system-wide one), key and agent authentication, a bounded connect time, and
every refusal turned into a BoardConnectionError that says what to check."""
from __future__ import annotations

import logging
import os
import socket

from ..errors import BoardConnectionError
from .boards import BoardConfig, ssh_config_path
from .paramiko_import import paramiko_module

log = logging.getLogger("rvvkit.ssh")
GLOBAL_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"


class _UnknownHost(Exception):
    def __init__(self, name: str, key):
        super().__init__(name)
        self.name, self.key = name, key


def _policy(cfg: BoardConfig):
    paramiko = paramiko_module()

    class Policy(paramiko.MissingHostKeyPolicy):
        """Unknown key: refuse, unless the user asked to trust new hosts; then record it as
        OpenSSH's accept-new does. A *changed* key never gets here: paramiko raises
        BadHostKeyException first."""

        def missing_host_key(self, client, hostname, key):
            if not cfg.trust_new_host:
                raise _UnknownHost(hostname, key)
            path = cfg.known_hosts[0] if cfg.known_hosts else \
                os.path.expanduser("~/.ssh/known_hosts")
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "a", encoding="ascii") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            client.get_host_keys().add(hostname, key.get_name(), key)
            log.warning("trusted new host key of %s (%s %s), recorded in %s", hostname,
                        key.get_name(), key.fingerprint, path)

    return Policy()


def _client(cfg: BoardConfig):
    paramiko = paramiko_module()
    client = paramiko.SSHClient()
    for path in [GLOBAL_KNOWN_HOSTS, *cfg.known_hosts]:
        if os.path.isfile(path):
            try:
                client.load_system_host_keys(path)  # read only: Policy appends new keys
            except (OSError, paramiko.SSHException) as exc:
                raise BoardConnectionError(f"cannot read known_hosts file {path}: {exc}") \
                    from None
    client.set_missing_host_key_policy(_policy(cfg))
    return client


def connect(cfg: BoardConfig):
    """A logged-in paramiko.SSHClient for the board, or BoardConnectionError."""
    paramiko = paramiko_module()
    client = _client(cfg)
    t = cfg.connect_timeout
    where = f"{cfg.address} ({cfg.label})"
    try:
        sock = paramiko.ProxyCommand(cfg.proxy_command) if cfg.proxy_command else None
        # IdentitiesOnly: only the configured keys, as OpenSSH does (no agent, no defaults).
        client.connect(cfg.hostname, port=cfg.port, username=cfg.user or None,
                       key_filename=cfg.identity_files or None,
                       look_for_keys=not cfg.identities_only,
                       allow_agent=not cfg.identities_only, timeout=t, banner_timeout=t,
                       auth_timeout=t, channel_timeout=t, sock=sock)
        return client
    except _UnknownHost as exc:
        files = ", ".join(cfg.known_hosts) or "~/.ssh/known_hosts"
        error = (f"refusing to connect to {where}: its host key ({exc.key.get_name()} "
                 f"{exc.key.fingerprint}) is not in known_hosts ({files}). If this is the "
                 f"board you expect, trust it once: add ?trust_new_host=1 to the address "
                 f"({cfg.label}?trust_new_host=1), or set trust_new_host = true in its "
                 f"boards-file table, or connect once with `ssh {cfg.alias}`; the key is then "
                 f"recorded in {files.split(', ')[0]}")
    except paramiko.BadHostKeyException as exc:
        error = (f"host key of {where} has CHANGED ({exc.key.get_name()} "
                 f"{exc.key.fingerprint}): someone may be intercepting the connection, or the "
                 f"board was reinstalled. If you know why, remove the old key (ssh-keygen -R "
                 f"'{exc.hostname}') and trust the new one")
    except paramiko.AuthenticationException as exc:
        keys = ", ".join(cfg.identity_files) or "none configured"
        error = (f"authentication to {where} failed ({exc}); identity files: {keys}"
                 f"{'' if cfg.identities_only else ', ~/.ssh/id_*, the ssh agent'}. Check "
                 f"IdentityFile/User for Host {cfg.alias} in {ssh_config_path()} and the "
                 "board's ~/.ssh/authorized_keys")
    except (socket.timeout, TimeoutError):
        error = f"connecting to {where} timed out after {t:g} s (connect_timeout)"
    except (paramiko.SSHException, OSError, EOFError) as exc:
        error = f"cannot connect to {where}: {exc}"
    client.close()
    raise BoardConnectionError(error)
