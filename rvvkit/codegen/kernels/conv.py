"""Conv2d (NCHW) lowering onto the packed GEMM core of `gemm.py`, plus a direct depthwise kernel.

Per image and group, conv is OUT[m][p] = sum_k W[m][k] * X'[k][p] with k = (c, r, s) and p the
output position; the weights are pre-packed at build time (transform of input 1). X' (the
implicit im2col matrix) reaches the micro-kernel by one of three paths, chosen by cost:
  * pointwise - 1x1, stride 1, unpadded: X is already the [C][H*W] matrix; packed like any
                strided GEMM operand (no im2col).
  * grid      - any other conv: x is zero padded and split into stride phases once per image
                (PhaseGrid), after which every row of X' is the buffer read at a fixed offset,
                so the GEMM reads it in place through an offset table; outputs are computed
                on the padded grid and the few wrap-around columns dropped in the epilogue.
  * im2col    - a fused im2col+pack into panels, k-block by k-block (L2-resident): for small
                images, where the grid's wrap-around columns would waste too much.
and in one of two orientations:
  * normal     - rows = output channels, columns = positions: NCHW rows are stored as vectors;
  * transposed - rows = positions, columns = channels: better when the image is small (7x7 =
                 49 positions pads badly to 32-wide vectors, 512 channels do not).
Depthwise (group == C == M) has no reuse across channels; it runs directly on the phase grid.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from ..act import Act, act_expr
from ..kernel import Kernel, Lowered, Param, specified
from ..rvv import GUARD, has_vact, header, vact, vle, vop, vse, vsetvl, vt
from .conv_input import PhaseGrid, im2col_packer, tag
from .gemm import (L2_BLOCK, NOINLINE, Epilogue, Side, cdiv, choose_tile, core, kc_of,
                   pack_panels, tile_cost)


COST_RUN = 300.0
COST_ELEM = 4.0
COST_K = {"im2col": 320.0, "pointwise": 32.0}   # per k-row per packer call (set-up of a row)
COST_ROWPACK = 48.0   # per fixed-length panel copy of the row packer


def _plan_conv(mg, hw, k, wo, cols_grid, pointwise, split_cost=0.0):
    """(cost, path, trans, mr, nr, cols) of the cheapest path; cols = GEMM column count."""
    out = []
    paths = [("pointwise", hw)] if pointwise else \
        [("im2col", hw), ("grid", cols_grid), ("rowpack", hw)]
    for path, cols in paths:
        for trans in (False, True):
            if path == "rowpack" and not trans:
                continue
            p, q = (cols, mg) if trans else (mg, cols)
            rows = [d for d in range(1, 15) if wo % d == 0] if path == "rowpack" else None
            mr, nr = choose_tile(p, q, k, trans=trans, mrs=rows)
            pw = mr if trans else nr
            if path in ("im2col", "pointwise"):
                run = min(pw, wo) if path == "im2col" else pw * 6
                per_call = L2_BLOCK // kc_of(k)   # activation columns per packer call
                pack = k * hw * (COST_RUN / run + COST_ELEM + COST_K[path] / per_call)
            else:
                pack = split_cost + (k * hw * COST_ROWPACK / pw if path == "rowpack" else 0.0)
            out.append((tile_cost(p, q, k, mr, nr, trans) + pack, path, trans, mr, nr, cols))
    return min(out)


def _x_side(path, pg: PhaseGrid, xs, ws_, pw, k, strides, pads, dil):
    """(Side of the activation operand, grid of the epilogue, floats of ws it uses first)."""
    _, cin, h, w = xs
    _, cg, kh, kw = ws_
    if path == "pointwise":
        return Side("strided", si=1, sk=h * w), None, 0
    if path == "rowpack":
        return Side("custom", packer=pg.row_packer(pw, kc_of(k))), None, pg.size
    if path == "grid":   # slack: the last tile reads up to a panel width past the last cell
        return Side("indirect", packer=pg.offsets()), (pg.wq, pg.wo), pg.size + pw
    packer = im2col_packer(pw, cg, h, w, kh, kw, pg.wo, strides, pads, dil)
    return Side("custom", packer=packer), None, 0


def _gemm_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act) -> Lowered:
    n, cin, h, w = xs
    m, cg, kh, kw = ws_
    _, _, ho, wo = ys
    mg, hw, k = m // group, ho * wo, cg * kh * kw
    pointwise = (kh, kw) == (1, 1) and tuple(strides) == (1, 1) and not any(pads)
    pg = PhaseGrid(xs, ws_, ys, strides, pads, dil)
    _, path, trans, mr, nr, cols = _plan_conv(mg, hw, k, wo, pg.cols, pointwise,
                                              pg.size * COST_ELEM)
    xpw = mr if trans else nr                      # panel width of the activation side
    xside, grid, xpad = _x_side(path, pg, xs, ws_, xpw, k, strides, pads, dil)
    pre = ""
    adds = ((("b", "{m}", None),) if bias else ()) + \
        ((("r", f"{{m}} * {hw} + {{n}}", None),) if residual else ())
    ep = Epilogue(ldy=hw, trans=trans, addends=adds, act=act, grid=grid)
    rows, ncols = (cols, mg) if trans else (mg, cols)
    sides = (xside, Side("packed")) if trans else (Side("packed"), xside)
    c = core("conv", rows, ncols, k, sides[0], sides[1], ep, mr, nr)
    wpw = nr if trans else mr                      # panel width of the weight side
    wgrp = cdiv(mg, wpw) * wpw * k                 # packed floats per group

    def transform(wt: np.ndarray) -> np.ndarray:
        wt = np.asarray(wt, np.float32).reshape(group, mg, k)
        return np.concatenate([pack_panels(wt[g], wpw) for g in range(group)])

    yoff = f"(ptrdiff_t)(n * {m} + g * {mg}) * {hw}"
    if path in ("grid", "rowpack"):
        pname, pcode = pg.split(xpw if path == "grid" else 0)
        c.support[pname] = pcode
        pre = f"    {pname}(x + (ptrdiff_t)n * {cin * h * w}, ws);\n"
        xp = f"ws + (ptrdiff_t)g * {cg * pg.plane}"
    else:
        xp = f"x + (ptrdiff_t)(n * {cin} + g * {cg}) * {h * w}"
    wpt = f"w + (ptrdiff_t)g * {wgrp}"
    args = f"{xp}, {wpt}" if trans else f"{wpt}, {xp}"
    args += (f", b + g * {mg}" if bias else "") + (f", r + {yoff}" if residual else "")
    args += f", y + {yoff}, " + (f"ws + {xpad}" if c.workspace else "(float *)0")
    body = (f"  for (int n = 0; n < {n}; ++n) {{\n{pre}    for (int g = 0; g < {group}; ++g)\n"
            f"      {c.name}({args});\n  }}\n")
    hint = "conv1x1" if pointwise else "conv2d"
    kern = Kernel(hint, _params(bias, residual), body, c.workspace + xpad, c.support,
                  n * m * hw * k, spec={"w_panel": wpw})
    return Lowered(kern, {1: transform})


def _params(bias: bool, residual: bool):
    return tuple([Param("x"), Param("w")] + ([Param("b")] if bias else []) +
                 ([Param("r")] if residual else []) + [Param("y", False)])


DW_ROWS, DW_COLS = 4, 32          # register block of the depthwise kernel: 8 zmm here
DW_CHUNK = DW_ROWS * DW_COLS


def _dw_taps() -> Tuple[str, str]:
    """t[R*C] = sum over taps k of w[k] * b[off[k] + 0..R*C): the depthwise inner kernel. Written
    as R rows of C (like the GEMM micro-kernel with a shared row weight) because that is the
    shape gcc 12 keeps in registers; a single 1-D row of accumulators was vectorised with
    gathers instead."""
    r, c = DW_ROWS, DW_COLS
    name = f"rvk_dwtaps_{r}x{c}"
    return name, NOINLINE + f"""static RVK_NOINLINE void {name}(int kb, const float *__restrict a,
    const float *__restrict b, const int *__restrict off, float *__restrict t) {{
  float acc[{r}][{c}];
  for (int i = 0; i < {r}; ++i)
    for (int j = 0; j < {c}; ++j) acc[i][j] = 0.0f;
  for (int k = 0; k < kb; ++k) {{
    const float ak = a[k];
    const float *__restrict bk = b + off[k];
    for (int i = 0; i < {r}; ++i)
      for (int j = 0; j < {c}; ++j) acc[i][j] += ak * bk[i * {c} + j];
  }}
  for (int i = 0; i < {r}; ++i)
    for (int j = 0; j < {c}; ++j) t[i * {c} + j] = acc[i][j];
}}
"""


DW_UNROLL = 49    # taps unrolled in the RVV depthwise kernel (7x7); larger kernels loop


def _dwgrid_rvv(pg: PhaseGrid, act: Optional[Act]) -> str:
    """RVV body of the depthwise grid sweep: strips of vl = vsetvl(cols - q0) cells (LMUL 4),
    one vector load and FMA per tap from the split plane at the tap's constant offset, then
    bias and activation in registers (sigmoid/tanh: a scalar pass over the strip)."""
    L, nt, cols = 4, len(pg.taps), pg.cols   # m8 spills: clang hoists the tap loads
    if nt <= DW_UNROLL:
        taps = [f"    acc = {vop('vfmacc_vf', L)}(acc, wc[{i}], {vle(L, f'xp + q0 + {t}')}, vl);"
                for i, t in enumerate(pg.taps[1:], 1)]
        taps = "\n".join(taps)
        tab = ""
    else:
        tab = f"  static const int tap[{nt}] = {{{', '.join(str(t) for t in pg.taps)}}};\n"
        taps = f"""    for (int k = 1; k < {nt}; ++k)
      acc = {vop('vfmacc_vf', L)}(acc, wc[k], {vle(L, 'xp + q0 + tap[k]')}, vl);"""
    vfin = has_vact(act)
    post = "" if vfin else f"""
  for (size_t q = 0; q < {cols}; ++q) {{
    const float v = g[q];
    g[q] = {act_expr(act, 'v')};
  }}"""
    return f"""{GUARD}
{tab}  for (size_t q0 = 0; q0 < {cols};) {{
    const size_t vl = {vsetvl(L, f'{cols} - q0')};
    {vt(L)} acc = {vop('vfmul_vf', L)}({vle(L, f'xp + q0 + {pg.taps[0]}')}, wc[0], vl);
{taps}
    acc = {vop('vfadd_vf', L)}(acc, bias, vl);
    {'acc = ' + vact(act, 'acc', L) + ';' if vfin and act else ''}
    {vse(L, 'g + q0', 'acc')}
    q0 += vl;
  }}{post}
