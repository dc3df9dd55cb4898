"""MatMulNBits test models (onnxruntime's contrib operator): one place for the operator tests
(tests/ops/test_ops_llm.py) and the host's AVX2-against-portable check
(tests/host/test_nbits_x86.py)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from model_building import rand
from rvvkit.ops.llm import nbits
from rvvkit.ops.llm.blocks import INT8_ACTIVATIONS

MS = "com.microsoft"


def ms_model(nodes, inputs, outputs, inits=None):
    graph = helper.make_graph(nodes, "llm_op", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k)
                               for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(MS, 1)], ir_version=8)


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def nbits_model(case: str, rows: int, k: int, n: int, bits: int, block: int, zp: str,
                bias: bool):
    """(model, feeds) of one MatMulNBits case. `case` names its variants: "acc4" (int8
    activations, accuracy_level 4), "s16" (scales rounded to bfloat16), "h16" (float16 scales,
    a zero and a subnormal among them), "i8f" (int8 activations with float zero points too:
    rvvkit's attribute, as its GGUF import writes Q4_K); zp: "" none, "u8" packed, "f32"
    floats."""
    w = rand(k, n, seed=1)
    b, scales, packed = nbits.quantize(w, bits, block, zero_points=bool(zp),
                                       bf16_scales="s16" in case)
    if "h16" in case:
        scales = scales.astype(np.float16).astype(np.float32)
        scales.flat[0], scales.flat[1] = 0.0, 2.0 ** -20
    inits = {"b": b, "scales": scales.ravel()}
    names = ["a", "b", "scales"]
    if zp == "u8":
        inits["zp"] = packed.ravel()
    elif zp == "f32":   # one float zero point per block (the codes' midpoint, shifted)
        inits["zp"] = np.full(scales.size, (1 << (bits - 1)) + 0.25, np.float32)
    if zp:
        names.append("zp")
    if bias:
        names += [""] * (5 - len(names)) + ["bias"]
        inits["bias"] = rand(n, seed=3)
    extra = {INT8_ACTIVATIONS: 1} if "i8f" in case else {}
    node = helper.make_node("MatMulNBits", names, ["y"], domain=MS, K=k, N=n, bits=bits,
                            block_size=block, accuracy_level=4 if "acc4" in case else 0,
                            **extra)
    model = ms_model([node], [f32("a", [rows, k])], [f32("y", [rows, n])], inits)
    return model, {"a": rand(rows, k, seed=2)}
