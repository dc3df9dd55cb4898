"""C lowerings of the quantized element-wise family (ops/quant/linear.py) and of max pooling on
int8/uint8 tensors. Every node input is a kernel parameter (kernel_inputs binds them all);
scales and zero points were read at inference into node.attrs["q"] and are baked in."""
from __future__ import annotations

import math
from typing import Sequence, Tuple

import numpy as np

from ...errors import ModelError
from ...ir import Graph, Node
from ...ops import REGISTRY
from ...ops.quant import linear as ql, numerics as qm
from ...ops.registry import lowering
from ..kernel import Lowered, Param
from ..kernels.conv import conv3d
from ..kernels.quant import elementwise as qk
from ..kernels.quant import pool as qp
from ..kernels.quant.island import qdq_add
from ...ops.quant.island import QDQ_ADD

MS = ql.MS


def _params(n: Node, g: Graph, roles: Sequence[str]) -> Tuple[Param, ...]:
    """A parameter per non-empty input (named by its role) and per output."""
    ins = [Param(role, dtype=g.t(name).dtype.name)
           for role, name in zip(roles, n.inputs) if name]
    outs = [Param(f"y{i}" if i else "y", const=False, dtype=g.t(o).dtype.name)
            for i, o in enumerate(n.outputs) if o]
    return tuple(ins + outs)


def _geometry(n: Node, g: Graph) -> Tuple[int, int, int]:
    """(outer, channels, inner) of a per-axis (or per-tensor: 1, 1, size) Q/DQ."""
    shape = g.t(n.inputs[0]).shape
    axis = n.attrs["q_axis"]
    if axis < 0:
        return 1, 1, math.prod(shape)
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


@lowering("QuantizeLinear")
def _quantize(n: Node, g: Graph) -> Lowered:
    outer, chans, inner = _geometry(n, g)
    return qk.quantize(outer, chans, inner, g.t(n.outputs[0]).dtype.name,
                       len(n.inputs) > 2 and bool(n.inputs[2]))


@lowering("DequantizeLinear")
def _dequantize(n: Node, g: Graph) -> Lowered:
    outer, chans, inner = _geometry(n, g)
    return qk.dequantize(outer, chans, inner, g.t(n.inputs[0]).dtype.name,
                         len(n.inputs) > 2 and bool(n.inputs[2]))


@lowering("DynamicQuantizeLinear")
def _dynamic(n: Node, g: Graph) -> Lowered:
    if len([o for o in n.outputs if o]) != 3:
        raise ModelError(f"{n.op} node {n.name!r}: all three outputs must be used")
    return qk.dynamic_quantize(g.t(n.inputs[0]).size)


@lowering(QDQ_ADD)
def _qdq_add(n: Node, g: Graph) -> Lowered:
    q = n.attrs["q"]
    operands = [(g.t(n.inputs[i]).dtype.name, float(q.get(i + 1, 0.0)), int(q.get(i + 2, 0)))
                for i in (0, 3)]
    params = _params(n, g, ("a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale",
                            "y_zp"))
    return qdq_add(math.prod(g.t(n.inputs[0]).shape), operands, g.t(n.outputs[0]).dtype.name,
                   (float(q[6]), int(q[7])), bool(n.attrs.get("relu")), params)


@lowering(MS + "QLinearAdd", MS + "QLinearMul")
def _binary(n: Node, g: Graph) -> Lowered:
    q = n.attrs["q"]
    a_shape, b_shape = g.t(n.inputs[0]).shape, g.t(n.inputs[3]).shape
    dt = g.t(n.outputs[0]).dtype.name
    if n.op.endswith("Add"):
        swap = qm.qladd_swap(a_shape, b_shape)
        args = (q[4], q[5], q[1], q[2]) if swap else (q[1], q[2], q[4], q[5])
        consts = tuple(float(v) for v in qm.qladd_consts(*args, q[6], q[7]))
        op = "add"
    else:
        swap = False
        consts = (float(qm.qlmul_ratio(q[1], q[4], q[6])), int(q[2]), int(q[5]), int(q[7]))
        op = "mul"
    params = _params(n, g, ("a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c_scale",
                            "c_zp"))
    return qk.qlinear_binary(op, [a_shape, b_shape], g.t(n.outputs[0]).shape, dt, swap, consts,
                             params, "a", "b")


