"""paramiko, imported when a board is first used: it comes with the `ssh` extra, and the rest of
the runtime installs and runs without it. Below both the board configuration (boards.py reads
SSH config files with it) and the connection (ssh_connect.py)."""
from __future__ import annotations

from ..errors import BoardConnectionError


def paramiko_module():
    try:
        import paramiko
    except ImportError:  # the `ssh` extra: the runtime installs without it
        raise BoardConnectionError("boards over SSH (--on ssh://) need paramiko: "
                                   "pip install 'rvvkit[ssh]'") from None
    return paramiko
