"""What an ONNX graph states about a tensor or a node before rvvkit parses it, for the rewrites
that run on the proto (packed_qkv.py, ms_attention.py) and the decoder's shapes
(decoder_dims.py): an attribute, a declared shape, a width or a rank that the node making a
tensor fixes. None wherever the graph does not say."""
from __future__ import annotations

from functools import cached_property
from typing import Dict, List, Optional


def attr(node, name: str, default=None):
    """A node's attribute value (int, float, ints, ...), else `default`."""
    from onnx import helper
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name),
                default)


def declared(proto, name: str) -> Optional[List[Optional[int]]]:
    """The dims of `name` as a graph input or value_info declares them (None: symbolic)."""
    for vi in list(proto.graph.input) + list(proto.graph.value_info):
        if vi.name == name and vi.type.tensor_type.HasField("shape"):
            return [d.dim_value if d.HasField("dim_value") else None
                    for d in vi.type.tensor_type.shape.dim]
    return None


class Facts:
    """The graph's makers, initializer shapes and constant vectors, each read once (and only
    when a question needs it) for many questions."""

    def __init__(self, proto):
        self.proto = proto

    @cached_property
    def makers(self) -> Dict[str, object]:
        return {o: n for n in self.proto.graph.node for o in n.output}

    @cached_property
    def inits(self) -> Dict[str, list]:
        return {i.name: list(i.dims) for i in self.proto.graph.initializer}

    @cached_property
    def vectors(self) -> Dict[str, list]:
        """Rank-1 constants (initializers and Constant nodes) as lists: Reshape targets."""
        from onnx import numpy_helper
        out = {i.name: list(numpy_helper.to_array(i).reshape(-1))
               for i in self.proto.graph.initializer if len(i.dims) == 1}
        for n in self.proto.graph.node:
            if n.op_type == "Constant" and n.attribute and n.attribute[0].t.dims:
                out[n.output[0]] = list(numpy_helper.to_array(n.attribute[0].t).reshape(-1))
        return out

    def width(self, tensor: str) -> Optional[int]:
        """The last dimension of `tensor`: declared, or made by a MatMulNBits (its N), a MatMul
        with constant weights (their columns) or an Add of a rank-1 constant (a bias)."""
        dims = declared(self.proto, tensor)
        if dims and dims[-1]:
            return dims[-1]
        node = self.makers.get(tensor)
        if node is None:
            return None
        if node.op_type == "Add":
            sizes = [self.inits[i][0] for i in node.input
                     if i in self.inits and len(self.inits[i]) == 1]
            return sizes[0] if sizes else self.width(node.input[0])
        if node.op_type == "MatMulNBits":
            return attr(node, "N")
        if node.op_type == "MatMul" and node.input[1] in self.inits:
            return self.inits[node.input[1]][-1]
        return None

    def rank(self, tensor: str, depth: int = 0) -> Optional[int]:
        """The rank of `tensor`: declared, a Reshape to a constant shape, or through ops that
        keep their first input's rank."""
        dims = declared(self.proto, tensor)
        if dims is not None:
            return len(dims)
        node = self.makers.get(tensor)
        if node is None or depth > 8:
            return None
        if node.op_type == "Reshape" and node.input[1] in self.vectors:
            return len(self.vectors[node.input[1]])
        if node.op_type in ("RotaryEmbedding", "MatMul", "MatMulNBits", "Add", "Mul", "Cast"):
            return self.rank(node.input[0], depth + 1)
        return None
