"""What the pattern matchers (patterns.py, layernorm.py) read a graph through: its producer and
consumer maps and the small questions a match asks of them (a node of some op, a single-use
value, a scalar constant, a product of factors, x + c, intermediates private to a match)."""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..ir import Graph, Node

MAX_DEPTH = 8   # nested Mul/Div levels read as one product


class View:
    """Producer/consumer maps of `g` and the small questions matchers ask of them."""

    def __init__(self, g: Graph):
        self.g = g
        self.prod = g.producers()
        self.cons = g.consumers()

    def node(self, name: str, *ops: str) -> Optional[Node]:
        """The producer of `name` when it is one of `ops` and carries no fusion yet."""
        n = self.prod.get(name)
        if n is None or n.op not in ops or n.act is not None or n.residual:
            return None
        return n

    def single(self, name: str) -> bool:
        return len(self.cons.get(name, [])) == 1 and name not in self.g.outputs

    def scalar(self, name: str) -> Optional[float]:
        """The value of a one-element numeric constant, else None."""
        if not self.g.is_const(name):
            return None
        data = self.g.const(name)
        return float(data.reshape(-1)[0]) if data.size == 1 and data.dtype.kind in "fiu" else None

    def product(self, name: str, nodes: List[Node], root: bool = False, depth: int = 0
                ) -> Tuple[float, List[str]]:
        """`name` as coef * prod(factors): Mul and Div-by-constant nodes whose output is read
        once (or the root) are opened and added to `nodes`; constants join the coefficient.
        Patterns are a few factors deep: longer chains stay factors (no deep recursion)."""
        c = self.scalar(name)
        if c is not None:
            return c, []
        n = self.node(name, "Mul", "Div")
        if (n is None or len(n.inputs) != 2 or not (root or self.single(name))
                or depth > MAX_DEPTH):
            return 1.0, [name]
        if n.op == "Div":
            d = self.scalar(n.inputs[1])
            if d is None or d == 0:
                return 1.0, [name]
            nodes.append(n)
            c, fs = self.product(n.inputs[0], nodes, depth=depth + 1)
            return c / d, fs
        nodes.append(n)
        c0, f0 = self.product(n.inputs[0], nodes, depth=depth + 1)
        c1, f1 = self.product(n.inputs[1], nodes, depth=depth + 1)
        return c0 * c1, f0 + f1

    def plus_const(self, name: str, nodes: List[Node]) -> Tuple[Optional[str], float]:
        """`name` = other + c for a single-use Add with a scalar constant: (other, c)."""
        n = self.node(name, "Add", "Sum")
        if n is None or len(n.inputs) != 2 or not self.single(name):
            return None, 0.0
        for a, b in (n.inputs, n.inputs[::-1]):
            c = self.scalar(b)
            if c is not None and not self.g.is_const(a):
                nodes.append(n)
                return a, c
        return None, 0.0

    def private(self, anchor: Node, nodes: Sequence[Node]) -> bool:
        """Every matched intermediate is read only by matched nodes and is no graph output."""
        ids = {id(n) for n in nodes} | {id(anchor)}
        for n in nodes:
            if n is anchor:
                continue
            for o in n.outputs:
                if o in self.g.outputs or any(id(c) not in ids for c in self.cons.get(o, [])):
                    return False
        return True
