"""C lowerings of the integer kernels quantized models run on (semantics:
rvvkit/ops/quant/internal.py; the rewrites that produce them: rvvkit/passes/quant.py)."""
from __future__ import annotations

from ...errors import ModelError
from ...ir import Graph, Node
from ...ops.quant.internal import QCONV, QMATMUL
from ...ops.registry import lowering
from ..kernel import Lowered
from ..kernels.quant.qconv import conv_1d_as_2d, qconv
from ..kernels.quant.qmatmul import qmatmul


def _has(n: Node, i: int) -> bool:
    return len(n.inputs) > i and bool(n.inputs[i])


@lowering(QCONV)
def _qconv(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    xs, ws, ys = g.t(n.inputs[0]).shape, g.t(n.inputs[1]).shape, g.t(n.outputs[0]).shape
    st, pads, dil = a["strides"], a["pads"], a["dilations"]
    if len(xs) == 3:
        xs, ws, ys, st, pads, dil = conv_1d_as_2d(xs, ws, ys, st, pads, dil)
    elif len(xs) != 4:
        raise ModelError(f"{n.op} node {n.name!r}: only 1-D and 2-D quantized convolutions "
                         f"are supported, got input shape {list(xs)}")
    return qconv(xs, ws, ys, group=a["group"], strides=tuple(st), pads=tuple(pads),
                 dilations=tuple(dil), x_dtype=g.t(n.inputs[0]).dtype.name, out=a["out"],
                 x_zp=a["x_zp"], x_flip=bool(a["x_flip"]), y_zp=a["y_zp"], lo=a["lo"],
                 hi=a["hi"], paired=bool(a["paired"]), has_scale=_has(n, 3), w_zp=_has(n, 4),
                 rt_zp=_has(n, 5), zp_shift=a["zp_shift"])


@lowering(QMATMUL)
def _qmatmul(n: Node, g: Graph) -> Lowered:
    a = n.attrs
    at, bt = g.t(n.inputs[0]), g.t(n.inputs[1])
    return qmatmul(at.shape, bt.shape, g.t(n.outputs[0]).shape, a_dtype=at.dtype.name,
                   b_dtype=bt.dtype.name, out=a["out"], a_zp=a["a_zp"], y_zp=a["y_zp"],
                   lo=a["lo"], hi=a["hi"], paired=bool(a["paired"]), has_scale=_has(n, 3),
                   b_zp=_has(n, 4), b_const=bool(a["b_const"]), rt_zp=_has(n, 5),
                   zp_shift=a["zp_shift"])
