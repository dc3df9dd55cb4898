"""Normalisations: LayerNormalization, RMSNormalization, GroupNormalization,
InstanceNormalization, LpNormalization, MeanVarianceNormalization.

Inference canonicalises: a non-negative `axis` (the first normalised axis), float `epsilon`,
GroupNormalization's `num_groups` and `per_channel` (opset 21 scales per channel, opset 18 per
group), MeanVarianceNormalization's sorted `axes`."""
from __future__ import annotations

import math

import numpy as np

from .registry import F32, bad, in_shape, norm_axis, opt_input, register


def _float_only(node, g):
    for name in node.inputs:
        if name and g.t(name).dtype != F32:
            raise bad(node, f"tensor {name!r} has dtype {g.t(name).dtype}; float32 only")


def _standardise(x, axes, eps):
    x = x.astype(np.float64)
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps), m, 1.0 / np.sqrt(v + eps)


# LayerNormalization / RMSNormalization: over axes [axis, rank), scale (and bias) broadcast
# to x.shape[axis:]


def _layer_eval(node, xs):
    x, a = xs[0], node.attrs
    axes = tuple(range(a["axis"], x.ndim))
    if node.op == "RMSNormalization":
        xd = x.astype(np.float64)
        y = xd / np.sqrt((xd * xd).mean(axis=axes, keepdims=True) + a["epsilon"]) * xs[1]
        return [y.astype(np.float32)]
    y, m, inv = _standardise(x, axes, a["epsilon"])
    y = y * xs[1]
    if len(xs) > 2 and xs[2] is not None:
        y = y + xs[2]
    return [y.astype(np.float32), m.astype(np.float32), inv.astype(np.float32)
            ][:len(node.outputs)]


def _layer(node, g):
    _float_only(node, g)
    x = in_shape(node, g, 0)
    a = node.attrs
    a["axis"] = norm_axis(node, int(a.get("axis", -1)), len(x))
    a["epsilon"] = float(a.get("epsilon", 1e-5))
    norm = x[a["axis"]:]
    for i in (1, 2):
        name = opt_input(node, i)
        if name:
            s = g.t(name).shape
            if len(s) > len(norm) or any(d not in (1, n) for d, n in zip(s[::-1], norm[::-1])):
                raise bad(node, f"input {i} of shape {list(s)} does not broadcast to the "
                                f"normalised shape {list(norm)}")
    stats = x[:a["axis"]] + (1,) * len(norm)
    return [(x, F32), (stats, F32), (stats, F32)][:max(1, len(node.outputs))]


register("LayerNormalization", _layer_eval)(_layer)
register("RMSNormalization", _layer_eval)(_layer)


# GroupNormalization / InstanceNormalization: NC..., statistics per (n, group)


def _group_eval(node, xs):
    x, a = xs[0], node.attrs
    n, c, gr = x.shape[0], x.shape[1], a["num_groups"]
    y, _, _ = _standardise(x.reshape(n, gr, -1), (2,), a["epsilon"])
    y = y.reshape(x.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    scale, bias = xs[1], xs[2]
    if not a["per_channel"]:
        scale, bias = np.repeat(scale, c // gr), np.repeat(bias, c // gr)
    y = y * scale.reshape(bshape) + bias.reshape(bshape)
    return [y.astype(np.float32)]


def _group(node, g):
    _float_only(node, g)
    x = in_shape(node, g, 0)
    a = node.attrs
    if len(x) < 3:
        raise bad(node, f"input rank {len(x)}: needs (N, C, D1, ...)")
    c = x[1]
    if node.op == "InstanceNormalization":
        a["num_groups"], a["per_channel"] = c, 1
    else:
        if "num_groups" not in a:
            raise bad(node, "num_groups attribute missing")
        a["num_groups"] = int(a["num_groups"])
        a.setdefault("per_channel", int(g.opset == 0 or g.opset >= 21))
    gr = a["num_groups"]
    if gr <= 0 or c % gr:
        raise bad(node, f"{c} channels do not split into {gr} groups")
    a["epsilon"] = float(a.get("epsilon", 1e-5))
    want = c if a["per_channel"] else gr
    for i in (1, 2):
        if len(node.inputs) <= i or not node.inputs[i] or g.t(node.inputs[i]).size != want:
            raise bad(node, f"input {i} must hold {want} values "
                            f"({'per channel' if a['per_channel'] else 'per group'})")
    return [(x, F32)]


register("GroupNormalization", _group_eval)(_group)
register("InstanceNormalization", _group_eval)(_group)


# LpNormalization: x / ||x||_p along one axis; a line whose norm is 0 stays 0 (ONNX's reference
# and onnxruntime), not 0/0


def _lp_eval(node, xs):
    x, a = xs[0].astype(np.float64), node.attrs
    if a["p"] == 1:
        nrm = np.abs(x).sum(axis=a["axis"], keepdims=True)
    else:
        nrm = np.sqrt((x * x).sum(axis=a["axis"], keepdims=True))
    return [(x / np.where(nrm == 0, np.inf, nrm)).astype(np.float32)]


@register("LpNormalization", _lp_eval)
def _lp(node, g):
    _float_only(node, g)
    x = in_shape(node, g, 0)
    a = node.attrs
    a["axis"] = norm_axis(node, int(a.get("axis", -1)), len(x))
    a["p"] = int(a.get("p", 2))
    if a["p"] not in (1, 2):
        raise bad(node, f"p={a['p']}: only 1 and 2 are defined")
    return [(x, F32)]


# MeanVarianceNormalization: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over `axes`

MVN_EPS = 1e-9


def _mvn_eval(node, xs):
    x, axes = xs[0].astype(np.float64), node.attrs["axes"]
    m = x.mean(axis=axes, keepdims=True)
    v = (x * x).mean(axis=axes, keepdims=True) - m * m
    return [((x - m) / (np.sqrt(np.maximum(v, 0)) + MVN_EPS)).astype(np.float32)]


@register("MeanVarianceNormalization", _mvn_eval)
def _mvn(node, g):
    _float_only(node, g)
    x = in_shape(node, g, 0)
    axes = node.attrs.get("axes", (0, 2, 3))
    node.attrs["axes"] = tuple(sorted({norm_axis(node, int(d), len(x)) for d in axes}))
    if not node.attrs["axes"] or math.prod(x) == 0:
        raise bad(node, "needs at least one axis and a non-empty input")
    return [(x, F32)]
