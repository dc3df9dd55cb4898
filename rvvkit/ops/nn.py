"""Convolution, dense layers, pooling and normalisation: shape rules with canonical attributes
(pads always (top, left, bottom, right), auto_pad resolved) so lowerings never re-derive them."""
from __future__ import annotations

import math

import numpy as np

from .registry import F32, bad, broadcast_shapes, in_shape, norm_axis, opt_input, register


def _spatial(node, x_shape, kernel):
    """Resolve strides, dilations and pads (incl. auto_pad, ceil_mode) for a window op of any
    spatial rank (1-D, 2-D, 3-D); pads are canonical ONNX (begins..., ends...)."""
    a = node.attrs
    nd = len(x_shape) - 2
    if nd < 1 or nd > 3:
        raise bad(node, f"only 1-D, 2-D and 3-D spatial inputs (rank 3..5) are supported, "
                        f"got shape {list(x_shape)}")
    strides = tuple(a.get("strides", (1,) * nd))
    dil = tuple(a.get("dilations", (1,) * nd))
    pads = tuple(a.get("pads", (0,) * (2 * nd)))
    if len(kernel) != nd or len(strides) != nd or len(dil) != nd or len(pads) != 2 * nd:
        raise bad(node, f"kernel_shape/strides/dilations/pads do not describe a {nd}-D window")
    auto = a.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    ceil_mode = bool(a.get("ceil_mode", 0))
    out, begin, end = [], [], []
    for d in range(nd):
        size, k, s, dl = x_shape[2 + d], kernel[d], strides[d], dil[d]
        span = (k - 1) * dl + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + span - size)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pb, pe = lo, total - lo
        elif auto == "VALID":
            pb = pe = 0
            o = (size - span) // s + 1
        else:
            pb, pe = pads[d], pads[d + nd]
            num = size + pb + pe - span
            o = (-(-num // s) if ceil_mode else num // s) + 1
            if ceil_mode and (o - 1) * s >= size + pb:
                o -= 1  # the last window must start inside the (left-padded) input
        if o < 1:
            raise bad(node, f"window {k} (dilation {dl}) larger than padded input {size}")
        out.append(o)
        begin.append(pb)
        end.append(pe)
    a["strides"], a["dilations"] = strides, dil
    a["pads"] = tuple(begin) + tuple(end)
    a["kernel"] = tuple(kernel)
    a["auto_pad"] = "NOTSET"
    return tuple(out)


def conv_f64(node, x, w) -> np.ndarray:
    """numpy Conv of any spatial rank in float64 (canonical attrs in node.attrs): per kernel
    tap, the strided window of the padded input times that tap's weights, per group."""
    a = node.attrs
    nd, group = x.ndim - 2, a["group"]
    pads, st, dil = a["pads"], a["strides"], a["dilations"]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[d], pads[nd + d]) for d in range(nd)])
    out = [(xp.shape[2 + d] - (w.shape[2 + d] - 1) * dil[d] - 1) // st[d] + 1 for d in range(nd)]
    cg, mg = x.shape[1] // group, w.shape[0] // group
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for tap in np.ndindex(*w.shape[2:]):
        win = xp[(slice(None), slice(None)) + tuple(
            slice(t * dil[d], t * dil[d] + (out[d] - 1) * st[d] + 1, st[d])
            for d, t in enumerate(tap))]
        for gi in range(group):
            wt = w[(slice(gi * mg, (gi + 1) * mg), slice(None)) + tap]
            y[:, gi * mg:(gi + 1) * mg] += np.einsum("nc...,mc->nm...",
                                                     win[:, gi * cg:(gi + 1) * cg], wt)
    return y


def _conv_eval(node, xs):
    """Conv of constant inputs (folding)."""
    y = conv_f64(node, np.asarray(xs[0], np.float64), np.asarray(xs[1], np.float64))
    if len(xs) > 2 and xs[2] is not None:
        y += np.asarray(xs[2], np.float64).reshape((1, -1) + (1,) * (y.ndim - 2))
    return [y.astype(np.float32)]


@register("Conv", _conv_eval, act_epilogue=True)
def _conv(node, g):
    x, w = in_shape(node, g, 0), in_shape(node, g, 1)
    group = int(node.attrs.get("group", 1))
    if len(w) not in (3, 4, 5) or len(x) != len(w):
        raise bad(node, f"input {list(x)} and weight {list(w)}: 1-D, 2-D or 3-D convolution "
                        "expected (ranks 3..5, equal)")
    kernel = tuple(node.attrs.get("kernel_shape", w[2:]))
    if tuple(kernel) != tuple(w[2:]):
        raise bad(node, f"kernel_shape {kernel} disagrees with weight shape {w}")
    if x[1] != w[1] * group or w[0] % group:
        raise bad(node, f"channels: input {x[1]}, weight {w}, group {group} are inconsistent")
    b = opt_input(node, 2)
    if b and g.t(b).size != w[0]:
        raise bad(node, f"bias has {g.t(b).size} elements, expected {w[0]}")
    out = _spatial(node, x, kernel)
    node.attrs["group"] = group
    return [((x[0], w[0]) + out, F32)]


def _pool(node, g):
    x = in_shape(node, g, 0)
    if node.attrs.get("storage_order", 0):
        raise bad(node, "storage_order=1 is not supported")
    if len([o for o in node.outputs if o]) > 1:
        raise bad(node, "the Indices output of MaxPool is not supported")
    out = _spatial(node, x, tuple(node.attrs["kernel_shape"]))
    # max pooling compares, so it runs on the quantized integers as well (QOperator models)
    dtype = g.t(node.inputs[0]).dtype if node.op == "MaxPool" else F32
    return [((x[0], x[1]) + out, dtype)]


register("MaxPool", dtypes=("float32", "int8", "uint8"))(_pool)
register("AveragePool")(_pool)


def _global_pool(node, g):
    x = in_shape(node, g, 0)
    if len(x) < 3:
        raise bad(node, f"input rank {len(x)} < 3")
    return [(x[:2] + (1,) * (len(x) - 2), F32)]


register("GlobalAveragePool", lambda n, xs: [xs[0].mean(axis=tuple(range(2, xs[0].ndim)),
                                                        keepdims=True)])(_global_pool)
register("GlobalMaxPool", lambda n, xs: [xs[0].max(axis=tuple(range(2, xs[0].ndim)),
                                                   keepdims=True)])(_global_pool)


@register("LRN")
def _lrn(node, g):
    x = in_shape(node, g, 0)
    if len(x) < 3:
        raise bad(node, f"input rank {len(x)} < 3")
    if "size" not in node.attrs:
        raise bad(node, "missing required attribute 'size'")
    return [(x, F32)]


def softmax_axis(node):
    """(axis, coerce): the normalised axis, and whether the input is flattened to 2-D there
    (Softmax before opset 13) rather than normalised along that one axis. Set by inference."""
    return node.attrs["axis"], node.attrs["coerce"]


def _softmax_eval(node, xs):
    x = xs[0]
    axis, coerce = softmax_axis(node)
    axes = tuple(range(axis, x.ndim)) if coerce else (axis,)
    e = np.exp(x - x.max(axis=axes, keepdims=True))
    y = e / e.sum(axis=axes, keepdims=True)
    if node.op == "LogSoftmax":
        y = np.log(y)
    return [y.astype(x.dtype)]


@register("Softmax", _softmax_eval)
def _softmax(node, g):
    x = in_shape(node, g, 0)
    if "coerce" not in node.attrs:  # canonical already (inference may run again)
        coerce = 0 < g.opset < 13    # opset 0: a graph built without a model, newest rules
        axis = node.attrs.get("axis", 1 if coerce else -1)
        node.attrs["axis"], node.attrs["coerce"] = norm_axis(node, axis, len(x)), coerce
    return [(x, F32)]


register("LogSoftmax", _softmax_eval)(_softmax)


def _gemm_eval(node, xs):
    a, b = xs[0], xs[1]
    at = node.attrs
    a = a.T if at.get("transA", 0) else a
    b = b.T if at.get("transB", 0) else b
    y = at.get("alpha", 1.0) * (a @ b)
    if len(xs) > 2 and xs[2] is not None:
        y = y + at.get("beta", 1.0) * xs[2]
    return [y.astype(np.float32)]


@register("Gemm", _gemm_eval, act_epilogue=True)
def _gemm(node, g):
    a, b = in_shape(node, g, 0), in_shape(node, g, 1)
    if len(a) != 2 or len(b) != 2:
        raise bad(node, f"inputs must be 2-D, got {list(a)} and {list(b)}")
    m, k = (a[1], a[0]) if node.attrs.get("transA", 0) else a
    k2, n = (b[1], b[0]) if node.attrs.get("transB", 0) else b
    if k != k2:
        raise bad(node, f"inner dimensions differ: {list(a)} x {list(b)} "
                        f"(transA={node.attrs.get('transA', 0)}, "
                        f"transB={node.attrs.get('transB', 0)})")
    c = opt_input(node, 2)
    if c:
        if broadcast_shapes(node, [in_shape(node, g, 2), (m, n)]) != (m, n):
            raise bad(node, f"C of shape {list(in_shape(node, g, 2))} does not broadcast to "
                            f"{[m, n]}")
    return [((m, n), F32)]


@register("MatMul", lambda node, xs: [np.matmul(xs[0], xs[1])])
def _matmul(node, g):
    a, b = in_shape(node, g, 0), in_shape(node, g, 1)
    if not a or not b:
        raise bad(node, "scalar operands are not valid for MatMul")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise bad(node, f"inner dimensions differ: {list(a)} x {list(b)}")
    batch = broadcast_shapes(node, [a2[:-2], b2[:-2]])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [(tuple(out), F32)]


def conv_macs(x, w, y):
    return int(math.prod(y) * math.prod(w[1:]))


def _conv_transpose_eval(node, xs):
    """numpy ConvTranspose (folding of constant inputs): per kernel tap, the input times that
    tap's weights added at stride `strides` into an uncropped buffer, then the crop."""
    x, w = np.asarray(xs[0], np.float64), np.asarray(xs[1], np.float64)
    a = node.attrs
    nd, group = x.ndim - 2, a["group"]
    st, dil, pads, out = a["strides"], a["dilations"], a["pads"], a["out_spatial"]
    full = [max((x.shape[2 + d] - 1) * st[d] + (w.shape[2 + d] - 1) * dil[d] + 1,
                pads[d] + out[d]) for d in range(nd)]
    cg, mg = x.shape[1] // group, w.shape[1]
    buf = np.zeros((x.shape[0], mg * group, *full))
    for tap in np.ndindex(*w.shape[2:]):
        at = tuple(slice(t * dil[d], t * dil[d] + (x.shape[2 + d] - 1) * st[d] + 1, st[d])
                   for d, t in enumerate(tap))
        for gi in range(group):
            part = np.einsum("nc...,cm->nm...", x[:, gi * cg:(gi + 1) * cg],
                             w[(slice(gi * cg, (gi + 1) * cg), slice(None)) + tap])
            buf[(slice(None), slice(gi * mg, (gi + 1) * mg)) + at] += part
    y = buf[(slice(None), slice(None)) + tuple(slice(pads[d], pads[d] + out[d])
                                               for d in range(nd))]
    if len(xs) > 2 and xs[2] is not None:
        y = y + np.asarray(xs[2], np.float64).reshape((1, -1) + (1,) * nd)
    return [y.astype(np.float32)]


@register("ConvTranspose", _conv_transpose_eval)
def _conv_transpose(node, g):
    """Canonical attrs: strides, dilations, pads (begins..., ends...), output_padding, group."""
    x, w = in_shape(node, g, 0), in_shape(node, g, 1)
    a = node.attrs
    nd = len(x) - 2
    group = int(a.get("group", 1))
    if nd not in (1, 2, 3) or len(w) != len(x):
        raise bad(node, f"input {list(x)} and weight {list(w)}: 1-D, 2-D or 3-D expected")
    if w[0] != x[1] or x[1] % group:
        raise bad(node, f"channels: input {x[1]}, weight {list(w)}, group {group} disagree")
    kernel = tuple(a.get("kernel_shape", w[2:]))
    if kernel != tuple(w[2:]):
        raise bad(node, f"kernel_shape {kernel} disagrees with weight shape {list(w)}")
    m = w[1] * group
    b = opt_input(node, 2)
    if b and g.t(b).size != m:
        raise bad(node, f"bias has {g.t(b).size} elements, expected {m}")
    st = tuple(a.get("strides", (1,) * nd))
    dil = tuple(a.get("dilations", (1,) * nd))
    opad = tuple(a.get("output_padding", (0,) * nd))
    pads = list(a.get("pads", (0,) * (2 * nd)))
    auto = a.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if len(st) != nd or len(dil) != nd or len(opad) != nd or len(pads) != 2 * nd:
        raise bad(node, f"strides/dilations/output_padding/pads do not describe {nd}-D")
    full = [st[d] * (x[2 + d] - 1) + opad[d] + (kernel[d] - 1) * dil[d] + 1 for d in range(nd)]
    want = a.get("output_shape")
    if "out_spatial" in a:   # canonical already (inference may run again)
        return [((x[0], m) + tuple(a["out_spatial"]), F32)]
    if want is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        want = [x[2 + d] * st[d] for d in range(nd)]
    if want is not None:
        want = list(want)[-nd:]
        for d in range(nd):
            total = max(0, full[d] - want[d])   # a larger output: its tail gets the bias
            small, big = total // 2, total - total // 2
            pads[d], pads[nd + d] = (small, big) if auto == "SAME_UPPER" else (big, small)
    out = tuple(want) if want is not None else \
        tuple(full[d] - pads[d] - pads[nd + d] for d in range(nd))
    if min(out) < 1:
        raise bad(node, f"output spatial shape {list(out)} is empty")
    a.update(strides=st, dilations=dil, output_padding=opad, pads=tuple(pads), group=group,
             auto_pad="NOTSET", out_spatial=out)
    a.pop("output_shape", None)
    return [((x[0], m) + out, F32)]
