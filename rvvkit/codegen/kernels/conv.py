"""Conv2d (NCHW) lowering onto the packed GEMM core of `gemm.py`, plus a direct depthwise kernel.

Per image and group, conv is OUT[m][p] = sum_k W[m][k] * X'[k][p] with k = (c, r, s) and p the
output position. Which side the micro-kernel vectorises is chosen by cost (gemm.tile_cost):
  * normal     - rows = output channels (weights pre-packed in MR panels), columns = positions
                 (im2col packed NR wide). Output rows are contiguous: NCHW stores are vectors.
  * transposed - rows = positions, columns = channels; wins for small images (7x7 = 49
                 positions pads badly to NR = 32 columns while 512 channels do not).
A 1x1, stride-1, unpadded conv needs no im2col: X is already the [C][H*W] matrix, and the core
packs it like any strided GEMM operand. Everything else gets a fused im2col+pack routine that
writes panels directly (no full im2col matrix), k-block by k-block, so the packed block stays in
L2. Depthwise (group == C == M) has little reuse and is done directly, vectorised along the row.
"""
from __future__ import annotations

import hashlib
from typing import Optional, Tuple

import numpy as np

from ..act import Act, act_expr
from ..kernel import Kernel, Lowered, Param
from .gemm import (L2_BLOCK, NOINLINE, Epilogue, Side, cdiv, choose_tile, core, kc_of,
                   pack_panels, tile_cost)


def _tag(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:8]


def im2col_packer(pw: int, cin: int, h: int, w: int, kh: int, kw: int, wo: int,
                  strides, pads, dil) -> Tuple[str, str]:
    """C routine packing X'[k][p] for p in [p0, p0+np), k in [k0, k0+kb) into pw-wide panels.

    Walks k outermost (so the (c, r, s) split and the valid-column range are computed once per
    k, not per element), then output rows, cutting each row at panel boundaries; every run is a
    zero / copy / zero triple with no per-element bounds checks.
    """
    sh, sw = strides
    pt, pl = pads[0], pads[1]
    dh, dw = dil
    name = f"rvk_im2col_{pw}_{_tag(cin, h, w, kh, kw, wo, strides, pads, dil)}"
    return name, f"""static void {name}(const float *__restrict x, int p0, int np, int k0, int kb,
    float *__restrict dst) {{
  const int npan = (np + {pw - 1}) / {pw};
  int c = k0 / {kh * kw}, r = k0 / {kw} % {kh}, s = k0 % {kw};
  for (int kk = 0; kk < kb; ++kk) {{
    const int off = s * {dw} - {pl};   /* input column of output column wo: wo*{sw} + off */
    int wlo = off >= 0 ? 0 : (-off + {sw - 1}) / {sw};
    int whi = {w} - off <= 0 ? 0 : ({w} - off + {sw - 1}) / {sw};
    if (whi > {wo}) whi = {wo};
    if (wlo > whi) wlo = whi;
    const float *__restrict xc = x + (ptrdiff_t)c * {h * w};
    float *__restrict dk = dst + (ptrdiff_t)kk * {pw};
    int ho = p0 / {wo}, wc = p0 % {wo};
    for (int q = 0; q < np; ++ho, wc = 0) {{
      const int len = {wo} - wc < np - q ? {wo} - wc : np - q;
      const int ih = ho * {sh} - {pt} + r * {dh};
      const int valid = ih >= 0 && ih < {h};
      const float *__restrict xr = xc + (ptrdiff_t)(valid ? ih : 0) * {w};
      for (int e = 0; e < len;) {{
        const int qq = q + e, u0 = qq % {pw};
        const int l = {pw} - u0 < len - e ? {pw} - u0 : len - e;
        float *__restrict d = dk + (ptrdiff_t)(qq / {pw}) * kb * {pw} + u0;
        const int w0 = wc + e;
        int lo = valid ? wlo - w0 : l, hi = valid ? whi - w0 : l;
        lo = lo < 0 ? 0 : (lo > l ? l : lo);
        hi = hi < lo ? lo : (hi > l ? l : hi);
        for (int u = 0; u < lo; ++u) d[u] = 0.0f;
        for (int u = lo; u < hi; ++u) d[u] = xr[(w0 + u) * {sw} + off];
        for (int u = hi; u < l; ++u) d[u] = 0.0f;
        e += l;
      }}
      q += len;
    }}
    for (int qq = np; qq < npan * {pw}; ++qq) dk[(ptrdiff_t)(qq / {pw}) * kb * {pw} + qq % {pw}] = 0.0f;
    if (++s == {kw}) {{
      s = 0;
      if (++r == {kh}) {{ r = 0; ++c; }}
    }}
  }}
}}
"""


