"""rvvkit: ONNX models → portable C kernels → one artifact that runs on an x86 host, under QEMU
emulating an RVV board, on a board over SSH, or on a CUDA GPU."""
from .version import __version__  # noqa: E402

from .errors import (ArtifactError, BoardConnectionError, CompileError,  # noqa: E402
                     CompilerNotFound, ExecutionError, InputError, ModelError, RvvkitError,
                     SignatureError, UnsupportedOperator)


def build(model, **kwargs):
    """Lower an ONNX model (path, bytes or ModelProto) to an `Artifact`. See
    rvvkit.builder.build_model."""
    from .builder import build_model
    return build_model(model, **kwargs)


def load(artifact, on: str = "host", *, require_signature=None, **kwargs):
    """Open a session on an artifact (path or `Artifact`) for the executor named by `on`:
    `"host"`, `"qemu"` or a board `"ssh://[user@]host[:port][?options]"`. require_signature: a
    public key (file, `ssh-ed25519 ...` line or 64 hex digits; see rvvkit.artifact.signing): the
    artifact must be signed by it, checked before anything is compiled (SignatureError)."""
    from .runtime import open_session
    if require_signature is not None:
        from .artifact.container import Artifact
        from .artifact.signing import verify_artifact
        source = "artifact" if isinstance(artifact, Artifact) else str(artifact)
        if not isinstance(artifact, Artifact):  # the object checked is the object run
            artifact = Artifact.load(artifact)
        verify_artifact(artifact, require_signature, source)
    return open_session(artifact, on=on, **kwargs)


__all__ = ["build", "load", "__version__", "ArtifactError", "BoardConnectionError",
           "CompileError", "CompilerNotFound",
           "ExecutionError", "InputError", "ModelError", "RvvkitError", "SignatureError",
           "UnsupportedOperator"]
