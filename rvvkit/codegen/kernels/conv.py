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

import hashlib
from typing import Optional, Tuple

import numpy as np

from ..act import Act, act_expr
from ..kernel import Kernel, Lowered, Param, specified
from ..rvv import GUARD, has_vact, header, vact, vle, vlse, vop, vse, vsetvl, vsplat, vt
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
{GUARD}
        for (size_t u = 0; u < (size_t)lo;) {{
          const size_t vl = {vsetvl(8, '(size_t)lo - u')};
          {vse(8, 'd + u', vsplat(8, '0.0f'))}
          u += vl;
        }}
        for (size_t u = (size_t)lo; u < (size_t)hi;) {{
          const size_t vl = {vsetvl(8, '(size_t)hi - u')};
          {vse(8, 'd + u', vle(8, 'xr + (w0 + (int)u) + off') if sw == 1 else
               vlse(8, f'xr + (w0 + (int)u) * {sw} + off', sw))}
          u += vl;
        }}
        for (size_t u = (size_t)hi; u < (size_t)l;) {{
          const size_t vl = {vsetvl(8, '(size_t)l - u')};
          {vse(8, 'd + u', vsplat(8, '0.0f'))}
          u += vl;
        }}
#else
        for (int u = 0; u < lo; ++u) d[u] = 0.0f;
        for (int u = lo; u < hi; ++u) d[u] = xr[(w0 + u) * {sw} + off];
        for (int u = hi; u < l; ++u) d[u] = 0.0f;
#endif
        e += l;
      }}
      q += len;
    }}
    for (int qq = np; qq < npan * {pw}; ++qq)
      dk[(ptrdiff_t)(qq / {pw}) * kb * {pw} + qq % {pw}] = 0.0f;
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

    def _range(self, off: int, n: int, s: int, lim: int) -> Tuple[int, int]:
        """[lo, hi) of cells i (< lim) whose source index i*s + off lies in [0, n)."""
        lo = max(0, cdiv(-off, s))
        hi = min(lim, max(0, cdiv(n - off, s)))
        return lo, max(lo, hi)

    def split(self, slack: int) -> Tuple[str, str]:
        """C routine x -> phase planes (size floats, zeroed), then `slack` zeros for over-reads.

        All bounds are constants: the buffer is zeroed once, then each phase gets the rectangle
        of valid rows/columns, a row at a time (memcpy for stride 1, a constant-stride copy
        that vectorises with permutes otherwise). Branch-free on purpose: a zero/copy/zero split
        with an `if` for pad rows was miscompiled by gcc 12.2 -O3 -mavx2 (outer loop
        vectorised); with runtime phase offsets the strided copy became a gather loop.
        """
        name = f"rvk_split_{_tag(self.key(), slack)}"
        h, w, sh, sw, wq = self.h, self.w, self.sh, self.sw, self.wq
        pt, pl = self.pads[0], self.pads[1]
        blocks = []
        for ph, (a, b) in enumerate(self.phases):
            ilo, ihi = self._range(a - pt, h, sh, self.hq)
            jlo, jhi = self._range(b - pl, w, sw, wq)
            if ihi == ilo or jhi == jlo:
                continue
            src = f"xc + (i * {sh} + {a - pt}) * {w} + {jlo * sw + b - pl}"
            dst = f"xp + (ptrdiff_t)({ph * self.cin} + c) * {self.plane} + i * {wq} + {jlo}"
            if sw == 1:
                row = f"RVK_MEMCPY({dst}, {src}, {jhi - jlo} * sizeof(float));"
            else:   # RVV: a strided load per strip
                n = jhi - jlo
                row = f"""{{
        float *__restrict d = {dst};
        const float *__restrict r = {src};
{GUARD}
        for (size_t j = 0; j < {n};) {{
          const size_t vl = {vsetvl(8, f'{n} - j')};
          {vse(8, 'd + j', vlse(8, f'r + j * {sw}', sw))}
          j += vl;
        }}
#else
        for (int j = 0; j < {n}; ++j) d[j] = r[j * {sw}];
#endif
      }}"""
            blocks.append(f"    for (int i = {ilo}; i < {ihi}; ++i)\n      {row}")
        body = "\n".join(blocks)
        return name, f"""static void {name}(const float *__restrict x, float *__restrict xp) {{
  RVK_MEMZERO(xp, (size_t){self.size + slack} * sizeof(float));
  for (int c = 0; c < {self.cin}; ++c) {{
    const float *__restrict xc = x + (ptrdiff_t)c * {h * w};
{body}
  }}
}}
"""

    def row_packer(self, pw: int, kc: int) -> Tuple[str, str]:
        """C routine packing X'[k][p] (compact positions p, pw | wo) from the phase planes:
        a pw-wide panel lies in one output row, i.e. pw consecutive grid cells, so every
        (k, panel) is one fixed-length copy from the buffer at the k-row's offset: im2col with
        no index work and no padding waste (used for small images, where the grid's
        wrap-around columns cost too much)."""
        name = f"rvk_rowpack_{pw}_{_tag(self.key(), kc)}"
        return name, f"""static void {name}(const float *__restrict x, int p0, int np, int k0, int kb,
    float *__restrict dst) {{
  int off[{kc}];
  {self._offsets_loop()}
  for (int pp = 0; pp * {pw} < np; ++pp) {{
    const int p = p0 + pp * {pw};
    const float *__restrict s = x + p / {self.wo} * {self.wq} + p % {self.wo};
    float *__restrict d = dst + (ptrdiff_t)pp * kb * {pw};
    for (int kk = 0; kk < kb; ++kk) RVK_MEMCPY(d + kk * {pw}, s + off[kk], {pw} * sizeof(float));
  }}
}}
"""

    def offsets(self) -> Tuple[str, str]:
        """C routine: offset of implicit-im2col row k = (c, tap) for k in [k0, k0+kb)."""
        name = f"rvk_gridoff_{_tag(self.key())}"
        return name, f"""static void {name}(int k0, int kb, int *__restrict off) {{
  {self._offsets_loop()}
}}
"""

    def _offsets_loop(self) -> str:
        nt = self.kh * self.kw
        return f"""static const int tap[{nt}] = {{{", ".join(str(t) for t in self.taps)}}};
  int c = k0 / {nt}, t = k0 % {nt};
  for (int kk = 0; kk < kb; ++kk) {{
    off[kk] = c * {self.plane} + tap[t];
    if (++t == {nt}) {{ t = 0; ++c; }}
  }}"""


# Cost, in MACs at full rate, of packing one element: a fixed cost per contiguous run (index
# set-up, loop entry) plus a per-element copy; fitted to measurements here. im2col runs end at
# output rows and panel edges; a pointwise (1x1) pack copies whole panels with no index work
# (modelled as runs 6 panels long). The grid path reads the padded input in place: free.
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
    gname = f"rvk_dwgrid_{_tag(pg.key(), bias, residual, act)}"
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