class PhaseGrid:
    """The conv input re-laid out so that every tap (r, s) is one uniform shift.

    x is zero padded and split into its stride phases (a, b) (only those some tap uses), each
    an hq x wq plane: phase (a, b) holds padded pixel (i*sh + a, j*sw + b) at (i, j). Output
    (ho, wo) then reads tap (r, s) at plane cell (ho + r*dh//sh, wo + s*dw//sw) of phase
    (r*dh % sh, s*dw % sw): on the "grid" of cells q = ho*wq + wo the implicit im2col row of
    k = (c, r, s) is the buffer read from a fixed offset. The GEMM then reads it in place; the
    columns with wo >= Wo are computed and dropped (wq - Wo of every wq: a few %).
    Planes are padded to an odd number of 64-byte lines: with 2^n-float planes (16x16) the
    rows a micro-tile reads from successive channels fell into 4 of the 64 L1 sets.
    """

    def __init__(self, xs, ws_, ys, strides, pads, dil):
        _, self.cin, self.h, self.w = xs
        _, _, self.kh, self.kw = ws_
        _, _, self.ho, self.wo = ys
        (self.sh, self.sw), self.pads, (self.dh, self.dw) = strides, pads, dil
        pt, pl, pb, pr = pads
        hp = max(self.h + pt + pb, (self.ho - 1) * self.sh + (self.kh - 1) * self.dh + 1)
        wp = max(self.w + pl + pr, (self.wo - 1) * self.sw + (self.kw - 1) * self.dw + 1)
        self.hq, self.wq = cdiv(hp, self.sh), cdiv(wp, self.sw)
        self.plane = 16 * (cdiv(self.hq * self.wq, 16) | 1)
        taps = [(r * self.dh, s * self.dw) for r in range(self.kh) for s in range(self.kw)]
        self.phases = sorted({(y % self.sh, x % self.sw) for y, x in taps})
        self.taps = [self.phases.index((y % self.sh, x % self.sw)) * self.cin * self.plane
                     + y // self.sh * self.wq + x // self.sw for y, x in taps]
        self.cols = (self.ho - 1) * self.wq + self.wo      # grid cells up to the last output
        self.size = len(self.phases) * self.cin * self.plane

    def key(self):
        return (self.cin, self.h, self.w, self.kh, self.kw, self.ho, self.wo, self.sh, self.sw,
                self.pads, self.dh, self.dw)

    def split(self, slack: int) -> Tuple[str, str]:
        """C routine x -> phase planes (size floats), then `slack` zeros for over-reads."""
        name = f"rvk_split_{_tag(self.key(), slack)}"
        h, w, sh, sw, wq, hq = self.h, self.w, self.sh, self.sw, self.wq, self.hq
        pt, pl = self.pads[0], self.pads[1]
        calls = "\n".join(f"  {name}_ph(x, xp + {i * self.cin * self.plane}, {a}, {b});"
                          for i, (a, b) in enumerate(self.phases))
        # Zero the whole plane, then copy the rectangle of valid rows/columns: a branch-free
        # row loop. (A zero/copy/zero split per row with an `if` for pad rows was miscompiled
        # by gcc 12.2 -O3 -mavx2 once a, b were constant-propagated: outer-loop vectorised.)
        if sw == 1:
            copy = f"memcpy(d + i * {wq} + jlo, xc + (i * {sh} + a - {pt}) * {w} + jlo + b - {pl}, " \
                   f"(size_t)(jhi - jlo) * sizeof(float));"
        else:
            copy = f"for (int j = jlo; j < jhi; ++j)\n        d[i * {wq} + j] = " \
                   f"xc[(i * {sh} + a - {pt}) * {w} + j * {sw} + b - {pl}];"
        return name, NOINLINE + f"""static RVK_NOINLINE void {name}_ph(const float *__restrict x,
    float *__restrict d, int a, int b) {{
  int ilo = {pt} - a > 0 ? ({pt} - a + {sh - 1}) / {sh} : 0;       /* first i with ih >= 0 */
  int ihi = {h + pt} - a > 0 ? ({h + pt} - a + {sh - 1}) / {sh} : 0; /* first i with ih >= h */
  int jlo = {pl} - b > 0 ? ({pl} - b + {sw - 1}) / {sw} : 0;
  int jhi = {w + pl} - b > 0 ? ({w + pl} - b + {sw - 1}) / {sw} : 0;
  ihi = ihi > {hq} ? {hq} : ihi;
  jhi = jhi > {wq} ? {wq} : jhi;
  ilo = ilo > ihi ? ihi : ilo;
  jlo = jlo > jhi ? jhi : jlo;
  for (int c = 0; c < {self.cin}; ++c, d += {self.plane}) {{
    const float *__restrict xc = x + (ptrdiff_t)c * {h * w};
    memset(d, 0, {self.plane} * sizeof(float));
    for (int i = ilo; i < ihi; ++i)
      {copy}
  }}
}}

static void {name}(const float *__restrict x, float *__restrict xp) {{
{calls}
  for (int i = 0; i < {slack}; ++i) xp[{self.size} + i] = 0.0f;
}}
"""

    def offsets(self) -> Tuple[str, str]:
        """C routine: offset of implicit-im2col row k = (c, tap) for k in [k0, k0+kb)."""
        name = f"rvk_gridoff_{_tag(self.key())}"
        nt = self.kh * self.kw
        return name, f"""static void {name}(int k0, int kb, int *__restrict off) {{
  static const int tap[{nt}] = {{{", ".join(str(t) for t in self.taps)}}};
  int c = k0 / {nt}, t = k0 % {nt};
  for (int kk = 0; kk < kb; ++kk) {{
    off[kk] = c * {self.plane} + tap[t];
    if (++t == {nt}) {{ t = 0; ++c; }}
  }}
}}
"""


# Cost, in MACs at full rate, of packing one element: a fixed cost per contiguous run (index
# set-up, loop entry) plus a per-element copy; fitted to measurements here. im2col runs end at
# output rows and panel edges; a pointwise (1x1) pack copies whole panels with no index work
# (modelled as runs 6 panels long). The grid path reads the padded input in place: free.
COST_RUN = 300.0
COST_ELEM = 4.0
COST_K = {"im2col": 320.0, "pointwise": 32.0}   # per k-row per packer call (set-up of a row)


def _plan_conv(mg, hw, k, wo, cols_grid, pointwise, split_cost=0.0):
    """(cost, path, trans, mr, nr, cols) of the cheapest path; cols = GEMM column count."""
    out = []
    paths = [("pointwise", hw)] if pointwise else [("im2col", hw), ("grid", cols_grid)]
    for path, cols in paths:
        if cols is None:
            continue
        for trans in (False, True):
            p, q = (cols, mg) if trans else (mg, cols)
            mr, nr = choose_tile(p, q, k, trans=trans)
            pw = mr if trans else nr
            if path != "grid":
                run = min(pw, wo) if path == "im2col" else pw * 6
                per_call = L2_BLOCK // kc_of(k)   # activation columns per packer call
                pack = k * hw * (COST_RUN / run + COST_ELEM + COST_K[path] / per_call)
            else:
                pack = split_cost
            out.append((tile_cost(p, q, k, mr, nr, trans) + pack, path, trans, mr, nr, cols))
    return min(out)


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
    grid, pre, xpad = None, "", 0
    if path == "pointwise":
        xside = Side("strided", si=1, sk=h * w)
    elif path == "grid":
        xside = Side("indirect", packer=pg.offsets())
        # slack: the last tile reads up to a panel width past the last grid cell
        grid, xpad = (pg.wq, wo), pg.size + max(mr, nr)
    else:
        xside = Side("custom", packer=im2col_packer(xpw, cg, h, w, kh, kw, wo, strides, pads, dil))
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
    if path == "grid":
        pname, pcode = pg.split(max(mr, nr))
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
                  n * m * hw * k)
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
    gname = f"rvk_dwgrid_{_tag(pg.key(), bias, residual, act)}"
    fin = "t[j]" if residual else act_expr(act, "t[j]")   # act after the residual add
    tname, tcode = _dw_taps()
    gcode = f"""static void {gname}(const float *__restrict xp, const float *__restrict wc,
    float bias, float *__restrict g) {{
  static const int tap[{nt}] = {{{", ".join(str(t) for t in pg.taps)}}};
  float t[{ch}];
  for (int q0 = 0; q0 < {qpad}; q0 += {ch}) {{
    {tname}({nt}, wc, xp + q0, tap, t);
    for (int j = 0; j < {ch}; ++j) t[j] += bias;
    for (int j = 0; j < {ch}; ++j) g[q0 + j] = {fin};
  }}
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
      memcpy({yrow}, g + i * {pg.wq}, {wo} * sizeof(float));"""
    bexpr = f"b[nc % {cin}]" if bias else "0.0f"
    body = f"""  for (int nc = 0; nc < {n * cin}; ++nc) {{
    const float *g = ws + {gbuf};   /* written through ws: not restrict */
    {sname}(x + (ptrdiff_t)nc * {h * w}, ws);
    {gname}(ws, w + nc % {cin} * {nt}, {bexpr}, ws + {gbuf});
    {store}
  }}
"""
    support = {sname: scode, tname: tcode, gname: gcode}
    kern = Kernel("dwconv", _params(bias, residual), body, gbuf + qpad, support,
                  n * cin * ho * wo * kh * kw)
    return Lowered(kern)


def conv2d(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations, bias: bool,
           residual: bool, act: Optional[Act]) -> Lowered:
    """y = act(conv(x, w) + b[m] + r). Params: x, w, [b], [r], y. w is pre-packed (transform 1)
    except for the depthwise kernel, which reads the ONNX (C, 1, kh, kw) layout directly."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    strides, pads, dil = tuple(strides), tuple(pads), tuple(dilations)
    if group > 1 and group == xs[1] == ys[1]:
        return _dwconv(xs, ws_, ys, strides, pads, dil, bias, residual, act)
    return _gemm_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act)
