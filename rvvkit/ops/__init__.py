"""Operator semantics. Importing this package registers every supported operator."""
from . import elementwise, nn, shape  # noqa: F401  (registration side effects)
from .registry import REGISTRY, OpDef

__all__ = ["REGISTRY", "OpDef"]