_XY = ("x", "x_scale", "x_zp", "y_scale", "y_zp")


@lowering(MS + "QLinearSigmoid", MS + "QLinearLeakyRelu")
def _lut(n: Node, g: Graph) -> Lowered:
    t = g.t(n.inputs[0])
    return qk.qlut(t.size, t.dtype.name, ql.lut_of(n), _params(n, g, _XY))


@lowering(MS + "QLinearConcat")
def _concat(n: Node, g: Graph) -> Lowered:
    k = (len(n.inputs) - 2) // 3
    roles = ["y_scale", "y_zp"] + [f"{r}{j}" for j in range(k) for r in ("x", "x_scale", "x_zp")]
    data = [f"x{j}" for j in range(k)]
    shapes = [g.t(n.inputs[2 + 3 * j]).shape for j in range(k)]
    return qk.qconcat(shapes, n.attrs["axis"], n.attrs["q_dtype"].name, ql.concat_tables(n),
                      _params(n, g, roles), data)


@lowering(MS + "QLinearGlobalAveragePool")
def _gap(n: Node, g: Graph) -> Lowered:
    t, q = g.t(n.inputs[0]), n.attrs["q"]
    inner = math.prod(t.shape[2:])
    return qp.qgap(t.shape, t.dtype.name, int(q[2]), int(q[4]), float(ql.gap_scale(n, inner)),
                   _params(n, g, _XY))


@lowering(MS + "QLinearAveragePool")
def _avgpool(n: Node, g: Graph) -> Lowered:
    a, t, q = n.attrs, g.t(n.inputs[0]), n.attrs["q"]
    return qp.qavgpool(t.shape, g.t(n.outputs[0]).shape, a["kernel"], a["strides"], a["pads"],
                       bool(a.get("count_include_pad", 0)), t.dtype.name,
                       ql.avgpool_table(n), float(q[3]), int(q[4]), _params(n, g, _XY))


@lowering(MS + "QLinearSoftmax")
def _softmax(n: Node, g: Graph) -> Lowered:
    t, q = g.t(n.inputs[0]), n.attrs["q"]
    outer, rows, inner = ql.softmax_geometry(n, t.shape)
    y_mult = float(math.floor(np.float32(np.float32(1.0) / np.float32(q[3]))))
    return qp.qsoftmax(outer, rows, inner, t.dtype.name, qm.softmax_table(q[1], rows), y_mult,
                       int(q[4]), _params(n, g, _XY))


_FLOAT_MAXPOOL = REGISTRY["MaxPool"].lower


@lowering("MaxPool")
def _maxpool(n: Node, g: Graph) -> Lowered:
    """Float max pooling is core.py's; int8/uint8 the typed kernel (1-D and 2-D)."""
    dt = g.t(n.inputs[0]).dtype
    if dt == np.float32:
        return _FLOAT_MAXPOOL(n, g)
    a = n.attrs
    xs, ys = g.t(n.inputs[0]).shape, g.t(n.outputs[0]).shape
    k, st, pads, dil = a["kernel"], a["strides"], a["pads"], a["dilations"]
    if len(xs) == 5:
        raise ModelError(f"MaxPool node {n.name!r}: 3-D max pooling of {dt} is not supported")
    if len(xs) == 3:
        xs, ys, k, st, pads, dil, _ = conv3d.as_2d(xs, ys, k, st, pads, dil)
    return qp.maxpool_int(xs, ys, k, st, pads, dil, dt.name)
