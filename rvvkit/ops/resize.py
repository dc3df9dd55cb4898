"""Resize (opsets 10-19) and Upsample (7, 9): nearest, linear and cubic interpolation.

The output shape, the scales and every axis's taps are fixed at build time, so `axis_taps`
computes per axis the input indices each output coordinate reads and their weights (in
float32, as onnxruntime does); the kernels (codegen/kernels/movement/resize.py, its CUDA form) store
these tables and are then a gather and a weighted sum. Folding applies the same tables."""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

from .registry import ANY, bad, const_input, in_shape, register

F = np.float32
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nearest", "tf_crop_and_resize")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _source(coord: str, x: np.ndarray, scale, n_in: int, n_out: int, roi=(0.0, 1.0)
            ) -> np.ndarray:
    """Input coordinate (float32) of output coordinates x along one axis."""
    s = F(scale)
    if coord == "tf_crop_and_resize":
        start, end = F(roi[0]), F(roi[1])
        if n_out == 1:
            return np.full_like(x, F(0.5) * (start + end) * F(n_in - 1))
        return start * F(n_in - 1) + x * (end - start) * F(n_in - 1) / F(n_out - 1)
    if coord == "half_pixel":
        return (x + F(0.5)) / s - F(0.5)
    if coord == "half_pixel_symmetric":
        adj = F(n_out) / (s * F(n_in))
        offset = F(n_in) / F(2) * (F(1) - adj)
        return offset + (x + F(0.5)) / s - F(0.5)
    if coord == "pytorch_half_pixel":
        return (x + F(0.5)) / s - F(0.5) if n_out > 1 else np.zeros_like(x)
    if coord == "align_corners":
        return x * F(n_in - 1) / F(n_out - 1) if n_out > 1 else np.zeros_like(x)
    if coord == "asymmetric":
        return x / s
    return (x + F(0.5)) / s   # tf_half_pixel_for_nearest


def _nearest(mode: str, v: np.ndarray, scale) -> np.ndarray:
    fl = np.floor(v)
    if mode == "round_prefer_floor":
        return np.where(v - fl == F(0.5), fl, np.floor(v + F(0.5)))
    if mode == "round_prefer_ceil":
        return np.floor(v + F(0.5))
    if mode == "floor":
        return fl
    if mode == "ceil":
        return np.ceil(v)
    return np.ceil(v) if scale < 1 else fl   # "simple" (opset < 11): as onnxruntime


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    a = F(a)
    d = np.stack([t + 1, t, 1 - t, 2 - t], axis=1).astype(F)
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    return np.where(np.abs(d) <= 1, near, far).astype(F)


