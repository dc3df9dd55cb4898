"""How a convolution's input reaches the GEMM core of conv2d.py: the fused im2col+pack routine
and the stride-phase grid (PhaseGrid) that lets the GEMM read the padded input in place."""
from __future__ import annotations

import hashlib
from typing import Tuple

from ...cfmt import indent
from ...loops import cdiv, loop
from .half_gemm import convert_run
from ...rvv import FP16_GUARD, GUARD, vle, vlse, vse, vsetvl, vsplat


def tag(*parts) -> str:
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
    name = f"rvk_conv_im2col_{cin}x{h}x{w}_k{kh}x{kw}_panels{pw}_" \
           f"{tag(cin, h, w, kh, kw, wo, strides, pads, dil)}"
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

    def rects(self):
        """Per stride phase with any input pixel: (phase index, a, b, ilo, ihi, jlo, jhi), its
        plane cells [ilo, ihi) x [jlo, jhi) holding input rows i*sh + a - pt and columns
        j*sw + b - pl; every other cell is padding."""
        pt, pl = self.pads[0], self.pads[1]
        for ph, (a, b) in enumerate(self.phases):
            ilo, ihi = self._range(a - pt, self.h, self.sh, self.hq)
            jlo, jhi = self._range(b - pl, self.w, self.sw, self.wq)
            if ihi > ilo and jhi > jlo:
                yield ph, a, b, ilo, ihi, jlo, jhi

    def split(self, slack: int, zero: bool = True) -> Tuple[str, str]:
        """C routine x -> phase planes (size floats, zeroed), then `slack` zeros for over-reads.
        zero=False: the routine copies the valid rectangles only; the caller zeroes the buffer
        once for every plane it splits into it (the padding cells are never written).

        All bounds are constants: the buffer is zeroed once, then each phase gets the rectangle
        of valid rows/columns, a row at a time (memcpy for stride 1, a constant-stride copy
        that vectorises with permutes otherwise). Branch-free on purpose: a zero/copy/zero split
        with an `if` for pad rows was miscompiled by gcc 12.2 -O3 -mavx2 (outer loop
        vectorised); with runtime phase offsets the strided copy became a gather loop.
        """
        name = (f"rvk_conv_phase_split{'' if zero else '_nozero'}_{self.cin}x{self.h}x{self.w}_"
                f"{tag(self.key(), slack)}")
        h, w, sh, sw, wq = self.h, self.w, self.sh, self.sw, self.wq
        pt, pl = self.pads[0], self.pads[1]
        blocks = []
        for ph, a, b, ilo, ihi, jlo, jhi in self.rects():
            def src(i) -> str:
                return f"xc + ({i} * {sh} + {a - pt}) * {w} + {jlo * sw + b - pl}"

            def dst(i) -> str:
                return (f"xp + (ptrdiff_t)({ph * self.cin} + c) * {self.plane} + {i} * {wq} + "
                        f"{jlo}")
            n = jhi - jlo
            if sw == 1:
                row = f"RVK_MEMCPY({dst('i')}, {src('i')}, {n} * sizeof(float));"
            else:
                row = f"""float *__restrict d = {dst('i')};
const float *__restrict r = {src('i')};
for (int j = 0; j < {n}; ++j) d[j] = r[j * {sw}];"""
            # RVV: the rectangle's rows as one copy (one LMUL choice, strided loads for sw > 1)
            blocks.append(f"""{GUARD}
rvk_vcopy_rows({dst(ilo)}, {wq}, {src(ilo)}, {sh * w}, {sw}, {n}, {ihi - ilo});
#else
{loop("i", ilo, ihi, row)}
#endif""")
        body = loop("c", 0, self.cin, f"const float *__restrict xc = x + (ptrdiff_t)c * {h * w};\n"
                    + "\n".join(blocks), flat=True)
        clear = f"RVK_MEMZERO(xp, (size_t){self.size + slack} * sizeof(float));\n" if zero else ""
        return name, f"""static void {name}(const float *__restrict x, float *__restrict xp) {{
{indent(clear + body)}
}}
"""

    def split_half(self) -> Tuple[str, str]:
        """The float16 form of split(zero=False) (Zvfh; kernels/conv/half.py): x -> phase
        planes in float16, the valid rectangles converted row by row (strided loads for
        sw > 1); the caller zeroes the buffer once. Defined only where Zvfh is."""
        name = f"rvk_conv_phase_split_f16_{self.cin}x{self.h}x{self.w}_{tag(self.key(), 0)}"
        h, w, sh, sw, wq = self.h, self.w, self.sh, self.sw, self.wq
        pt, pl = self.pads[0], self.pads[1]
        blocks = []
        for ph, a, b, ilo, ihi, jlo, jhi in self.rects():
            run = convert_run("d", "r", str(jhi - jlo), jhi - jlo, sw)
            blocks.append(f"""for (int i = {ilo}; i < {ihi}; ++i) {{
    const float *__restrict r = xc + (i * {sh} + {a - pt}) * {w} + {jlo * sw + b - pl};
    _Float16 *__restrict d =
        xh + (ptrdiff_t)({ph * self.cin} + c) * {self.plane} + i * {wq} + {jlo};
{indent(run)}
}}""")
        body = loop("c", 0, self.cin, f"const float *__restrict xc = x + (ptrdiff_t)c * {h * w};\n"
                    + "\n".join(blocks), flat=True)
        return name, f"""{FP16_GUARD}
static void {name}(const float *__restrict x, _Float16 *__restrict xh) {{
{indent(body)}
}}
#endif
"""

    def row_packer(self, pw: int, kc: int) -> Tuple[str, str]:
        """C routine packing X'[k][p] (compact positions p, pw | wo) from the phase planes:
        a pw-wide panel lies in one output row, i.e. pw consecutive grid cells, so every
        (k, panel) is one fixed-length copy from the buffer at the k-row's offset: im2col with
        no index work and no padding waste (used for small images, where the grid's
        wrap-around columns cost too much)."""
        name = f"rvk_conv_rowpack_panels{pw}_{tag(self.key(), kc)}"
        return name, f"""static void {name}(const float *__restrict x, int p0, int np, int k0, int kb,
    float *__restrict dst) {{
    int off[{kc}];
    {self._offsets_loop()}
    for (int pp = 0; pp * {pw} < np; ++pp) {{
        const int p = p0 + pp * {pw};
        const float *__restrict s = x + p / {self.wo} * {self.wq} + p % {self.wo};
        float *__restrict d = dst + (ptrdiff_t)pp * kb * {pw};
{GUARD}
        rvk_vcopy_rows_at(d, {pw}, s, off, {pw}, (size_t)kb);
#else
        for (int kk = 0; kk < kb; ++kk) RVK_MEMCPY(d + kk * {pw}, s + off[kk], {pw} * sizeof(float));
#endif
    }}
}}
"""

    def offsets(self) -> Tuple[str, str]:
        """C routine: offset of implicit-im2col row k = (c, tap) for k in [k0, k0+kb)."""
        name = f"rvk_conv_grid_offsets_{self.cin}x{self.kh}x{self.kw}_{tag(self.key())}"
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
