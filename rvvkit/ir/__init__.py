"""The Graph IR every stage shares: tensors (shape, dtype, constant data), nodes with typed
fusion fields, and the graph (`graph.py`)."""
from .graph import Graph, Node, Shape, Tensor

__all__ = ["Graph", "Node", "Shape", "Tensor"]
