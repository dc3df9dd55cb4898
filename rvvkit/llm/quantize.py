"""`rvvkit quantize`: an ONNX model's float MatMul weights to weight-only 4- or 8-bit blocks, as
com.microsoft MatMulNBits nodes (the format onnxruntime-genai writes and onnxruntime runs, so
the numerics of the result are onnxruntime's for the same file; rvvkit/ops/llm/nbits.py holds the
layout). With `embeddings`, token embeddings (a Gather of rows of a float 2-D initializer)
become com.microsoft GatherBlockQuantized at the same bits and block. Activations stay float;
everything else is untouched. A float16 model's weights quantize the same way (in float32),
their scales then stored as float16, the type MatMulNBits takes beside float16 activations."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, Optional

import numpy as np

from ..ops.llm import nbits
from ..errors import InputError, ModelError

FLOATS = (np.float32, np.float16)


def _scales_like(scales: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Scales in the weight's float type (MatMulNBits and GatherBlockQuantized want the
    activations' type; bfloat16 values of a float16 model's range are float16 values too)."""
    return scales.astype(w.dtype) if w.dtype == np.float16 else scales


@dataclass
class QuantizeReport:
    converted: int = 0
    skipped: Dict[str, str] = None   # node name -> why it stayed float
    embeddings: int = 0              # Gathers made GatherBlockQuantized
    bytes_before: int = 0
    bytes_after: int = 0


def _weight(model, name: str, inits) -> Optional[np.ndarray]:
    from onnx import numpy_helper
    init = inits.get(name)
    return None if init is None else numpy_helper.to_array(init)


def _embedding(n, inits, bits: int, block: int, bf16: bool, keep, report: QuantizeReport):
    """(GatherBlockQuantized node, its tensors) for a token-embedding Gather, or None."""
    from onnx import helper, numpy_helper
    if n.op_type != "Gather" or n.domain or n.input[0] not in inits or n.name in keep or \
            n.input[0] in keep:
        return None
    table = numpy_helper.to_array(inits[n.input[0]])
    axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
    if table.dtype not in FLOATS or table.ndim != 2 or axis != 0 or table.shape[1] % block:
        report.skipped[n.name or n.output[0]] = \
            f"table {list(table.shape)} {table.dtype}, axis {axis}: a float [rows, K] " \
            f"gathered on axis 0 with K a multiple of {block} is needed"
        return None
    # rows as MatMulNBits' columns: a tied LM head quantized alike gets the same bytes, which
    # the artifact then stores once
    b, scales, _ = nbits.quantize(table.T.astype(np.float32), bits, block, bf16_scales=bf16)
    scales = _scales_like(scales, table)
    base = n.input[0]
    tensors = [numpy_helper.from_array(b.reshape(table.shape[0], -1), base + "_Q"),
               numpy_helper.from_array(scales, base + "_scales")]
    report.embeddings += 1
    report.bytes_before += table.nbytes
    report.bytes_after += sum(numpy_helper.to_array(t).nbytes for t in tensors)
    node = helper.make_node("GatherBlockQuantized", [tensors[0].name, n.input[1],
                                                     tensors[1].name], list(n.output),
                            name=(n.name or base) + "_Q", domain="com.microsoft", bits=bits,
                            block_size=block, gather_axis=0, quantize_axis=1)
    return node, tensors


def quantize_model(model, bits: int = 4, block: int = 32, zero_points: bool = False,
                   exclude: Iterable[str] = (), accuracy: int = 0, embeddings: bool = False,
                   bf16_scales: bool = True):
    """(new ModelProto, QuantizeReport). Every MatMul whose B is a 2-D float initializer
    (read by no other node) becomes a MatMulNBits; `exclude` names nodes or weights to keep.
    `accuracy` is MatMulNBits' accuracy_level: 0 float activations, 4 int8 (faster).
    `embeddings`: token-embedding Gathers too (GatherBlockQuantized, no zero points).
    `bf16_scales`: scales rounded up to bfloat16 values (nbits.quantize), which the artifact
    stores in 16 bits."""
    from onnx import helper, numpy_helper
    if bits not in (4, 8):
        raise InputError(f"--weights int{bits}: int4 and int8 are supported")
    if block < 16 or block & (block - 1):
        raise InputError(f"--block {block}: a power of two >= 16 expected")
    if accuracy not in (0, 4):
        raise InputError(f"--accuracy {accuracy}: 0 (float activations) or 4 (int8)")
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    readers: Dict[str, int] = {}
    for n in graph.node:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    keep = set(exclude)
    report = QuantizeReport(skipped={})
    new_nodes, dropped = [], set()
    for n in graph.node:
        emb = _embedding(n, inits, bits, block, bf16_scales, keep, report) \
            if embeddings else None
        if emb:
            graph.initializer.extend(emb[1])
            if readers.get(n.input[0], 0) == 1:   # a tied table stays for its other readers
                dropped.add(n.input[0])
            new_nodes.append(emb[0])
            continue
        w = _weight(model, n.input[1], inits) if n.op_type == "MatMul" and not n.domain \
            else None
        why = "" if w is not None else "not a MatMul with an initializer weight"
        if w is not None and (w.dtype not in FLOATS or w.ndim != 2):
            why = f"weight {n.input[1]!r} is {w.dtype} {list(w.shape)}, not 2-D float"
        elif w is not None and readers.get(n.input[1], 0) != 1:
            why = f"weight {n.input[1]!r} is read by other nodes too"
        elif n.name in keep or (w is not None and n.input[1] in keep):
            why = "excluded"
        if why:
            if n.op_type == "MatMul":
                report.skipped[n.name or n.output[0]] = why
            new_nodes.append(n)
            continue
        k, nn = w.shape
        b, scales, zp = nbits.quantize(w.astype(np.float32), bits, block, zero_points,
                                       bf16_scales)
        scales = _scales_like(scales, w)
        base = n.input[1]
        tensors = [numpy_helper.from_array(b, base + "_Q"),
                   numpy_helper.from_array(scales.ravel(), base + "_scales")]
        if zp is not None:
            tensors.append(numpy_helper.from_array(zp.ravel(), base + "_zp"))
        graph.initializer.extend(tensors)
        dropped.add(base)
        new_nodes.append(helper.make_node(
            "MatMulNBits", [n.input[0]] + [t.name for t in tensors], list(n.output),
            name=(n.name or base) + "_Q", domain="com.microsoft", K=k, N=nn, bits=bits,
            block_size=block, accuracy_level=accuracy))
        report.converted += 1
        report.bytes_before += w.nbytes
        report.bytes_after += sum(numpy_helper.to_array(t).nbytes for t in tensors)
    if not report.converted and not report.embeddings:
        raise ModelError("rvvkit quantize: no MatMul with a float 2-D initializer weight "
                         f"{'nor embedding table ' if embeddings else ''}found; nothing to "
                         "quantize")
    keep_inits = [i for i in graph.initializer if i.name not in dropped]
    del graph.initializer[:]
    graph.initializer.extend(keep_inits)
    del graph.node[:]
    graph.node.extend(new_nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model, report