"""


def _dwconv(xs, ws_, ys, strides, pads, dil, bias, residual, act) -> Lowered:
    """Direct depthwise conv on the phase grid of one channel at a time (L1-resident): every
    tap is a uniform shift of the split plane, so the output grid is swept in register blocks
    of DW_CHUNK cells with kh*kw vector FMAs each and no bounds checks, bias and activation
    applied in registers; the wrap-around cells are then dropped by row copies. (Per-element
    row loops of <= 16 constant trips are avoided: gcc unrolls them and vectorises the outer
    loop with gathers, 3x slower overall.) Helpers are RVK_NOINLINE for the same reason."""
    n, cin, h, w = xs
    _, _, kh, kw = ws_
    _, _, ho, wo = ys
    pg = PhaseGrid((1, 1, h, w), ws_, ys, strides, pads, dil)
    ch, nt = DW_CHUNK, kh * kw
    qpad = cdiv(pg.cols, ch) * ch
    sname, scode = pg.split(ch)
    gname = f"rvk_dwgrid_{tag(pg.key(), bias, residual, act)}"
    fin = "t[j]" if residual else act_expr(act, "t[j]")   # act after the residual add
    tname, tcode = _dw_taps()
    gcode = f"""static void {gname}(const float *__restrict xp, const float *__restrict wc,
    float bias, float *__restrict g) {{
{_dwgrid_rvv(pg, act if not residual else None)}#else
  static const int tap[{nt}] = {{{", ".join(str(t) for t in pg.taps)}}};
  float t[{ch}];
  for (int q0 = 0; q0 < {qpad}; q0 += {ch}) {{
    {tname}({nt}, wc, xp + q0, tap, t);
    for (int j = 0; j < {ch}; ++j) t[j] += bias;
    for (int j = 0; j < {ch}; ++j) g[q0 + j] = {fin};
  }}
#endif
}}
"""
    gbuf = pg.size + ch
    yrow = f"y + (ptrdiff_t)nc * {ho * wo} + i * {wo}"
    if residual:   # rare for depthwise: a plain loop is fine
        rrow = f"r + (ptrdiff_t)nc * {ho * wo} + i * {wo}"
        store = f"""for (int i = 0; i < {ho}; ++i) {{
      float *__restrict yr = {yrow};
      const float *__restrict rr = {rrow};
      for (int j = 0; j < {wo}; ++j) {{
        const float v = g[i * {pg.wq} + j] + rr[j];
        yr[j] = {act_expr(act, 'v')};
      }}
    }}"""
    else:
        store = f"""for (int i = 0; i < {ho}; ++i)
      RVK_MEMCPY({yrow}, g + i * {pg.wq}, {wo} * sizeof(float));"""
    bexpr = f"b[nc % {cin}]" if bias else "0.0f"
    body = f"""  for (int nc = 0; nc < {n * cin}; ++nc) {{
    const float *g = ws + {gbuf};   /* written through ws: not restrict */
    {sname}(x + (ptrdiff_t)nc * {h * w}, ws);
    {gname}(ws, w + nc % {cin} * {nt}, {bexpr}, ws + {gbuf});
    {store}
  }}
"""
    # the portable taps kernel is not compiled where the RVV grid replaces it (unused static)
    tcode = tcode.replace(f"static RVK_NOINLINE void {tname}(",
                          f"#if !defined(__riscv_v_intrinsic)\nstatic RVK_NOINLINE void {tname}(")
    support = {**header(), sname: scode, tname: tcode + "#endif\n", gname: gcode}
    kern = Kernel("dwconv", _params(bias, residual), body, gbuf + qpad, support,
                  n * cin * ho * wo * kh * kw, spec={"w_panel": None})
    return Lowered(kern)


@specified("conv")
def conv2d(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations, bias: bool,
           residual: bool, act: Optional[Act]) -> Lowered:
    """y = act(conv(x, w) + b[m] + r). Params: x, w, [b], [r], y. w is pre-packed (transform 1)
    except for the depthwise kernel, which reads the ONNX (C, 1, kh, kw) layout directly.
    spec["w_panel"] is the panel width of the packed weights (see `packed_index`), or None."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    strides, pads, dil = tuple(strides), tuple(pads), tuple(dilations)
    if group > 1 and group == xs[1] == ys[1]:
        return _dwconv(xs, ws_, ys, strides, pads, dil, bias, residual, act)
    return _gemm_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act)
