"""Conv 3x3, stride 1, group 1 by Winograd F(4x4, 3x3) (the transforms: winograd_transforms.py).

Per call: (1) the input transform, one part per (image, channel): the channel is copied into a
zero-bordered plane, and each 6x6 tile becomes V_e[c][t] (t = image * tiles + tile, e the
element); (2) 36 GEMMs OUT_e = U_e . V_e on the packed GEMM core, U_e pre-packed at build time;
(3) the output transform, one part per (image, output channel): 4x4 blocks into a plane of whole
tiles, then bias, residual and activation while copying the plane's valid part to y.

Each transform runs as a row pass into a small scratch and a column pass out of it. The
portable code loops over a row of tiles (the column pass is contiguous; gcc vectorises it);
the RVV code runs over all tiles of an image at once, reading and writing tile corners through
an offset table (indexed loads and stores), so short rows of tiles (a 7x7 map has two) still
fill the vector. Parts are independent, and the GEMM splits its own work, so outputs are the
same for every thread count.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ....ops.activations import Act, act_expr, act_rvv_support, has_vector_form
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import cdiv
from ...rvv import FP16_GUARD, GUARD, header, vle, vop, vse
from . import half_gemm as hg
from ...precision import fp16_only, fp16_or
from . import winograd_transforms as wg
from ..gemm.core import core
from ..gemm.spec import Epilogue, Side
from ..gemm.tiling import choose_tile, pack_panels, tile_cost

# direct_panel: None, or the w_panel of the direct form's weights a kernel carries beside U
# (conv.by_target: Winograd on RISC-V only)
# half_rows: None, or the rows of the float16 panels of U (kernels/conv/half.py) it carries
declare_spec("conv_winograd", ("x_shape", "w_shape", "y_shape", "pads", "bias", "residual",
                               "act", "u_panel", "trans", "direct_panel", "half_rows"))

STRIP = 64      # tiles per RVV strip at most: bounds the scratch for any VLEN (m1 holds VLEN/32)
# The cost model (units: a MAC at full rate, as gemm_tiling.tile_cost) is fitted to the
# LMUL-weighted instruction counts of RVV code under QEMU at VLEN 256 (what the boards run;
# benchmarks/bench_winograd.py): Winograd wins 1.5-2.5x there from 16 channels up, and loses
# with 3. The AVX-512 host gains less (its direct GEMM runs nearer its peak): 1.3-1.5x on wide
# layers, 0.9-1.1x on narrow ones.
GEMM_FACTOR = 1.15  # 36 GEMMs with k = C run below the rate of one with k = 9 C
COST_IN = 16.0      # per element of V (36 per tile and channel): plane, loads, program
COST_OUT = 6.0      # per element of the GEMMs' output (36 per tile and output channel)
COST_PACK = 4.0     # per element of V the GEMM core re-packs into panels


@dataclass(frozen=True)
class Geo:
    """The shapes of one Winograd conv."""
    n: int
    c: int
    h: int
    w: int
    m: int
    ho: int
    wo: int
    pt: int
    pl: int

    @property
    def th(self) -> int:
        return cdiv(self.ho, wg.M_OUT)

    @property
    def tw(self) -> int:
        return cdiv(self.wo, wg.M_OUT)

    @property
    def tt(self) -> int:          # tiles per image
        return self.th * self.tw

    @property
    def t(self) -> int:           # GEMM columns: tiles of all images
        return self.n * self.tt

    @property
    def ph(self) -> int:          # the zero-bordered input plane
        return 4 * self.th + 2

    @property
    def pw(self) -> int:
        return 4 * self.tw + 2

    @property
    def ow(self) -> int:          # the plane of whole output tiles
        return 4 * self.tw

    @property
    def oh(self) -> int:
        return 4 * self.th


def eligible(xs, ws_, group, strides, dil) -> bool:
    """Shapes Winograd F(4x4, 3x3) serves: a 3x3 kernel, stride 1, no dilation, one group."""
    return tuple(ws_[2:]) == (3, 3) and tuple(strides) == (1, 1) and tuple(dil) == (1, 1) \
        and group == 1 and len(xs) == 4


def _gemm_plan(g: Geo):
    """(cost of the 36 GEMMs, trans, mr, nr): rows m, columns t, or transposed (rows t)."""
    mr0, nr0 = choose_tile(g.m, g.t, g.c)
    mr1, nr1 = choose_tile(g.t, g.m, g.c, trans=True)
    c0, c1 = tile_cost(g.m, g.t, g.c, mr0, nr0, False), tile_cost(g.t, g.m, g.c, mr1, nr1, True)
    # the runtime side (V) is re-packed into panels by the core: COST_STRIP per element
    pack = g.c * g.t * COST_PACK
    return (wg.NE * (c1 + pack), True, mr1, nr1) if c1 < c0 else \
        (wg.NE * (c0 + pack), False, mr0, nr0)


def cost(xs, ws_, ys, pads) -> float:
    """Estimated time (MACs at full rate) of the Winograd conv, comparable with conv2d.py's."""
    g = geometry(xs, ws_, ys, pads)
    gemm_cost = _gemm_plan(g)[0]
    return GEMM_FACTOR * gemm_cost + wg.NE * g.t * (g.c * COST_IN + g.m * COST_OUT)


