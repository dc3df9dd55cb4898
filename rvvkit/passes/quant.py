"""Quantized convolutions and matrix products to rvvkit's two integer kernels
(ops/quant/internal.py): QLinearConv and ConvInteger become rvvkit.QConv; QLinearMatMul,
MatMulInteger and com.microsoft.QGemm become rvvkit.QMatMul. The zero-point terms that depend
only on constants are folded into the int32 bias here, once, at build time.

QDQ models are first rewritten into those QOperator forms, the groups onnxruntime fuses
(passes/qdq.py), so that both formats run the same integer kernels and round alike."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..ir import Graph, Node
from ..ops.quant.products import combined_scale, qrange
from ..ops.quant.internal import QCONV, QMATMUL
from .qdq import fold_qdq


def _shifted(q: np.ndarray):
    """int8 view of a quantized constant and the shift applied (uint8: -128)."""
    q = np.asarray(q)
    if q.dtype == np.uint8:
        return (q.astype(np.int16) - 128).astype(np.int8), 128
    return q.astype(np.int8), 0


def _scalar(v, default=0) -> int:
    return default if v is None else int(np.asarray(v).reshape(-1)[0])


def _per(v, n: int, dtype) -> np.ndarray:
    v = np.asarray(0 if v is None else v).reshape(-1)
    return np.broadcast_to(v, (n,)).astype(dtype)


def _const(g: Graph, node: Node, i: int) -> Optional[np.ndarray]:
    name = node.inputs[i] if len(node.inputs) > i else ""
    return g.const(name) if name else None


def _add(g: Graph, node: Node, what: str, data: np.ndarray) -> str:
    return g.add_const(g.fresh_name(f"{node.name}/{what}"), np.ascontiguousarray(data)).name


def make_qconv(g: Graph, node: Node, x: str, xz, w_q, wz, bias, scale, out: str,
               yz: int = 0) -> None:
    """Turn `node` (its attrs are Conv's, canonical) into rvvkit.QConv reading `x`."""
    m = w_q.shape[0]
    k = int(np.prod(w_q.shape[1:]))
    w8, wshift = _shifted(w_q)
    xdt = g.t(x).dtype
    shift = 128 if xdt == np.uint8 else 0
    rt_zp = isinstance(xz, str)     # a run-time zero point (DynamicQuantizeLinear's)
    xzs = 0 if rt_zp else _scalar(xz) - shift
    wzs = _per(wz, m, np.int64) - wshift
    rows = w8.reshape(m, -1).astype(np.int64).sum(axis=1)
    b = _per(bias, m, np.int64) - xzs * rows + k * xzs * wzs
    inputs = [x, _add(g, node, "w_int8", w8), _add(g, node, "bias_int32", b.astype(np.int32))]
    inputs.append(_add(g, node, "scale", _per(scale, m, np.float32)) if scale is not None
                  else "")
    inputs.append(_add(g, node, "w_zp", wzs.astype(np.int32)) if np.any(wzs) else "")
    if rt_zp:   # the zero-point terms then need rowsum(w') and sum(w_zp') * K at run time
        inputs += [xz, _add(g, node, "w_rows", (rows - k * wzs).astype(np.int32))]
    out_shape = g.t(node.outputs[0]).shape
    lo, hi = qrange(out) if out in ("int8", "uint8") else (0, 0)
    if node.attrs.pop("relu", 0):   # a Relu folded in by passes/qdq.py: real 0 is y_zp
        lo = max(lo, int(yz))
    node.attrs.update(out=out, y_zp=int(yz), lo=lo, hi=hi, x_zp=xzs,
                      x_flip=int(xdt == np.uint8), out_spatial=tuple(out_shape[2:]),
                      paired=int(np.all(w8 != -128)), zp_shift=shift)
    node.op, node.inputs = QCONV, inputs
    g.t(node.outputs[0]).dtype = np.dtype(out)


def make_qmatmul(g: Graph, node: Node, a: str, az, b: str, bz, bias, scale, out: str,
                 yz: int = 0, b_q: Optional[np.ndarray] = None) -> None:
    """Turn `node` into rvvkit.QMatMul of run-time `a` and `b` (a constant when b_q given,
    [K, N] already transposed as needed)."""
    adt = g.t(a).dtype
    shift = 128 if adt == np.uint8 else 0
    rt_zp = isinstance(az, str)     # a run-time zero point (DynamicQuantizeLinear's)
    azs = 0 if rt_zp else _scalar(az) - shift
    if b_q is not None and b_q.ndim > 2:   # batched constant: read like a run-time operand
        b_q = None
    if b_q is not None:
        kdim, n = b_q.shape[-2], b_q.shape[-1]
        b8, bshift = _shifted(b_q)
        bzs = _per(bz, n, np.int64) - bshift
        cols = b8.astype(np.int64).sum(axis=-2)   # [..., N]
        bsum = (_per(bias, n, np.int64) - azs * cols + kdim * azs * bzs)
        b_name = _add(g, node, "b_int8", b8)
        flip_b, paired = 0, int(np.all(b8 != -128))
    else:
        t = g.t(b)
        kdim, n = t.shape[-2], t.shape[-1]
        bshift = 128 if t.dtype == np.uint8 else 0   # b's own shift; zp_shift stays a's
        bzs = _per(bz, n, np.int64) - bshift
        bsum = _per(bias, n, np.int64) + kdim * azs * bzs
        b_name, flip_b, paired = b, int(bshift != 0), 0
    inputs = [a, b_name, _add(g, node, "bias_int32", bsum.astype(np.int32))]
    inputs.append(_add(g, node, "scale", _per(scale, n, np.float32)) if scale is not None
                  else "")
    inputs.append(_add(g, node, "b_zp", bzs.astype(np.int32)) if np.any(bzs) else "")
    if rt_zp:
        if b_q is None:
            raise ValueError("internal: a run-time zero point with a run-time B")
        inputs += [az, _add(g, node, "b_cols", (cols - kdim * bzs).astype(np.int32))]
    lo, hi = qrange(out) if out in ("int8", "uint8") else (0, 0)
    node.attrs = dict(zp_shift=shift, out=out, y_zp=int(yz), lo=lo, hi=hi, a_zp=azs,
                      a_flip=int(adt == np.uint8), b_flip=flip_b, b_const=int(b_q is not None),
                      paired=paired, k=int(kdim))
    node.op, node.inputs = QMATMUL, inputs
    g.t(node.outputs[0]).dtype = np.dtype(out)


def _qlinearconv(g: Graph, n: Node) -> None:
    c = lambda i: _const(g, n, i)   # noqa: E731
    scale = combined_scale(c(1), c(4), c(6))
    out = g.t(n.inputs[7]).dtype.name
    make_qconv(g, n, n.inputs[0], c(2), c(3), c(5), c(8) if len(n.inputs) > 8 else None,
               scale, out, _scalar(c(7)))


def _zp(g: Graph, n: Node, i: int):
    """A zero point: its value when constant, its name when computed at run time."""
    name = n.inputs[i] if len(n.inputs) > i else ""
    return name if name and not g.is_const(name) else _const(g, n, i)


def _convinteger(g: Graph, n: Node) -> None:
    c = lambda i: _const(g, n, i)   # noqa: E731
    make_qconv(g, n, n.inputs[0], _zp(g, n, 2), c(1), c(3), None, None, "int32")


def _const_b(g: Graph, name: str) -> Optional[np.ndarray]:
    return g.const(name) if g.is_const(name) else None


def _qlinearmatmul(g: Graph, n: Node) -> None:
    c = lambda i: _const(g, n, i)   # noqa: E731
    scale = combined_scale(c(1), c(4), c(6))
    make_qmatmul(g, n, n.inputs[0], c(2), n.inputs[3], c(5), None, scale,
                 g.t(n.inputs[7]).dtype.name, _scalar(c(7)), _const_b(g, n.inputs[3]))


def _matmulinteger(g: Graph, n: Node) -> None:
    c = lambda i: _const(g, n, i)   # noqa: E731
    make_qmatmul(g, n, n.inputs[0], _zp(g, n, 2), n.inputs[1], c(3), None, None, "int32",
                 b_q=_const_b(g, n.inputs[1]))


def _qgemm(g: Graph, n: Node) -> None:
    c = lambda i: _const(g, n, i)   # noqa: E731
    b_q = _const_b(g, n.inputs[3])
    if b_q is not None and n.attrs.get("transB", 0):
        b_q = np.ascontiguousarray(b_q.T)
    alpha = np.float32(n.attrs.get("alpha", 1.0))
    s = alpha * np.float32(np.asarray(c(1), np.float32).reshape(-1)[0]) * \
        np.asarray(c(4), np.float32).reshape(-1)
    bias = c(6) if len(n.inputs) > 6 and n.inputs[6] else None
    if len(n.inputs) > 7 and n.inputs[7]:
        s = s / np.float32(np.asarray(c(7), np.float32).reshape(-1)[0])
        out = g.t(n.outputs[0]).dtype.name
        yz = _scalar(c(8)) if len(n.inputs) > 8 and n.inputs[8] else 0
    else:
        out, yz = "float32", 0
    make_qmatmul(g, n, n.inputs[0], c(2), n.inputs[3], c(5), bias, s, out, yz, b_q)


REWRITES = {"QLinearConv": _qlinearconv, "ConvInteger": _convinteger,
            "QLinearMatMul": _qlinearmatmul, "MatMulInteger": _matmulinteger,
            "com.microsoft.QGemm": _qgemm}


def lower_quantized(g: Graph) -> None:
    fold_qdq(g)
    for n in list(g.nodes):
        fn = REWRITES.get(n.op)
        if fn is not None:
            fn(g, n)
