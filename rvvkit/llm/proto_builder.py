"""The two things every ONNX graph rvvkit writes itself does (a GGUF file's decoder,
llm/gguf/graph.py; the test decoders of rvvkit.zoo): append initializers, and append nodes in
order, each named after its operator and its place."""
from __future__ import annotations

from typing import List

import numpy as np


class ProtoBuilder:
    def __init__(self):
        self.nodes: List = []
        self.inits: List = []

    def const(self, name: str, data) -> str:
        """An initializer `name` holding `data`; returns the name."""
        from onnx import numpy_helper
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(data), name))
        return name

    def node(self, op: str, ins, outs, domain: str = "", **attrs) -> List[str]:
        """A node `op` from `ins` to `outs` (attributes `attrs`); returns its outputs."""
        from onnx import helper
        self.nodes.append(helper.make_node(op, list(ins), list(outs), domain=domain,
                                           name=f"/{op}_{len(self.nodes)}", **attrs))
        return list(outs)