# Where an AVX-512 host runs the direct GEMM faster although Winograd wins under RVV (one layer,
# one thread, Winograd forced against the direct plan; Xeon @ 2.8 GHz, gcc 12, the nine light
# models' 3x3 stride-1 layers; `benchmarks/bench_winograd.py --vlens --layers C,H,M ...` measures
# one): Winograd took 1.25-1.70x the direct time for 512x7x7 -> 512 (resnet50), 1.2-1.4x for
# 192x6x6 -> 384 (inception_v1), 1.2-1.3x for densenet121's 128 -> 32 at 14x14 and 7x7,
# 1.1-1.35x for squeezenet's 48 -> 192 and 1.0-1.3x for its 64 -> 256 at 13x13, and 0.4-0.9x for
# most other layers (0.6-0.7x at 12x12 with 256-512 channels, 0.6-0.8x at 14x14 with 96-192
# channels both sides, 0.8-1.1x for the other 4-tile layers, whose U is smaller).
HOST_FEW_TILES = 4          # the GEMMs' columns: U used for this few tiles is streamed, not reused
HOST_STREAMED_U = 10 << 20  # bytes of U beyond which that stream costs more than it saves
HOST_SMALL_TILES = 16       # 36 GEMMs this short, and this narrow on one side, are mostly
HOST_SMALL_SIDE = 64        # per-GEMM overhead (packing, transforms, a region per call)


def prefers_direct_off_riscv(xs, ws_, ys, pads) -> bool:
    """Whether targets other than RISC-V (an x86 host) should run this conv directly although
    Winograd wins under RVV: its transformed weights U (four times the direct ones) are large
    and used for a handful of tiles, or its 36 GEMMs are short and narrow (see above). The host
    GEMM runs nearer its peak than RVV's, so the multiplications Winograd saves weigh less."""
    g = geometry(xs, ws_, ys, pads)
    u_bytes = 4 * wg.NE * g.c * g.m
    return (g.t <= HOST_FEW_TILES and u_bytes > HOST_STREAMED_U) or \
        (g.t <= HOST_SMALL_TILES and min(g.c, g.m) <= HOST_SMALL_SIDE)


def geometry(xs, ws_, ys, pads) -> Geo:
    return Geo(xs[0], xs[1], xs[2], xs[3], ws_[0], ys[2], ys[3], pads[0], pads[1])


