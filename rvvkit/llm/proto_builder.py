"""The two things every ONNX graph rvvkit writes itself does (a GGUF file's decoder,
llm/gguf/graph.py; the test decoders of rvvkit.zoo): append initializers, and append nodes in
order, each named after its operator and its place."""
from __future__ import annotations

from typing import List, Tuple

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


def cache_io(layers: int, kv_heads: int, head: int, elem_type: int = 1
             ) -> Tuple[List, List]:
    """(past_key_values.{i}.key|value inputs [batch_size, kv_heads, past_sequence_length,
    head], present.{i}.key|value outputs over total_sequence_length) of a decoder, in the
    names and symbolic dimensions onnxruntime-genai and optimum write; elem_type an onnx
    TensorProto type (1: float)."""
    from onnx import helper
    inputs, outputs = [], []
    for i in range(layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(
                f"past_key_values.{i}.{kind}", elem_type,
                ["batch_size", kv_heads, "past_sequence_length", head]))
            outputs.append(helper.make_tensor_value_info(
                f"present.{i}.{kind}", elem_type,
                ["batch_size", kv_heads, "total_sequence_length", head]))
    return inputs, outputs