def axis_taps(rz: dict, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """(indices int64 [out, taps], weights float32 [out, taps]) of axis k; taps collapse to
    one when every output reads a single input (identity axes, nearest)."""
    n_in, n_out, scale = rz["in_shape"][k], rz["out_shape"][k], rz["scales"][k]
    x = _source(rz["coord"], np.arange(n_out, dtype=F), scale, n_in, n_out, rz["roi"][k])
    if rz["mode"] == "nearest":
        idx = _nearest(rz["nearest"], x, scale).astype(np.int64)[:, None]
        return np.clip(idx, 0, n_in - 1), np.ones((n_out, 1), F)
    fl = np.floor(x)
    t = (x - fl).astype(F)
    base = fl.astype(np.int64)
    if rz["mode"] == "linear":
        raw = np.stack([base, base + 1], axis=1)
        w = np.stack([1 - t, t], axis=1).astype(F)
    else:
        raw = np.stack([base - 1, base, base + 1, base + 2], axis=1)
        w = _cubic(t, rz["cubic_a"])
        if rz["exclude_outside"]:
            w = np.where((raw < 0) | (raw >= n_in), F(0), w)
            w = (w / w.sum(axis=1, keepdims=True)).astype(F)
    idx = np.clip(raw, 0, n_in - 1)
    if np.all(w[:, 1:] == 0) and np.all(w[:, 0] == 1):
        return idx[:, :1], w[:, :1]
    return idx, w


def axis_valid(rz: dict, k: int):
    """tf_crop_and_resize: bool [out] of the output coordinates inside the input (the others
    take the extrapolation value); None when all are."""
    if rz["coord"] != "tf_crop_and_resize":
        return None
    n_in, n_out = rz["in_shape"][k], rz["out_shape"][k]
    x = _source(rz["coord"], np.arange(n_out, dtype=F), rz["scales"][k], n_in, n_out,
                rz["roi"][k])
    ok = (x >= 0) & (x <= F(n_in - 1))
    return None if ok.all() else ok


def _resize_eval(node, xs):
    rz, y = node.attrs["_rz"], xs[0]
    for k in range(y.ndim):
        idx, w = axis_taps(rz, k)
        if idx.shape[1] == 1:
            y = np.take(y, idx[:, 0], axis=k)
            continue
        shape = [1] * y.ndim
        shape[k] = -1
        y = sum(np.take(y, idx[:, t], axis=k) * w[:, t].reshape(shape)
                for t in range(idx.shape[1])).astype(y.dtype)
    for k in range(y.ndim):
        ok = axis_valid(rz, k)
        if ok is not None:
            shape = [1] * y.ndim
            shape[k] = -1
            y = np.where(ok.reshape(shape), y, np.asarray(rz["extrapolation"], y.dtype))
    return [y]


def _roi(node, g, x, coord) -> List[Tuple[float, float]]:
    """(start, end) per axis, as fractions of the input: tf_crop_and_resize's roi input."""
    r = len(x)
    out = [(0.0, 1.0)] * r
    if coord != "tf_crop_and_resize":
        return out
    roi = const_input(node, g, 1, "roi")
    if roi is None:
        raise bad(node, "tf_crop_and_resize needs roi")
    axes = [int(v) % r for v in node.attrs.get("axes", range(r))]
    roi = [float(v) for v in roi.reshape(-1)]
    if len(roi) != 2 * len(axes):
        raise bad(node, f"roi of {len(roi)} values for {len(axes)} axes")
    for j, ax in enumerate(axes):
        out[ax] = (roi[j], roi[len(axes) + j])
    return out


def _scaled(x, scales, roi) -> List[int]:
    return [int(math.floor(F(d) * (F(e) - F(b)) * F(s))) for d, s, (b, e) in zip(x, scales, roi)]


def _scales_sizes(node, g, x, roi) -> Tuple[List[float], List[int]]:
    a, r = node.attrs, len(x)
    if node.op == "Upsample" and g.opset < 9:
        scales = [float(s) for s in a["scales"]]
        return scales, [int(math.floor(d * F(s))) for d, s in zip(x, scales)]
    if node.op == "Upsample" or g.opset < 11:
        scales = [float(s) for s in const_input(node, g, 1, "scales").reshape(-1)]
        return scales, [int(math.floor(d * F(s))) for d, s in zip(x, scales)]
    sc, sz = const_input(node, g, 2, "scales"), const_input(node, g, 3, "sizes")
    axes = [int(v) % r for v in a.get("axes", range(r))]
    if sz is not None and sz.size:
        want = [int(v) for v in sz.reshape(-1)]
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            sizes, scales = list(x), [1.0] * r
            for ax, n in zip(axes, want):
                sizes[ax], scales[ax] = n, float(F(n) / F(x[ax]))
            return scales, sizes
        ratios = [F(n) / F(x[ax]) for ax, n in zip(axes, want)]
        s = min(ratios) if policy == "not_larger" else max(ratios)
        sizes, scales = list(x), [1.0] * r
        for ax in axes:
            sizes[ax], scales[ax] = int(math.floor(F(x[ax]) * s + F(0.5))), float(s)
        return scales, sizes
    if sc is None or not sc.size:
        raise bad(node, "needs scales or sizes")
    scales = [1.0] * r
    for ax, s in zip(axes, sc.reshape(-1)):
        scales[ax] = float(s)
    return scales, _scaled(x, scales, roi)


@register("Resize", _resize_eval, dtypes=ANY)
def _resize(node, g):
    x = in_shape(node, g, 0)
    a = node.attrs
    old = node.op == "Upsample" or g.opset < 11
    mode = a.get("mode", "nearest")
    coord = "asymmetric" if old else a.get("coordinate_transformation_mode", "half_pixel")
    nearest = "simple" if old else a.get("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear", "cubic") or coord not in COORD_MODES \
            or nearest not in NEAREST:
        raise bad(node, f"mode {mode!r} / coordinate mode {coord!r} / nearest mode "
                        f"{nearest!r} is not supported")
    if a.get("antialias", 0):
        raise bad(node, "antialias is not supported")
    dt = g.t(node.inputs[0]).dtype
    if mode != "nearest" and dt != np.float32:
        raise bad(node, f"{mode} interpolation of {dt} data")
    roi = _roi(node, g, x, coord)
    scales, sizes = _scales_sizes(node, g, x, roi)
    if len(sizes) != len(x) or min(sizes, default=1) < 1:
        raise bad(node, f"output shape {sizes} for input {list(x)}")
    a["_rz"] = {"in_shape": tuple(x), "out_shape": tuple(sizes), "mode": mode, "coord": coord,
                "nearest": nearest, "cubic_a": float(a.get("cubic_coeff_a", -0.75)),
                "exclude_outside": int(a.get("exclude_outside", 0)), "scales": tuple(scales),
                "roi": tuple(roi), "extrapolation": float(a.get("extrapolation_value", 0.0))}
    return [(tuple(sizes), dt)]


register("Upsample", _resize_eval, dtypes=ANY)(_resize)
