"""Resize/Upsample kernel: a gather with per-axis tables computed at build time
(rvvkit.ops.resize.axis_taps). Axis k reads taps[k] input positions per output coordinate,
stored as element offsets (index * stride) with their weights; an identity axis needs no
table, a nearest axis one tap, linear two, cubic four. The output element is the weighted sum
over the taps of every axis (for nearest: the single element, any dtype, moved exactly)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from ....ops.resize import axis_taps, axis_valid
from ...cfmt import flt, ilist, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import strides_of
from .strided import literal

RZ_KEYS = ("in_shape", "out_shape", "mode", "coord", "nearest", "cubic_a", "exclude_outside",
           "scales", "roi", "extrapolation")
declare_spec("resize", RZ_KEYS)


@dataclass
class AxisTable:
    n_out: int
    taps: int
    offsets: Optional[np.ndarray]   # [n_out * taps] element offsets; None: identity axis
    weights: Optional[np.ndarray]   # [n_out * taps]; None when taps == 1
    stride: int
    valid: Optional[np.ndarray] = None   # tf_crop_and_resize: outputs inside the input


def tables(rz: dict) -> List[AxisTable]:
    out = []
    for k, st in enumerate(strides_of(rz["in_shape"])):
        idx, w = axis_taps(rz, k)
        n_out, taps = idx.shape
        ident = taps == 1 and n_out == rz["in_shape"][k] and np.array_equal(idx[:, 0],
                                                                           np.arange(n_out))
        out.append(AxisTable(n_out, taps, None if ident else (idx * st).reshape(-1),
                             None if taps == 1 else w.reshape(-1), st, axis_valid(rz, k)))
    return out


def table_decls(tabs: List[AxisTable], prefix: str, qual: str) -> List[str]:
    """C definitions of the tables (`qual`: "static const" in C, plus __device__ in CUDA)."""
    lines = []
    for k, t in enumerate(tabs):
        if t.offsets is not None:
            lines.append(f"{qual} int32_t {prefix}o{k}[{t.offsets.size}] = "
                         f"{{{ilist(t.offsets)}}};")
        if t.weights is not None:
            lines.append(f"{qual} float {prefix}w{k}[{t.weights.size}] = "
                         f"{{{', '.join(flt(v) for v in t.weights)}}};")
        if t.valid is not None:
            lines.append(f"{qual} uint8_t {prefix}v{k}[{t.valid.size}] = "
                         f"{{{ilist(t.valid)}}};")
    return lines


def extrapolated(tabs: List[AxisTable], prefix: str, coord, expr: str, value: str) -> str:
    """`expr`, or `value` where an axis's coordinate lies outside the input."""
    checks = [f"{prefix}v{k}[{coord(k)}]" for k, t in enumerate(tabs) if t.valid is not None]
    return f"({' && '.join(checks)}) ? ({expr}) : {value}" if checks else expr


def value_expr(tabs: List[AxisTable], prefix: str, coord, base: str, x: str) -> str:
    """C: the output value at coordinates coord(k) (C expressions), `base` the offset that
    single-tap axes add up to (computed by the caller; see `single_terms`)."""
    multi = [k for k, t in enumerate(tabs) if t.taps > 1]
    if not multi:
        return f"{x}[{base}]"
    terms = []
    for combo in itertools.product(*(range(tabs[k].taps) for k in multi)):
        w = " * ".join(f"{prefix}w{k}[{coord(k)} * {tabs[k].taps} + {j}]"
                       for k, j in zip(multi, combo))
        off = " + ".join(f"{prefix}o{k}[{coord(k)} * {tabs[k].taps} + {j}]"
                         for k, j in zip(multi, combo))
        terms.append(f"{w} * {x}[{base} + {off}]")
    return " +\n    ".join(terms)


def single_term(t: AxisTable, prefix: str, k: int, c: str) -> str:
    """C: the offset a single-tap (or identity) axis k adds at coordinate c ("" if none)."""
    if t.taps > 1:
        return ""
    if t.offsets is None:
        return c if t.stride == 1 or c == "0" else f"{c} * {t.stride}"
    return f"{prefix}o{k}[{c}]"


def resize(rz: dict, dtype: str) -> Lowered:
    tabs = tables(rz)
    lines = table_decls(tabs, "rz_", "static const")
    loops, depth, prev = ["long at = 0;"], 0, "0"
    coord = {}
    for k, t in enumerate(tabs):
        coord[k] = "0" if t.n_out == 1 else f"i{k}"   # (no single-trip loops)
        pad = "    " * depth
        if t.n_out > 1:
            loops.append(f"{pad}for (long i{k} = 0; i{k} < {t.n_out}; ++i{k}) {{")
            depth += 1
        term = single_term(t, "rz_", k, coord[k])
        if term and term != "0":
            cur = f"{prev} + {term}" if prev != "0" else term
            loops.append("    " * depth + f"const long b{k} = {cur};")
            prev = f"b{k}"
    val = extrapolated(tabs, "rz_", lambda k: coord[k],
                       value_expr(tabs, "rz_", lambda k: coord[k], prev, "x"),
                       literal(rz["extrapolation"], dtype))
    loops.append("    " * depth + f"y[at++] = {indent(val, depth).strip()};")
    loops += ["    " * k + "}" for k in range(depth - 1, -1, -1)]
    body = indent("\n".join(lines + loops))
    params = (Param("x", dtype=dtype), Param("y", const=False, dtype=dtype))
    spec = make_spec("resize", **{k: rz[k] for k in RZ_KEYS})
    n_taps = math.prod(t.taps for t in tabs)
    return Lowered(Kernel(f"resize_{rz['mode']}_{dtype}", params, body, spec=spec,
                          macs=n_taps * math.prod(rz["out_shape"]) if n_taps > 1 else 0))
