"""Domain exceptions. Every failure a user can cause maps to one of these, with enough context
to act on it without reading rvvkit's source."""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple


class RvvkitError(Exception):
    """Base class of every error rvvkit raises on purpose."""


class ModelError(RvvkitError):
    """The model file is malformed or inconsistent (bad protobuf, missing tensor, bad attribute)."""


class UnsupportedOperator(ModelError):
    """One or more operators of the model have no lowering. Lists every one, with node names."""

    def __init__(self, ops: Sequence[Tuple[str, str]], detail: str = ""):
        self.ops: List[Tuple[str, str]] = list(ops)
        by_type: dict = {}
        for op_type, node in self.ops:
            by_type.setdefault(op_type, []).append(node or "<unnamed>")
        lines = [f"  {t}: {', '.join(nodes)}" for t, nodes in sorted(by_type.items())]
        msg = "unsupported operator(s) in model:\n" + "\n".join(lines)
        if detail:
            msg += "\n" + detail
        super().__init__(msg)

    @property
    def op_types(self) -> List[str]:
        return sorted({t for t, _ in self.ops})


class ModelProblems(UnsupportedOperator):
    """Several things in one model that rvvkit cannot build (unsupported operators, attribute
    values or dtypes, shapes that cannot be made static, ...), all found before any code is
    generated and listed at once, one line each naming its node or graph input/output.
    `problems` holds (op_type or "", node or tensor name, message); `ops` the node ones."""

    def __init__(self, problems: Sequence[Tuple[str, str, str]]):
        self.problems: List[Tuple[str, str, str]] = list(problems)
        self.ops = [(op, where) for op, where, _ in self.problems if op]
        lines = [" ".join(msg.split()) for _, _, msg in self.problems]
        count = "1 problem" if len(lines) == 1 else f"{len(lines)} problems"
        ModelError.__init__(self, f"{count} in the model:\n"
                            + "\n".join(f"  {line}" for line in lines))


class InternalError(RvvkitError):
    """A bug in rvvkit, not a fault of the model: an exception rvvkit's own code did not
    expect (TypeError, IndexError, ...) while it handled a node. One line naming the op and
    node and the exception, asking for a report; the exception itself is the __cause__."""

    def __init__(self, op: str, node: str, exc: BaseException):
        self.op, self.node, self.exc = op, node, exc
        what = " ".join(f"{type(exc).__name__}: {exc}".split())
        super().__init__(f"internal error (a bug in rvvkit, not a fault of the model) while "
                         f"handling {op} node {node!r}: {what}; please report it with the "
                         "model or a small graph that reproduces it")


class ArtifactError(RvvkitError):
    """The artifact file is corrupt, truncated or of an unknown format version."""

    def __init__(self, message: str, section: Optional[str] = None):
        self.section = section
        super().__init__(message)


class SignatureError(RvvkitError):
    """Artifact signing (rvvkit.artifact.signing): a key that cannot be used (not ed25519, encrypted
    without a passphrase, unreadable), or an artifact refused because it is unsigned, signed by
    another key than the required one, or its signature does not verify."""


class ExecutorUnavailable(RvvkitError):
    """An executor cannot run on this machine: no CUDA device, no QEMU or sysroot, no
    compiler. Not a defect of the model or of rvvkit; `rvvkit compare` lists such paths as
    skipped."""


class CompilerNotFound(ExecutorUnavailable):
    """No usable compiler for the requested target."""


class CompileError(RvvkitError):
    """The compiler rejected the generated source. Carries everything needed to reproduce it."""

    def __init__(self, cmd: Iterable[str], returncode: int, stderr: str,
                 source_path: Optional[str] = None, excerpt: str = ""):
        self.cmd = list(cmd)
        self.returncode = returncode
        self.stderr = stderr
        self.source_path = source_path
        self.excerpt = excerpt
        parts = [f"compilation failed (exit code {returncode})",
                 "command: " + " ".join(self.cmd)]
        if source_path:
            parts.append(f"source kept at: {source_path}")
        parts.append("compiler stderr:\n" + (stderr.strip() or "<empty>"))
        if excerpt:
            parts.append("source excerpt:\n" + excerpt)
        super().__init__("\n".join(parts))


class InputError(RvvkitError):
    """Inputs given to a session do not match the model (names, shapes, dtypes)."""


class ExecutionError(RvvkitError):
    """A run failed after compilation (crash, timeout, missing output)."""


class BoardConnectionError(ExecutionError):
    """A remote board cannot be reached or logged in to (network, unknown or changed host
    key, authentication). Names the board and what to check."""
