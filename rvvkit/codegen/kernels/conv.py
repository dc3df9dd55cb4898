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
from .gemm import Epilogue, Side, cdiv, choose_tile, core, pack_panels, tile_cost


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


def _gemm_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act) -> Lowered:
    n, cin, h, w = xs
    m, cg, kh, kw = ws_
    _, _, ho, wo = ys
    mg, hw, k = m // group, ho * wo, cg * kh * kw
    pointwise = (kh, kw) == (1, 1) and tuple(strides) == (1, 1) and not any(pads)
    mr0, nr0 = choose_tile(mg, hw, k)
    mr1, nr1 = choose_tile(hw, mg, k, trans=True)
    trans = tile_cost(hw, mg, k, mr1, nr1, True) < tile_cost(mg, hw, k, mr0, nr0, False)
    mr, nr = (mr1, nr1) if trans else (mr0, nr0)
    xpw = mr if trans else nr                      # panel width of the activation side
    if pointwise:
        xside = Side("strided", si=1, sk=h * w)
    else:
        xside = Side("custom", packer=im2col_packer(xpw, cg, h, w, kh, kw, wo, strides, pads, dil))
    adds = ((("b", "{m}", None),) if bias else ()) + \
        ((("r", f"{{m}} * {hw} + {{n}}", None),) if residual else ())
    ep = Epilogue(ldy=hw, trans=trans, addends=adds, act=act)
    rows, cols = (hw, mg) if trans else (mg, hw)
    sides = (xside, Side("packed")) if trans else (Side("packed"), xside)
    c = core("conv", rows, cols, k, sides[0], sides[1], ep, mr, nr)
    wpw = nr if trans else mr                      # panel width of the weight side
    wgrp = cdiv(mg, wpw) * wpw * k                 # packed floats per group

    def transform(wt: np.ndarray) -> np.ndarray:
        wt = np.asarray(wt, np.float32).reshape(group, mg, k)
        return np.concatenate([pack_panels(wt[g], wpw) for g in range(group)])

    yoff = f"(ptrdiff_t)(n * {m} + g * {mg}) * {hw}"
    xp = f"x + (ptrdiff_t)(n * {cin} + g * {cg}) * {h * w}"
    wp = f"w + (ptrdiff_t)g * {wgrp}"
    args = f"{xp}, {wp}" if trans else f"{wp}, {xp}"
    args += (f", b + g * {mg}" if bias else "") + (f", r + {yoff}" if residual else "")
    args += f", y + {yoff}, " + ("ws" if c.workspace else "(float *)0")
    body = (f"  for (int n = 0; n < {n}; ++n)\n    for (int g = 0; g < {group}; ++g)\n"
            f"      {c.name}({args});\n")
    hint = "conv1x1" if pointwise else "conv2d"
    kern = Kernel(hint, _params(bias, residual), body, c.workspace, c.support, n * m * hw * k)
    return Lowered(kern, {1: transform})


def _params(bias: bool, residual: bool):
    return tuple([Param("x"), Param("w")] + ([Param("b")] if bias else []) +
                 ([Param("r")] if residual else []) + [Param("y", False)])


def _dw_block(width: int, wo0: str, sw: int, kh: int, kw: int, dh: int, dwl: int, wp: int,
              sh: int, wo: int, bias: bool, residual: bool, act: Optional[Act]) -> str:
    """One output-row segment of `width` columns starting at `wo0`, accumulated in registers."""
    init = "b[c]" if bias else "0.0f"
    res = f" + rc[ho * {wo} + {wo0} + j]" if residual else ""
    return f"""{{
        float acc[{width}];
        for (int j = 0; j < {width}; ++j) acc[j] = {init};
        for (int r = 0; r < {kh}; ++r) {{
          const float *__restrict xr = ws + (ho * {sh} + r * {dh}) * {wp} + {wo0} * {sw};
          for (int s = 0; s < {kw}; ++s) {{
            const float wv = wc[r * {kw} + s];
            for (int j = 0; j < {width}; ++j) acc[j] += wv * xr[s * {dwl} + j * {sw}];
          }}
        }}
        for (int j = 0; j < {width}; ++j) {{
          const float v = acc[j]{res};
          yc[ho * {wo} + {wo0} + j] = {act_expr(act, 'v')};
        }}
      }}"""


def _dwconv(xs, ws_, ys, strides, pads, dil, bias, residual, act) -> Lowered:
    """Direct depthwise conv: each channel is copied once into a zero-padded plane in `ws`, so
    the kh*kw FMA sweeps over a row segment have no bounds checks and vectorise along wo."""
    n, cin, h, w = xs
    _, _, kh, kw = ws_
    _, _, ho, wo = ys
    sh, sw = strides
    pt, pl, pb, pr = pads
    dh, dwl = dil
    hp = max(h + pt + pb, (ho - 1) * sh + (kh - 1) * dh + 1)
    wp = max(w + pl + pr, (wo - 1) * sw + (kw - 1) * dwl + 1)
    wb = wo if wo <= 64 else 32        # row segment held in registers (<= 4 zmm)
    blk = lambda width, start: _dw_block(width, start, sw, kh, kw, dh, dwl, wp, sh, wo,
                                         bias, residual, act)
    rem = wo % wb
    tail = f"\n      {blk(rem, str(wo - rem))}" if rem else ""
    body = f"""  for (int i = 0; i < {hp * wp}; ++i) ws[i] = 0.0f;   /* borders stay zero */
  for (int nc = 0; nc < {n * cin}; ++nc) {{
    const int c = nc % {cin};
    const float *__restrict xc = x + (ptrdiff_t)nc * {h * w};
    const float *__restrict wc = w + c * {kh * kw};
    float *__restrict yc = y + (ptrdiff_t)nc * {ho * wo};
{"    const float *__restrict rc = r + (ptrdiff_t)nc * " + str(ho * wo) + ";" if residual else ""}
    for (int ih = 0; ih < {h}; ++ih)
      for (int iw = 0; iw < {w}; ++iw) ws[(ih + {pt}) * {wp} + iw + {pl}] = xc[ih * {w} + iw];
    for (int ho = 0; ho < {ho}; ++ho) {{
      for (int wo0 = 0; wo0 + {wb} <= {wo}; wo0 += {wb}) {blk(wb, "wo0")}{tail}
    }}
  }}
"""
    kern = Kernel("dwconv", _params(bias, residual), body, hp * wp, {}, n * cin * ho * wo * kh * kw)
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
