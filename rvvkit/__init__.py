"""rvvkit: ONNX models → portable C kernels → one artifact that runs on an x86 host, under QEMU
emulating an RVV board, on a board over SSH, or on a CUDA GPU."""
__version__ = "0.1.0"

from .errors import (ArtifactError, BoardConnectionError, CompileError,  # noqa: E402
                     CompilerNotFound, ExecutionError, InputError, ModelError, RvvkitError,
                     UnsupportedOperator)


def build(model, **kwargs):
    """Lower an ONNX model (path, bytes or ModelProto) to an `Artifact`. See rvvkit.build_model."""
    from .builder import build_model
    return build_model(model, **kwargs)


def load(artifact, on: str = "host", **kwargs):
    """Open a session on an artifact (path or `Artifact`) for the executor named by `on`:
    "host", "qemu" or a board "ssh://[user@]host[:port][?options]"."""
    from .runtime import open_session
    return open_session(artifact, on=on, **kwargs)


__all__ = ["build", "load", "__version__", "ArtifactError", "BoardConnectionError",
           "CompileError", "CompilerNotFound",
           "ExecutionError", "InputError", "ModelError", "RvvkitError", "UnsupportedOperator"]
