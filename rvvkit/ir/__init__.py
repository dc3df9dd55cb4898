from .graph import Graph, Node, Shape, Tensor

__all__ = ["Graph", "Node", "Shape", "Tensor"]