def _offsets(name: str, g: Geo, row: int) -> str:
    """Byte offsets of each tile's corner in a plane `row` floats wide (RVV index vector)."""
    offs = [4 * (4 * (t // g.tw) * row + 4 * (t % g.tw)) for t in range(g.tt)]
    lines = ", ".join(str(o) for o in offs)
    return f"static const unsigned int {name}[{g.tt}] = {{{lines}}};\n"


def _input_part(name: str, g: Geo, off: str) -> str:
    """Input transform of part u = (image, channel) into v (scratch: plane, then rows)."""
    ct = g.c * g.t
    tw_s = max(g.tw, STRIP)
    row = wg.c_lines(wg.IN_PROG, "f", lambda j: f"p[4 * tx + {j}]",
                     lambda j, v: f"rt[(i * 6 + {j}) * {tw_s} + tx] = {v};")
    col = wg.c_lines(wg.IN_PROG, "f", lambda i: f"rt[({i * 6} + j) * {tw_s} + tx]",
                     lambda i, v: f"vc[(ptrdiff_t)({i * 6} + j) * {ct} + ty * {g.tw} + tx] = {v};")
    vrow = wg.rvv_lines(wg.IN_PROG, "f", 1, lambda j: f"__riscv_vluxei32_v_f32m1(p + {j}, idx, vl)",
                        lambda j, v: vse(1, f"rt + (i * 6 + {j}) * {tw_s}", v))
    vcol = wg.rvv_lines(wg.IN_PROG, "f", 1, lambda i: vle(1, f"rt + ({i * 6} + j) * {tw_s}"),
                        lambda i, v: vse(1, f"vc + (ptrdiff_t)({i * 6} + j) * {ct} + t0", v))
    img = f"const int img = u / {g.c}, c = u % {g.c};" if g.n > 1 else "const int img = 0, c = u;"
    return f"""static void {name}(const float *__restrict x, float *__restrict v,
    float *__restrict sc, int u) {{
    {img}
    float *__restrict pl = sc, *__restrict rt = sc + {g.ph * g.pw};
    const float *__restrict xc = x + (ptrdiff_t)u * {g.h * g.w};
    float *__restrict vc = v + (ptrdiff_t)c * {g.t} + (ptrdiff_t)img * {g.tt};
    RVK_MEMZERO(pl, sizeof(float) * {g.ph * g.pw});
    for (int r = 0; r < {g.h}; ++r)
        RVK_MEMCPY(pl + (r + {g.pt}) * {g.pw} + {g.pl}, xc + r * {g.w}, sizeof(float) * {g.w});
{GUARD}
    for (size_t t0 = 0; t0 < {g.tt};) {{
        const size_t vl = __riscv_vsetvl_e32m1({g.tt} - t0 < {STRIP} ? {g.tt} - t0 : {STRIP});
        const vuint32m1_t idx = __riscv_vle32_v_u32m1({off} + t0, vl);
        for (int i = 0; i < 6; ++i) {{   /* rows of the tiles: d B */
            const float *__restrict p = pl + i * {g.pw};
{indent(chr(10).join(vrow), 3)}
        }}
        for (int j = 0; j < 6; ++j) {{   /* columns: B^T (d B) */
{indent(chr(10).join(vcol), 3)}
        }}
        t0 += vl;
    }}
#else
    for (int ty = 0; ty < {g.th}; ++ty) {{
        for (int i = 0; i < 6; ++i) {{   /* rows of the tiles: d B */
            const float *__restrict p = pl + (4 * ty + i) * {g.pw};
            for (int tx = 0; tx < {g.tw}; ++tx) {{
{indent(chr(10).join(row), 4)}
            }}
        }}
        for (int j = 0; j < 6; ++j) {{   /* columns: B^T (d B) */
            for (int tx = 0; tx < {g.tw}; ++tx) {{
{indent(chr(10).join(col), 4)}
            }}
        }}
    }}
#endif
}}
"""


def _finish(g: Geo, bias: bool, residual: bool, act: Optional[Act]) -> str:
    """y = act(plane + b[m] + r) over the valid outputs of the plane of whole tiles."""
    flat = g.ow == g.wo              # the plane's rows are y's rows: one pass over all
    cols = g.ho * g.wo if flat else g.wo
    adds = (" + bm" if bias else "") + (" + rr[q]" if residual else "")
    body = f"""for (int q = 0; q < {cols}; ++q) {{
    const float o = s[q]{adds};
    d[q] = {act_expr(act, 'o')};
}}"""
    if has_vector_form(act):
        ops = [f"vfloat32m1_t o = {vle(1, 's + q')};"]
        ops += [f"o = {vop('vfadd_vf', 1)}(o, bm, vl);"] if bias else []
        ops += [f"o = {vop('vfadd_vv', 1)}(o, {vle(1, 'rr + q')}, vl);"] if residual else []
        ops += [f"o = {act.rvv_expr('o', 1)};"] if act is not None else []
        ops += [vse(1, "d + q", "o")]
        body = f"""{GUARD}
for (size_t q = 0; q < {cols};) {{
    const size_t vl = __riscv_vsetvl_e32m1({cols} - q);
{indent(chr(10).join(ops))}
    q += vl;
}}
#else
{body}
#endif"""
    if flat:
        head = "const float *__restrict s = op;\nfloat *__restrict d = yo;\n" + \
            ("const float *__restrict rr = ro;\n" if residual else "")
        return head + body
    head = (f"const float *__restrict s = op + rw * {g.ow};\n"
            f"float *__restrict d = yo + rw * {g.wo};\n" +
            (f"const float *__restrict rr = ro + rw * {g.wo};\n" if residual else ""))
    return f"for (int rw = 0; rw < {g.ho}; ++rw) {{\n{indent(head + body)}\n}}"


def _output_part(name: str, g: Geo, off: str, bias: bool, residual: bool,
                 act: Optional[Act]) -> str:
    """Output transform of part u = (image, output channel): A^T M A into the plane of whole
    tiles (scratch), then the valid outputs with bias, residual and activation into y."""
    mt = g.m * g.t
    tw_s = max(g.tw, STRIP)
    col = wg.c_lines(wg.OUT_PROG, "f", lambda i: f"mm[(ptrdiff_t)({i * 6} + j) * {mt} + "
                     f"ty * {g.tw} + tx]", lambda i, v: f"rt[({i * 6} + j) * {tw_s} + tx] = {v};")
    row = wg.c_lines(wg.OUT_PROG, "f", lambda j: f"rt[(i * 6 + {j}) * {tw_s} + tx]",
                     lambda j, v: f"q[4 * tx + {j}] = {v};")
    # RVV: the 24 column sums stay in registers (6 loads and 4 sums live per column; clang
    # keeps them all at LMUL 1), so no scratch round trip between the passes
    vpass = []
    for j in range(wg.TILE):
        vpass += wg.rvv_lines(wg.OUT_PROG, f"c{j}_", 1,
                              lambda i, j=j: vle(1, f"mm + (ptrdiff_t){(i * 6 + j) * mt} + t0"),
                              lambda i, v: "")
    for i in range(wg.M_OUT):
        vpass += wg.rvv_lines(wg.OUT_PROG, f"r{i}_", 1, lambda j, i=i: f"c{j}_o{i}",
                              lambda j, v, i=i: f"__riscv_vsuxei32_v_f32m1(op + {i * g.ow + j}, "
                                                f"idx, {v}, vl);")
    vpass = [ln for ln in vpass if ln]
    img = f"const int img = u / {g.m}, m = u % {g.m};" if g.n > 1 else "const int img = 0, m = u;"
    params = ("const float *__restrict mb, " + ("const float *__restrict b, " if bias else "") +
              ("const float *__restrict r, " if residual else "") + "float *__restrict y")
    extra = ("const float bm = b[m];\n" if bias else "") + \
        (f"const float *__restrict ro = r + (ptrdiff_t)u * {g.ho * g.wo};" if residual else "")
    extra = extra.rstrip("\n") or "/* no bias, no residual */"
    return f"""static void {name}({params},
    float *__restrict sc, int u) {{
    {img}
    const float *__restrict mm = mb + (ptrdiff_t)m * {g.t} + (ptrdiff_t)img * {g.tt};
    float *__restrict op = sc;
    float *__restrict yo = y + (ptrdiff_t)u * {g.ho * g.wo};
{indent(extra)}
{GUARD}
    for (size_t t0 = 0; t0 < {g.tt};) {{
        const size_t vl = __riscv_vsetvl_e32m1({g.tt} - t0 < {STRIP} ? {g.tt} - t0 : {STRIP});
        const vuint32m1_t idx = __riscv_vle32_v_u32m1({off} + t0, vl);
        /* columns: A^T m, then rows: (A^T m) A */
{indent(chr(10).join(vpass), 2)}
        t0 += vl;
    }}
#else
    float *__restrict rt = sc + {g.oh * g.ow};
    for (int ty = 0; ty < {g.th}; ++ty) {{
        for (int j = 0; j < 6; ++j) {{   /* columns: A^T m */
            for (int tx = 0; tx < {g.tw}; ++tx) {{
{indent(chr(10).join(col), 4)}
            }}
        }}
        for (int i = 0; i < 4; ++i) {{   /* rows: (A^T m) A */
            float *__restrict q = op + (4 * ty + i) * {g.ow};
            for (int tx = 0; tx < {g.tw}; ++tx) {{
{indent(chr(10).join(row), 4)}
            }}
        }}
    }}
#endif
{indent(_finish(g, bias, residual, act))}
}}
"""


def _pool_trio(part: str, args, units: int, work: int, scratch: int) -> tuple:
    """(name, C) of a task running `part(<args>, scratch, u)` per part u of `units`, and the
    statement handing the parts to the pool (each part computed alike on any thread)."""
    task = f"{part}_task"
    casts = ", ".join(f"({ty})p[{i}]" for i, (ty, _) in enumerate(args))
    text = f"""static void {task}(void *ctx, int task, int ntasks, float *ws) {{
    const void *const *p = (const void *const *)ctx;
    int lo, hi;
    rvk_split({units}, task, ntasks, &lo, &hi);
    for (int u = lo; u < hi; ++u) {part}({casts}, ws, u);
}}
"""
    names = ", ".join(a for _, a in args)
    call = f"""{{
    const void *p[] = {{{names}}};
    rvk_parallel({units}, {work}L, {scratch}L, sc, {task}, (void *)p);
}}"""
    return task, text, call


def winograd_conv(xs, ws_, ys, pads, bias: bool, residual: bool, act: Optional[Act],
                  params, half_form: Optional[str] = None) -> Lowered:
    """The Winograd lowering of conv2d (params x, w, [b], [r], y as conv2d.py's). half_form
    "auto" adds the float16 GEMMs (weights `wh` after `w`) for Zvfh targets, "fp16" has only
    them (`w` then holds float16 panels): see _half_gemms."""
    g = geometry(xs, ws_, ys, pads)
    _, trans, mr, nr = _gemm_plan(g)
    vside = Side("strided", si=1, sk=g.t)
    ep = Epilogue(ldy=g.t, trans=trans)
    # the 36 GEMMs are the parts of one region, each whole on one thread (a region per GEMM
    # left small maps' GEMMs, below the pool's grain, on one thread one after another)
    c = core("wino", g.t if trans else g.m, g.m if trans else g.t, g.c,
             vside if trans else Side("packed"), Side("packed") if trans else vside, ep, mr, nr,
             driver=False)
    upw = nr if trans else mr                       # panel width of the packed U_e
    usz = cdiv(g.m, upw) * upw * g.c                # packed floats per element e
    support = header()
    support.update(act_rvv_support(act, 1))
    key = hashlib.sha1(repr((g, bias, residual, act, trans, mr, nr)).encode()).hexdigest()[:8]
    base = f"rvk_wino_{g.c}x{g.h}x{g.w}_m{g.m}_{key}"
    ioff, ooff = f"{base}_in_off", f"{base}_out_off"
    offs = f"{GUARD}\n{_offsets(ioff, g, g.pw)}{_offsets(ooff, g, g.ow)}#endif\n"
    support[f"{base}_offsets"] = offs
    support[f"{base}_in"] = _input_part(f"{base}_in", g, ioff)
    support[f"{base}_out"] = _output_part(f"{base}_out", g, ooff, bias, residual, act)
    tws = max(g.tw, STRIP)
    sc_in, sc_out = g.ph * g.pw + wg.NE * tws, g.oh * g.ow + 24 * tws
    # every product widened: the output transform amplifies a float16 sum's error (staged sums
    # of 32 left single outputs off by 1e-1 of the largest, against 1e-2 widened)
    g16 = hg.plan(g.m, g.c, g.t, block=0)
    hscratch = cdiv(hg.scratch_halves(g16), 2) if half_form else 0    # V_e in float16
    scratch = max(sc_in, sc_out, c.workspace, hscratch)
    vsz, msz = wg.NE * g.c * g.t, wg.NE * g.m * g.t
    tin, tin_c, call_in = _pool_trio(f"{base}_in", [("const float *", "x"), ("float *", "v")],
                                     g.n * g.c, wg.NE * g.c * g.t * 8, scratch)
    oargs = [("const float *", "mb")] + ([("const float *", "b")] if bias else []) + \
        ([("const float *", "r")] if residual else []) + [("float *", "y")]
    tout, tout_c, call_out = _pool_trio(f"{base}_out", oargs, g.n * g.m,
                                        wg.NE * g.m * g.t * 6, scratch)
    support[tin], support[tout] = tin_c, tout_c
    gemm_support = dict(c.support)     # the float32 GEMMs' helpers (none in a float16 kernel)
    ops = ("v + (ptrdiff_t)e * {ct}, w + (ptrdiff_t)e * {usz}" if trans else
           "w + (ptrdiff_t)e * {usz}, v + (ptrdiff_t)e * {ct}")
    ops = ops.format(ct=g.c * g.t, usz=usz)
    gpart = f"{base}_gemm"
    gemm_support[gpart] = f"""static void {gpart}(const float *__restrict w, const float *__restrict v,
    float *__restrict mb, float *__restrict sc, int e) {{   /* OUT_e = U_e . V_e */
    {c.range}({ops}, mb + (ptrdiff_t)e * {g.m * g.t}, sc, 0, {c.extent});
}}
"""
    tg, tg_c, call_gemm = _pool_trio(gpart, [("const float *", "w"), ("const float *", "v"),
                                             ("float *", "mb")],
                                     wg.NE, wg.NE * g.m * g.t * g.c, c.workspace)
    gemm_support[tg] = tg_c
    if half_form != "fp16":
        support.update(gemm_support)
    decls = (f"float *__restrict v = ws, *__restrict mb = ws + {vsz}, "
             f"*__restrict sc = ws + {vsz + msz};")
    body = f"{decls}\n{call_in}\n{call_gemm}\n{call_out}\n"
    if half_form:
        body = _half_gemms(g, g16, base, support, half_form, decls,
                           (call_in, call_gemm, call_out), hscratch)
    spec = make_spec("conv_winograd", x_shape=xs, w_shape=ws_, y_shape=ys, pads=tuple(pads),
                     bias=bias, residual=residual, act=act, u_panel=upw, trans=trans,
                     direct_panel=None, half_rows=g16.rows if half_form else None)
    macs = g.n * g.m * g.ho * g.wo * g.c * 9        # the convolution's, not the GEMMs'
    kern = Kernel("conv3x3_winograd", params, indent(body, directives=True) + "\n", vsz + msz + scratch,
                  support, macs, spec=spec)

    def transform(wt: np.ndarray) -> np.ndarray:
        u = wg.weights(wt)
        return np.concatenate([pack_panels(u[e], upw) for e in range(wg.NE)])

    def transform16(wt: np.ndarray) -> np.ndarray:
        u = wg.weights(wt)
        return np.concatenate([g16.pack(u[e]) for e in range(wg.NE)])
    if half_form == "fp16":
        kern.params = tuple(Param(p.name, p.const, "float16") if p.name == "w" else p
                            for p in kern.params)
        return Lowered(kern, {1: transform16})
    if half_form == "auto":
        kern.params = kern.params[:2] + (Param("wh", True, "float16"),) + kern.params[2:]
        return Lowered(kern, {1: transform}, ((2, 1, transform16),))
    return Lowered(kern, {1: transform})


def _half_gemms(g: Geo, g16: "hg.HalfGemm", base: str, support, form: str, decls: str,
                calls, hscratch: int) -> str:
    """The body with the 36 GEMMs in float16 (half.gemm_function: V_e converted to float16
    in each thread's scratch, float32 sums): alone ("fp16"), or beside the float32 GEMMs
    ("auto"), the compiler's target keeping one (both compiled where Zvfh is, so neither's
    helpers go unused)."""
    call_in, call_gemm, call_out = calls
    hsz = g16.weight_halves                           # float16 weights per element e
    wname = "w" if form == "fp16" else "wh"
    fn, part = f"{base}_gemm16_fn", f"{base}_gemm16"
    support[fn] = hg.gemm_function(fn, g16)
    support[part] = f"""{FP16_GUARD}
static void {part}(const rvk_half *__restrict wh, const float *__restrict v,
    float *__restrict mb, float *__restrict sc, int e) {{   /* OUT_e = U_e . V_e in float16 */
    {fn}((const _Float16 *)wh + (ptrdiff_t)e * {hsz}, v + (ptrdiff_t)e * {g.c * g.t},
        mb + (ptrdiff_t)e * {g.m * g.t}, (_Float16 *)sc);
}}
#endif
"""
    task, text, call16 = _pool_trio(part, [("const rvk_half *", wname), ("const float *", "v"),
                                           ("float *", "mb")],
                                    wg.NE, wg.NE * g.m * g.t * g.c, hscratch)
    support[task] = f"{FP16_GUARD}\n{text}#endif\n"
    if form == "fp16":
        return fp16_only(f"{decls}\n{call_in}\n{call16}\n{call_out}")
    return f"{decls}\n{call_in}\n{fp16_or(call16, call_gemm)}{call_out}\n(void)wh;\n"
