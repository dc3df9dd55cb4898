"""Conv2d (NCHW) lowering onto the packed GEMM core of `gemm/packed.py` (depthwise: depthwise.py).

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
3x3 stride-1 convs may take Winograd instead (winograd_transforms.py): everywhere, or on RISC-V only
with the direct GEMM kept for other targets in the same kernel (by_target).
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from ....ops.activations import Act
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, make_spec
from ...loops import cdiv
from .depthwise import dwconv
from .im2col import PhaseGrid, im2col_packer
from . import half as half
from . import winograd as winograd
from ...precision import precision, wants_half
from ..gemm.core import core
from ..gemm.spec import Epilogue, Side
from ..gemm.tiling import L2_BLOCK, choose_tile, kc_of, pack_panels, tile_cost


COST_RUN = 300.0
COST_ELEM = 4.0
COST_K = {"im2col": 320.0, "pointwise": 32.0}   # per k-row per packer call (set-up of a row)
COST_ROWPACK = 48.0   # per fixed-length panel copy of the row packer
# per k step of a tile whose rows are read in place (grid, transposed) after the row's first
# column panel: each step fetches its offset and MR scalars from a different channel plane, a
# new cache line per k, so with k large the row panel is not L1-resident when the next column
# panel re-reads it. Fitted to resnet50's 1x1 stride-2 layers (16-64 column panels), where the
# grid cost 6-7 % more RVV instructions (QEMU, VLEN 128-1024) and 15-50 % more host time
# (Xeon, AVX-512) than the row packer, which the model without it rated the same; with one
# column panel (densenet's 3x3 convs to 32 channels) the grid measured fastest on the host.
COST_GRID_ROWS = 14.0


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
            elif path == "rowpack":
                pack = split_cost + k * hw * COST_ROWPACK / pw
            else:
                pack = split_cost + (COST_GRID_ROWS * cdiv(p, mr) * (cdiv(q, nr) - 1) * k
                                     if trans else 0.0)
            out.append((tile_cost(p, q, k, mr, nr, trans) + pack, path, trans, mr, nr, cols))
    return min(out)


def use_winograd(direct_cost: float, winograd_cost: float, direct_off_riscv: bool) -> str:
    """Where a 3x3 stride-1 conv takes the Winograd kernel: "everywhere", "riscv" (the direct
    GEMM on other targets, see by_target) or "nowhere"; by the costs (fitted to RVV) and
    whether the host prefers the direct form, or as $RVVKIT_WINOGRAD says (off: nowhere, on:
    everywhere it applies, riscv: on RISC-V only; for comparisons and tests)."""
    mode = os.environ.get("RVVKIT_WINOGRAD", "auto").strip().lower()
    if mode in ("off", "0", "no"):
        return "nowhere"
    if mode in ("on", "1", "yes"):
        return "everywhere"
    if mode == "riscv":
        return "riscv"
    if winograd_cost >= direct_cost:
        return "nowhere"
    return "riscv" if direct_off_riscv else "everywhere"


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
    _, _, kh, kw = ws_
    pointwise = (kh, kw) == (1, 1) and tuple(strides) == (1, 1) and not any(pads)
    pg = PhaseGrid(xs, ws_, ys, strides, pads, dil)
    hw, k = ys[2] * ys[3], ws_[1] * kh * kw
    plan = _plan_conv(ws_[0] // group, hw, k, ys[3], pg.cols, pointwise, pg.size * COST_ELEM)
    direct = _direct_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act, pg,
                          plan[1:])
    where = "nowhere"
    if winograd.eligible(xs, ws_, group, strides, dil):
        where = use_winograd(plan[0], winograd.cost(xs, ws_, ys, pads),
                             winograd.prefers_direct_off_riscv(xs, ws_, ys, pads))
    # a conv that Winograd takes on RISC-V keeps it in a float16 build, with float16 GEMMs:
    # squeezenet under the counting plugin (K1 profile, VLEN 256) needed 44.9 M weighted
    # instructions with float32 Winograd against 58.6 M with every 3x3 in the float16 direct form
    half_form = precision() if wants_half() and half.eligible(group, act) else None
    if half_form and where == "nowhere":
        geometry = (strides, pads, dil)
        if half_form == "fp16":
            return half.half_only(xs, ws_, ys, geometry, bias, residual, act,
                                  _params(bias, residual),
                                  _spec(xs, ws_, ys, group, strides, pads, dil, bias, residual,
                                        act, None))
        return half.combine(xs, ws_, ys, geometry, bias, residual, act, direct())
    if where == "nowhere":
        return direct()
    wino = winograd.winograd_conv(xs, ws_, ys, pads, bias, residual, act,
                                  _params(bias, residual), half_form)
    if half_form == "fp16":     # float16 only: no other target runs it
        return wino
    return wino if where == "everywhere" else by_target(wino, direct("wd"))


def by_target(wino: Lowered, direct: Lowered) -> Lowered:
    """One kernel carrying both forms of a 3x3 conv, and both layouts of its weights (the
    direct form's as parameter `wd`): Winograd where the code is compiled for RISC-V, the direct
    GEMM elsewhere. Under QEMU and on boards Winograd needs 1.5-2.5x fewer instructions; an x86
    host's direct GEMM runs near its peak, and Winograd's weights (four times the direct ones)
    streamed for few tiles cost it more than the multiplications save. One artifact serves every
    target, so the choice is the compiler's, not the build's."""
    wk, dk = wino.kernel, direct.kernel
    # both branches are compiled on every target (neither's helpers go unused); the constant
    # condition leaves one in the object code
    body = (f"#if defined(__riscv)\nconst int winograd = 1;\n#else\nconst int winograd = 0;\n"
            f"#endif\nif (winograd) {{\n{wk.body.rstrip()}\n}} else {{\n{dk.body.rstrip()}\n}}\n")
    support = dict(dk.support)
    support.update(wk.support)
    params = wk.params[:2] + (Param("wd"),) + wk.params[2:]
    spec = dict(wk.spec, direct_panel=dk.spec["w_panel"])
    kern = Kernel("conv3x3_riscv_winograd", params, indent(body) + "\n",
                  max(wk.workspace, dk.workspace), support, wk.macs, spec=spec)
    # wd goes in at 2 first; the Winograd kernel's own extra forms (its float16 U) move up one
    extra = ((2, 1, direct.transforms[1]),) + tuple((pos + 1 if pos >= 2 else pos, src, fn)
                                                    for pos, src, fn in wino.extra_weights)
    return Lowered(kern, dict(wino.transforms), extra)


def _direct_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act, pg: PhaseGrid,
                 plan):
    """The conv as one GEMM by `plan` (path, trans, mr, nr, cols of _plan_conv), lowered when
    called: lower(wname="w") -> Lowered, its packed weights the parameter `wname`."""
    n, cin, h, w = xs
    m, cg, kh, kw = ws_
    _, _, ho, wo = ys
    mg, hw, k = m // group, ho * wo, cg * kh * kw
    path, trans, mr, nr, cols = plan
    pointwise = path == "pointwise"

    def lower(wname: str = "w") -> Lowered:
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

        # per image n and group g (loops of one trip are left out, their index fixed at 0)
        ng = (("n", m, n), ("g", mg, group))
        y_at = _at("y", ng, hw)
        if path in ("grid", "rowpack"):
            pname, pcode = pg.split(xpw if path == "grid" else 0)
            c.support[pname] = pcode
            pre = f"{pname}({_at('x', [('n', 1, n)], cin * h * w)}, ws);\n"
            xp = _at("ws", [("g", 1, group)], cg * pg.plane)
        else:
            pre, xp = "", _at("x", (("n", cin, n), ("g", cg, group)), h * w)
        wpt = _at(wname, [("g", 1, group)], wgrp)
        args = f"{xp}, {wpt}" if trans else f"{wpt}, {xp}"
        args += (f", {_at('b', [('g', mg, group)])}" if bias else "")
        args += (f", {_at('r', ng, hw)}" if residual else "")
        args += f", {y_at}, " + (f"ws + {xpad}" if c.workspace else "(float *)0")
        per_group = f"{c.name}({args});"
        if group > 1:
            per_group = f"for (int g = 0; g < {group}; ++g) {{\n{indent(per_group)}\n}}"
        body = pre + per_group
        if n > 1:
            body = f"for (int n = 0; n < {n}; ++n) {{\n{indent(body)}\n}}"
        hint = "conv1x1" if pointwise else "conv2d"
        kern = Kernel(hint, _params(bias, residual), indent(body) + "\n", c.workspace + xpad,
                      c.support, n * m * hw * k,
                      spec=_spec(xs, ws_, ys, group, strides, pads, dil, bias, residual, act,
                                 wpw))
        return Lowered(kern, {1: transform})
    return lower


def _at(ptr: str, terms, scale: int = 1) -> str:
    """`ptr` advanced by scale * sum(var * coef) over terms (var, coef, trips of its loop);
    vars of single-trip loops are left out (fixed at 0), so are their loops."""
    idx = [(v, c) for v, c, trips in terms if trips > 1 and c]
    if not idx:
        return ptr
    inner = " + ".join(v if c == 1 else f"{v} * {c}" for v, c in idx)
    off = f"(ptrdiff_t){inner}" if len(idx) == 1 and idx[0][1] == 1 else f"(ptrdiff_t)({inner})"
    return f"{ptr} + {off}" + (f" * {scale}" if scale != 1 else "")


def _spec(xs, ws_, ys, group, strides, pads, dil, bias, residual, act, w_panel):
    return make_spec("conv", x_shape=xs, w_shape=ws_, y_shape=ys, group=group, strides=strides,
                     pads=pads, dilations=dil, bias=bias, residual=residual, act=act,
                     w_panel=w_panel, half_rows=None)


def _params(bias: bool, residual: bool):
    return tuple([Param("x"), Param("w")] + ([Param("b")] if bias else []) +
                 ([Param("r")] if residual else []) + [Param("y", False)])


def conv2d(x_shape, w_shape, y_shape, *, group: int, strides, pads, dilations, bias: bool,
           residual: bool, act: Optional[Act]) -> Lowered:
    """y = act(conv(x, w) + b[m] + r). Params: x, w, [b], [r], y. w is pre-packed (transform 1)
    except for the depthwise kernel, which reads the ONNX (C, 1, kh, kw) layout directly.
    spec["w_panel"] is the panel width of the packed weights (see `packed_index`), or None."""
    xs, ws_, ys = (tuple(int(v) for v in s) for s in (x_shape, w_shape, y_shape))
    strides, pads, dil = tuple(strides), tuple(pads), tuple(dilations)
    if group > 1 and group == xs[1] == ys[1]:
        return dwconv(xs, ws_, ys, strides, pads, dil, bias, residual, act,
                      _params(bias, residual),
                      _spec(xs, ws_, ys, group, strides, pads, dil, bias, residual, act, None))
    return _gemm_conv(xs, ws_, ys, group, strides, pads, dil, bias, residual, act)
