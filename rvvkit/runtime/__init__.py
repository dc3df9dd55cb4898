"""Executors. Each takes the same inputs (dict of numpy arrays) and returns the same outputs."""
from __future__ import annotations

from ..errors import RvvkitError
from .session import Session

EXECUTORS = ("host",)


def open_session(artifact, on: str = "host", **kwargs) -> Session:
    if on == "host":
        from .host import HostSession
        return HostSession(artifact, **kwargs)
    raise RvvkitError(f"unknown executor {on!r}; available: {', '.join(EXECUTORS)}")


__all__ = ["open_session", "Session", "EXECUTORS"]
