"""Executors. Each takes the same inputs (dict of numpy arrays) and returns the same outputs."""
from __future__ import annotations

from ..errors import RvvkitError
from .session import Session

EXECUTORS = ("host", "qemu", "cuda", "cuda-emu", "ssh://[user@]host[:port]")


def open_session(artifact, on: str = "host", **kwargs) -> Session:
    """A session on `artifact`; kwargs go to the executor (qemu: vlen=, tail_ones=, qemu=, ...;
    ssh: command_timeout=, connect_timeout=, trust_new_host=, ...; cuda: nvcc=, use_cache=;
    cuda-emu, the CUDA kernels run by a CPU emulator: compiler=, use_cache=)."""
    if on == "host":
        from .host import HostSession
        return HostSession(artifact, **kwargs)
    if on == "qemu":
        from .qemu import QemuSession
        return QemuSession(artifact, **kwargs)
    if on in ("cuda", "cuda-emu"):
        from .cuda import CudaSession
        return CudaSession(artifact, emulate=on == "cuda-emu", **kwargs)
    if isinstance(on, str) and on.startswith("ssh://"):
        from .ssh import SshSession
        return SshSession(artifact, on, **kwargs)
    raise RvvkitError(f"unknown executor {on!r}; available: {', '.join(EXECUTORS)}")


__all__ = ["open_session", "Session", "EXECUTORS"]
