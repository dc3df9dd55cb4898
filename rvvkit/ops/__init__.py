"""The operator table. Importing this package registers every supported operator; importing
rvvkit.codegen.lower attaches the C lowerings to the same entries."""
from . import activations, elementwise, nn, shape  # noqa: F401  (registration side effects)
from .registry import REGISTRY, OpDef

__all__ = ["REGISTRY", "OpDef"]
