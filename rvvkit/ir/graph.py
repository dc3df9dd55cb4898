"""The Graph IR: named tensors with static shapes (and data when constant) and the nodes between
them, kept in topological order. Knows nothing about ONNX protobufs or C."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

Shape = Tuple[int, ...]


@dataclass
class Tensor:
    name: str
    shape: Shape
    dtype: np.dtype = np.dtype(np.float32)
    data: Optional[np.ndarray] = None  # set when the tensor is a build-time constant
    # A constant folded from DequantizeLinear keeps its integer source, (values, scale,
    # zero point, axis), so that passes/quant.py can run the integer kernel on it.
    qsource: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray, int]] = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass
class Node:
    op: str
    name: str
    inputs: List[str]
    outputs: List[str]
    attrs: Dict[str, Any] = field(default_factory=dict)
    # Fusion results, typed (passes set them; lowerings read them). `act` is an activation
    # (rvvkit.ops.activations.Act) applied in this node's epilogue; `residual` means the node's
    # last input is added to its output before `act`; `fused` lists (op, name) of every graph
    # node folded into this one, in the order they apply, for step comments and the plan meta.
    act: Any = None
    residual: bool = False
    fused: List[Tuple[str, str]] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Node({self.op} {self.name!r} {self.inputs} -> {self.outputs})"


class Graph:
    def __init__(self, name: str = "model"):
        self.name = name
        self.tensors: Dict[str, Tensor] = {}
        self.nodes: List[Node] = []
        self.inputs: List[str] = []
        self.outputs: List[str] = []
        # ai.onnx opset of the source model, read by ops whose meaning changed across opsets
        # (0: a graph built without a model, which gets the newest rules)
        self.opset: int = 0
        # (tensor, present output name) of every buffer that persists from one run to the next
        # in the session's arena (a key/value cache; passes/kv_cache.py)
        self.state: List[Tuple[str, str]] = []

    # -- tensors -------------------------------------------------------------------------------
    def add_tensor(self, t: Tensor) -> Tensor:
        self.tensors[t.name] = t
        return t

    def add_const(self, name: str, data: np.ndarray) -> Tensor:
        data = np.asarray(data)
        return self.add_tensor(Tensor(name, tuple(int(d) for d in data.shape), data.dtype, data))

    def fresh_name(self, base: str) -> str:
        name, i = base, 0
        while name in self.tensors:
            i += 1
            name = f"{base}_{i}"
        return name

    def t(self, name: str) -> Tensor:
        return self.tensors[name]

    def is_const(self, name: str) -> bool:
        return bool(name) and self.tensors[name].is_const

    def const(self, name: str) -> np.ndarray:
        data = self.tensors[name].data
        assert data is not None, name
        return data

    # -- structure -----------------------------------------------------------------------------
    def producers(self) -> Dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> Dict[str, List[Node]]:
        uses: Dict[str, List[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    uses.setdefault(i, []).append(n)
        return uses

    def use_count(self, name: str) -> int:
        count = sum(1 for n in self.nodes for i in n.inputs if i == name)
        return count + self.outputs.count(name)

    def replace_uses(self, old: str, new: str) -> None:
        """Point every reader of `old` (nodes and graph outputs) at `new`."""
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
        self.outputs = [new if o == old else o for o in self.outputs]

    def remove_nodes(self, dead: Iterable[Node]) -> None:
        ids = {id(n) for n in dead}
        self.nodes = [n for n in self.nodes if id(n) not in ids]

    def prune_tensors(self) -> None:
        """Drop tensors no node, input or output refers to (e.g. folded weights)."""
        live = set(self.inputs) | set(self.outputs)
        for n in self.nodes:
            live.update(i for i in n.inputs if i)
            live.update(o for o in n.outputs if o)
        self.tensors = {k: v for k, v in self.tensors.items() if k in live}

    def summary(self) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts
