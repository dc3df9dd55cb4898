"""Blocked, packed GEMM: the core shared by the Gemm, MatMul and Conv lowerings.

The core computes a P x Q tile grid of OUT = A'.B' over K, where A' ("row side", P) and B'
("column side", Q) are each one of
  * packed  - a constant pre-packed at build time into panels (see `pack_panels`),
  * strided - a runtime matrix, element (idx, k) at src[idx*si + k*sk], packed into `ws`,
  * custom  - a runtime operand with its own packing routine (conv's fused im2col),
  * row     - (row side, MR == 1 only) a runtime row read in place: a 1 x K panel *is* a row,
  * indirect - a runtime operand read in place, row k at src + off[k] (conv on a padded input).
A panel of width PW holds PW consecutive indices for a run of k: panel[k][PW], zero padded,
so the micro-kernel streams both operands contiguously.

The micro-kernel keeps an MR x NR accumulator array; written as plain C with constant trip
counts, gcc -O3 keeps it in registers (MR*NR/16 zmm on AVX-512) and vectorises along NR with one
broadcast per row: 12x32 reaches ~113 GFLOP/s here, the FMA peak. NR = 16 is never used: gcc
fully unrolls a 16-trip loop before vectorising and then SLP-vectorises it the wrong way.

`trans` in the epilogue says the roles are swapped: the row side indexes output *columns* (conv
with a tiny spatial size vectorises along output channels instead), so OUT is stored transposed.

Under RVV intrinsics (`#if defined(__riscv_v_intrinsic)`, see codegen/rvv.py) the micro-kernel,
the epilogue and the strided packer have vector bodies that read and write exactly the same
panels and tiles, so packing, tiling and the build-time weight transforms stay shared with x86.
The micro-kernel is register-blocked: per column strip of vl = min(NR - j0, VLMAX) columns and
row group of R rows it keeps R accumulators of LMUL registers and does, per k, one vle32 of b,
R scalar loads of a and R vfmacc.vf (bodies in gemm_rvv.py). LMUL is picked at run time from
VLEN (uk_plan): the widest strip that still holds NR columns with enough rows per group, so the
kernel's width scales with VLEN up to NR.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

import numpy as np

from ..act import Act, act_expr
from ..cfmt import flt
from ..kernel import Kernel, Lowered, Param, specified
from ..loops import cdiv
from ..rvv import GUARD, has_vact, header, vsetvlmax
from . import gemm_rvv as rvv

# --- Tuning for this host (Zen 4: AVX-512, 32 vector registers, 32 KiB L1d, 1 MiB L2). ---
VEC = 16            # floats per vector register
VREGS = 32          # vector registers: accumulators + NR/VEC B vectors + 1 broadcast must fit
NRS = (32, 48, 64)  # column widths gcc vectorises cleanly (see module doc about 16)
KC_MAX = 640        # k-block (balanced); swept 160..2400 on ResNet layers: 576-640 best. Fewer
                    # k-blocks = fewer passes over y; B is streamed from L2 either way here.
L2_BLOCK = 96 * 1024  # floats (384 KiB) of the runtime-packed side per k-block, kept in L2


def pack_panels(mat: np.ndarray, pw: int) -> np.ndarray:
    """(n, K) matrix -> flat [ceil(n/pw)][K][pw] panels, zero padded. Build-time weight packing:
    element (i, k) lands at `packed_index(i, k, K, pw)`."""
    n, k = mat.shape
    npan = cdiv(n, pw)
    buf = np.zeros((npan * pw, k), np.float32)
    buf[:n] = mat
    return np.ascontiguousarray(buf.reshape(npan, pw, k).transpose(0, 2, 1)).reshape(-1)


def packed_index(i, k, kdim: int, pw: int):
    """Flat position of element (i, k) of an (n, kdim) matrix packed by `pack_panels`."""
    return (i // pw) * kdim * pw + k * pw + i % pw


@dataclass(frozen=True)
class Side:
    """How one operand reaches the micro-kernel (see module doc)."""
    kind: str                 # "packed" | "strided" | "custom" | "row" | "indirect"
    si: int = 0               # strided/row: stride between indices
    sk: int = 1               # strided: stride along k
    # custom: (name, C def) of `void f(src, idx0, n, k0, kb, dst)` packing panels;
    # indirect: (name, C def) of `void f(k0, kb, int *off)` giving each k-row's offset
    packer: Optional[Tuple[str, str]] = None


@dataclass(frozen=True)
class Epilogue:
    """y[m*ldy + n] = act(alpha*acc + sum(scale*ptr[index])) over the output (m, n).

    With `grid`, the product's columns are cells of a padded row grid (wp wide) of which only
    the first wo of each row are outputs (conv computed on the padded input, see conv.py)."""
    ldy: int
    trans: bool = False
    alpha: float = 1.0
    addends: Tuple[Tuple[str, str, Optional[float]], ...] = ()  # (ptr, "index in m,n", scale)
    act: Optional[Act] = None
    grid: Optional[Tuple[int, int]] = None  # (wp, wo): column n is grid cell (n/wp, n%wp)

    def tag(self) -> str:
        # stable across processes (str hashes are salted), so generated source is reproducible
        return hashlib.sha1(repr(self).encode()).hexdigest()[:8]


def tile_eff(mr: int, nr: int) -> float:
    """Fraction of FMA peak of an MR x NR micro-kernel inside a conv/GEMM, fitted to
    measurements here: fewer than ~6 rows starve the FMA pipes (too few broadcasts per vector
    load), fewer than ~12 accumulators cannot hide the FMA latency, and wider column panels
    (more vector loads per k from L2) measured a few % slower than NR = 32."""
    v = mr * nr / VEC
    wide = {32: 1.0, 48: 0.97, 64: 0.95}.get(nr, 0.95)
    return min(1.0, 0.55 + 0.075 * mr) * min(1.0, 0.4 + 0.05 * v) * wide


def tile_cost(p: int, q: int, k: int, mr: int, nr: int, trans: bool) -> float:
    """Estimated time, in MACs at full rate, of a tiling: padded MACs over the tile efficiency
    plus the epilogue (vectorised along NR when not transposed, mostly scalar otherwise)."""
    tiles = cdiv(p, mr) * cdiv(q, nr)
    nkb = cdiv(k, KC_MAX)
    return tiles * mr * nr * (k / tile_eff(mr, nr) + nkb * (8 if trans else 3))


def choose_tile(p: int, q: int, k: int, trans: bool = False, mrs=None) -> Tuple[int, int]:
    """Cheapest (MR, NR) by tile_cost; `mrs` restricts the row counts tried."""
    best = None
    for nr in NRS:
        for mr in sorted(mrs or range(1, 15), reverse=True):   # ties: taller (fewer B passes)
            if mr * nr // VEC + nr // VEC + 1 > VREGS:
                continue
            c = tile_cost(p, q, k, mr, nr, trans)
            if best is None or c < best[0] - 1e-9:
                best = (c, mr, nr)
    return best[1], best[2]


# gcc must compile the micro-kernel on its own, for any kb and offsets: inlined into the driver,
# its heuristics stop fully unrolling the MR loop for MR > 8 (accumulators go to memory, 4x
# slower); constant-propagated (IPA-CP clones for a constant kb and offset table, as in the
# depthwise kernel) it unrolls k and "vectorises" with gathers. Hence noinline + noipa.
NOINLINE = """#ifndef RVK_NOINLINE
#if defined(__GNUC__) && !defined(__clang__)
#define RVK_NOINLINE __attribute__((noinline, noipa))
#elif defined(__GNUC__)
#define RVK_NOINLINE __attribute__((noinline))
#else
#define RVK_NOINLINE
#endif
#endif
"""


def ukernel(mr: int, nr: int, ind: str = "") -> Tuple[str, str]:
    """t[MR][NR] = sum_k a[k][MR] (x) b[k][NR] over kb steps of packed panels. With ind "a" or
    "b", that side is read in place: its row k starts at side + off[k] (conv on the padded
    input, where a k-row of the implicit im2col matrix is a shifted run of the input).

    Under RVV intrinsics the same panels are consumed by LMUL variants chosen at run time by
    VLEN (rvv_uk_plan); the portable body below is what every other compiler sees."""
    name = f"rvk_uk_{mr}x{nr}" + (f"_ind{ind}" if ind else "")
    arow = "a + off[k]" if ind == "a" else f"a + k * {mr}"
    brow = "b + off[k]" if ind == "b" else f"b + k * {nr}"
    offp = "const int *__restrict off, " if ind else ""
    offa = "off, " if ind else ""
    plan = rvv.uk_plan(mr, nr, ind)
    variants = "".join(rvv.uk_variant(f"{name}_m{L}", mr, nr, L, ind)
                       for L in sorted({L for _, L in plan}, reverse=True))
    # VLEN/32 = vsetvlmax(e32, m1); the last variant also takes any larger VLEN
    picks = [f"if (rvk_v <= {vlen // 32}) {name}_m{L}(kb, a, b, {offa}t);"
             for vlen, L in plan[:-1]] + [f"{name}_m{plan[-1][1]}(kb, a, b, {offa}t);"]
    dispatch = "\n  else ".join(picks)
    return name, NOINLINE + f"""{GUARD}
#include <riscv_vector.h>
{variants}#endif
static RVK_NOINLINE void {name}(int kb, const float *__restrict a,
    const float *__restrict b, {offp}float *__restrict t) {{
{GUARD}
  const size_t rvk_v = {vsetvlmax(1)};
  {dispatch}
#else
  float acc[{mr}][{nr}];
  for (int i = 0; i < {mr}; ++i)
    for (int j = 0; j < {nr}; ++j) acc[i][j] = 0.0f;
  /* per k: one broadcast of a per row, NR/VEC vector loads of b, MR*NR/VEC FMAs */
  for (int k = 0; k < kb; ++k) {{
    const float *__restrict ak = {arow};
    const float *__restrict bk = {brow};
    for (int i = 0; i < {mr}; ++i) {{
      const float ai = ak[i];
      for (int j = 0; j < {nr}; ++j) acc[i][j] += ai * bk[j];
    }}
  }}
  for (int i = 0; i < {mr}; ++i)
    for (int j = 0; j < {nr}; ++j) t[i * {nr} + j] = acc[i][j];
#endif
}}
"""


def strided_packer(pw: int, si: int, sk: int) -> Tuple[str, str]:
    """Packs idx in [i0, i0+n), k in [k0, k0+kb) of src[idx*si + k*sk] into pw-wide panels."""
    name = f"rvk_pack_{pw}_{si}_{sk}"
    # read along whichever stride is 1, so the copy is a contiguous vector load
    el = f"s[(ptrdiff_t)u * {si} + (ptrdiff_t)kk * {sk}]"
    kloop, uloop = "for (int kk = 0; kk < kb; ++kk)", f"for (int u = 0; u < {pw}; ++u)"
    outer, inner = (kloop, uloop) if si == 1 else (uloop, kloop)
    full = f"{outer}\n        {inner} d[kk * {pw} + u] = {el};"
    return name, f"""static void {name}(const float *__restrict src, int i0, int n, int k0, int kb,
    float *__restrict dst) {{
  for (int pp = 0; pp * {pw} < n; ++pp) {{
    const int c = n - pp * {pw} < {pw} ? n - pp * {pw} : {pw};
    float *__restrict d = dst + (ptrdiff_t)pp * kb * {pw};
    const float *__restrict s = src + (ptrdiff_t)(i0 + pp * {pw}) * {si} + (ptrdiff_t)k0 * {sk};
{rvv.strided_pack(pw, si, sk)}#else
    if (c == {pw}) {{
      {full}
    }} else {{
      for (int kk = 0; kk < kb; ++kk) {{
        for (int u = 0; u < c; ++u) d[kk * {pw} + u] = {el};
        for (int u = c; u < {pw}; ++u) d[kk * {pw} + u] = 0.0f;
      }}
    }}
#endif
  }}
}}
"""


def _ep_value(ep: Epilogue, v: str, m: str, n: str) -> str:
    expr = v if ep.alpha == 1.0 else f"{flt(ep.alpha)} * {v}"
    for ptr, idx, scale in ep.addends:
        term = f"{ptr}[{idx.format(m=m, n=n)}]"
        expr += f" + {term}" if scale in (None, 1.0) else f" + {flt(scale)} * {term}"
    return expr


def _ep_rows(ep: Epilogue, nr: int, rows: str, cols: str) -> str:
    """Epilogue of a tile whose columns are output columns (normal orientation): each row run
    is contiguous in t and y, so the passes vectorise. With a grid, tile column n is position
    (n / wp, n % wp) of a padded row grid; runs are cut at grid rows and columns >= wo dropped."""
    if ep.grid:
        wp, wo = ep.grid
        head = f"""for (int js = 0; js < {cols};) {{
    const int gn = j0 + js, gw = gn % {wp};
    const int len = {wp} - gw < {cols} - js ? {wp} - gw : {cols} - js;
    const int vl = gw >= {wo} ? 0 : ({wo} - gw < len ? {wo} - gw : len);
    const int yc = gn / {wp} * {wo} + gw;"""
        tail = "\n    js += len;\n  }"
    else:
        head, tail = f"{{\n    const int js = 0, vl = {cols}, yc = j0;", "\n  }"
    t, y, m = f"t[i * {nr} + js + u]", f"y[(ptrdiff_t)(i0 + i) * {ep.ldy} + yc + u]", "(i0 + i)"
    loop = f"for (int i = 0; i < {rows}; ++i)\n      for (int u = 0; u < vl; ++u)"
    return f"""{head}
    if (!first) {{
      {loop} {t} += {y};
    }}
    if (last) {{
      {loop} {{
        const float v = {_ep_value(ep, t, m, "(yc + u)")};
        {y} = {act_expr(ep.act, 'v')};
      }}
    }} else {{
      {loop} {y} = {t};
    }}{tail}"""


def _ep_cols(ep: Epilogue, nr: int, rows: str, cols: str) -> str:
    """Transposed orientation: tile rows are output columns, stored with stride ldy (scalar)."""
    if ep.grid:
        wp, wo = ep.grid
        pos = f"""const int gn = i0 + i;
      if (gn % {wp} >= {wo}) continue;
      const int n = gn / {wp} * {wo} + gn % {wp};"""
    else:
        pos = "const int n = i0 + i;"
    t, y = f"t[i * {nr} + j]", f"y[(ptrdiff_t)(j0 + j) * {ep.ldy} + n]"
    return f"""for (int j = 0; j < {cols}; ++j)
    for (int i = 0; i < {rows}; ++i) {{
      {pos}
      float v = {t};
      if (!first) v += {y};
      if (last) {{
        v = {_ep_value(ep, "v", "(j0 + j)", "n")};
        {y} = {act_expr(ep.act, 'v')};
      }} else {{
        {y} = v;
      }}
    }}"""


def epilogue(mr: int, nr: int, ep: Epilogue) -> Tuple[str, str]:
    """Stores tile t (MR x NR) at (i0, j0): accumulates onto y unless `first`, applies the
    fused epilogue when `last` (k-blocked products keep raw partial sums in y meanwhile).
    With RVV intrinsics (and an activation with a vector form) the runs are strip-mined."""
    name = f"rvk_ep_{mr}x{nr}_{ep.tag()}"
    ptrs = "".join(f"const float *__restrict {p}, " for p, _, _ in ep.addends)
    body = _ep_cols if ep.trans else _ep_rows
    portable = f"""  if (mr == {mr} && nr == {nr}) {{
  {body(ep, nr, str(mr), str(nr))}
  }} else {{
  {body(ep, nr, 'mr', 'nr')}
  }}"""
    if has_vact(ep.act):
        vec = "  " + (rvv.ep_cols if ep.trans else rvv.ep_rows)(ep, nr)
        portable = f"{GUARD}\n{vec}\n#else\n{portable}\n#endif"
    return name, f"""static void {name}(float *__restrict t, int i0, int j0, int mr, int nr,
    int first, int last, {ptrs}float *__restrict y) {{
{portable}
}}
"""


def kc_of(k: int) -> int:
    """k-block size: balanced blocks of at most KC_MAX (rounded to 8)."""
    nkb = cdiv(k, KC_MAX)
    return cdiv(cdiv(k, nkb), 8) * 8 if nkb > 1 else k


@dataclass
class Core:
    """An emitted GEMM driver: call `name(row side, column side, <addend ptrs>, y, ws)`."""
    name: str
    support: Dict[str, str] = field(default_factory=dict)
    workspace: int = 0


def _side_prep(side: Side, which: str, pw: int, kdim: int, ws: str,
               support: Dict[str, str]) -> Tuple[str, str, str]:
    """(statements per k-block, statements per row panel, expression of the panel pointer)."""
    src = "opa" if which == "a" else "opb"
    idx0, cnt = ("i0", "mr") if which == "a" else ("j0", "qb")
    pos = "i0" if which == "a" else "j"
    if side.kind == "packed":
        return "", "", f"{src} + (ptrdiff_t)({pos} / {pw}) * {kdim * pw} + (ptrdiff_t)k0 * {pw}"
    if side.kind == "row":
        return "", "", f"{src} + (ptrdiff_t)i0 * {side.si} + k0"
    if side.kind == "indirect":
        oname, ocode = side.packer
        support[oname] = ocode
        return f"{oname}(k0, kb, off);", "", f"{src} + {pos}"
    pname, pcode = strided_packer(pw, side.si, side.sk) if side.kind == "strided" else side.packer
    support[pname] = pcode
    prep = f"{pname}({src}, {idx0}, {cnt}, k0, kb, {ws});"
    if which == "a":
        return "", prep, ws
    return prep, "", f"{ws} + (ptrdiff_t)((j - j0) / {pw}) * kb * {pw}"


def core(tag: str, p: int, q: int, k: int, a: Side, b: Side, ep: Epilogue,
         mr: int, nr: int) -> Core:
    """Emit the blocked driver for OUT[p x q] = A'[p x k] . B'[k x q] with epilogue `ep`.

    Default loop order (_cols_blocked): column blocks (qb) > k blocks (kb) > row panels (MR) >
    column panels (NR). A runtime column side is packed once per (qb, kb) block sized to stay
    in L2; the MR x kb row panel is then reused from L1 by every column panel of the block
    (measured better here than the BLIS order, which needs kb small enough for a column panel
    to fit L1). An indirect side is not packed at all; its column blocks keep the rows read by
    one block L2-resident across the row panels. A runtime row side against a constant column
    side uses the mirrored order (_rows_blocked).
    """
    kc = kc_of(k)
    support: Dict[str, str] = header()     # RVV header first: helpers below may use it
    ind = "a" if a.kind == "indirect" else ("b" if b.kind == "indirect" else "")
    ukn, ukc = ukernel(mr, nr, ind)
    epn, epc = epilogue(mr, nr, ep)
    support[ukn], support[epn] = ukc, epc
    adds = "".join(f"const float *__restrict {x}, " for x, _, _ in ep.addends)
    args = "".join(f"{x}, " for x, _, _ in ep.addends)
    if a.kind in ("strided", "custom") and b.kind == "packed":
        loops, aptr, bptr, ws = _rows_blocked(p, q, k, kc, a, mr, nr, support)
    else:
        loops, aptr, bptr, ws = _cols_blocked(p, q, k, kc, a, b, mr, nr, support)
    call = f"""{ukn}(kb, {aptr}, {bptr}, {'off, ' if ind else ''}t);
          {epn}(t, i0, j, mr, nr, k0 == 0, k0 + kb == {k}, {args}y);"""
    name = "@NAME@"     # replaced below by a name that identifies the exact text
    support[name] = f"""static void {name}(const float *__restrict opa, const float *__restrict opb,
    {adds}float *__restrict y, float *__restrict ws) {{
  float t[{mr * nr}];
  {f"int off[{kc}];" if ind else ""}
  (void)ws;
{loops.replace("@CALL@", call)}
}}
"""
    # same shapes with another epilogue or operand kind is another function: hash the text
    text = support.pop(name)
    name = f"rvk_gemm_{tag}_{p}x{q}x{k}_{mr}x{nr}_{hashlib.sha1(text.encode()).hexdigest()[:8]}"
    support[name] = text.replace("@NAME@", name)
    return Core(name, support, ws)


def _cols_blocked(p, q, k, kc, a: Side, b: Side, mr, nr, support):
    """Column blocks (qb) > k blocks > [pack B block] > row panels > column panels."""
    if b.kind == "packed":
        qb = q
    else:
        qb = max(nr, min(cdiv(q, nr) * nr, (L2_BLOCK // kc) // nr * nr))
    ws_b = cdiv(qb, nr) * nr * kc if b.kind in ("strided", "custom") else 0
    ws_a = mr * kc if a.kind in ("strided", "custom") else 0
    bk, _, bptr = _side_prep(b, "b", nr, k, "ws", support)
    ak, ai, aptr = _side_prep(a, "a", mr, k, f"ws + {ws_b}", support)
    return f"""  for (int j0 = 0; j0 < {q}; j0 += {qb}) {{
    const int qb = {q} - j0 < {qb} ? {q} - j0 : {qb};
    for (int k0 = 0; k0 < {k}; k0 += {kc}) {{
      const int kb = {k} - k0 < {kc} ? {k} - k0 : {kc};
      {bk}{ak}
      for (int i0 = 0; i0 < {p}; i0 += {mr}) {{
        const int mr = {p} - i0 < {mr} ? {p} - i0 : {mr};
        {ai}
        for (int j = j0; j < j0 + qb; j += {nr}) {{
          const int nr = j0 + qb - j < {nr} ? j0 + qb - j : {nr};
          @CALL@
        }}
      }}
    }}
  }}""", aptr, bptr, ws_a + ws_b


def _rows_blocked(p, q, k, kc, a: Side, mr, nr, support):
    """Runtime row side, constant column side (transposed conv, Gemm with a weight B): row
    blocks (pb, packed into L2) > k blocks > column panels > row panels. Each constant column
    panel is then streamed from memory once per row block and k-block and reused from L2 by
    every row panel, instead of once per row panel (which made the transposed conv on a
    7x7 image read its 9 MiB of weights 7 times per k-block from L3)."""
    pb = max(mr, min(cdiv(p, mr) * mr, (L2_BLOCK // kc) // mr * mr))
    pname, pcode = strided_packer(mr, a.si, a.sk) if a.kind == "strided" else a.packer
    support[pname] = pcode
    bptr = f"opb + (ptrdiff_t)(j / {nr}) * {k * nr} + (ptrdiff_t)k0 * {nr}"
    aptr = f"ws + (ptrdiff_t)((i0 - ib) / {mr}) * kb * {mr}"
    return f"""  for (int ib = 0; ib < {p}; ib += {pb}) {{
    const int pb = {p} - ib < {pb} ? {p} - ib : {pb};
    for (int k0 = 0; k0 < {k}; k0 += {kc}) {{
      const int kb = {k} - k0 < {kc} ? {k} - k0 : {kc};
      {pname}(opa, ib, pb, k0, kb, ws);
      for (int j = 0; j < {q}; j += {nr}) {{
        const int nr = {q} - j < {nr} ? {q} - j : {nr};
        for (int i0 = ib; i0 < ib + pb; i0 += {mr}) {{
          const int mr = ib + pb - i0 < {mr} ? ib + pb - i0 : {mr};
          @CALL@
        }}
      }}
    }}
  }}""", aptr, bptr, cdiv(pb, mr) * mr * kc


# ------------------------------------------------------------------ Gemm / MatMul lowerings

_C_INDEX = {"scalar": "0", "row": "{m}", "col": "{n}"}


def _plan(m: int, n: int, k: int, b_const: bool):
    """Pick orientation and tile for Y[m,n] = A[m,k] B[k,n]; returns (trans, mr, nr, a, b)
    where a/b are the Sides of the core's row/column operands and trans means the core's row
    side is B^T (used when n is too small to fill vector columns but m is not)."""
    mr0, nr0 = choose_tile(m, n, k)
    mr1, nr1 = choose_tile(n, m, k, trans=True)
    if tile_cost(n, m, k, mr1, nr1, True) < tile_cost(m, n, k, mr0, nr0, False):
        bside = Side("packed") if b_const else Side("strided", si=1, sk=n)
        return True, mr1, nr1, bside, Side("strided", si=k, sk=1)
    aside = Side("row", si=k) if mr0 == 1 else Side("strided", si=k, sk=1)
    bside = Side("packed") if b_const else Side("strided", si=1, sk=n)
    return False, mr0, nr0, aside, bside


def _b_transform(trans: bool, mr: int, nr: int, k: int, n: int, nbatch: int):
    """Build-time packing of a constant B ([..., k, n]) into the panels its side reads."""
    pw = mr if trans else nr

    def fn(w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, np.float32).reshape(nbatch, k, n)
        return np.concatenate([pack_panels(w[i].T, pw) for i in range(nbatch)])
    return fn


def _call(trans: bool, name: str, aptr: str, bptr: str, rest: str) -> str:
    """Core call with operands in the core's order (row side first)."""
    return f"{name}({bptr}, {aptr}, {rest});" if trans else f"{name}({aptr}, {bptr}, {rest});"


@specified("gemm")
def gemm(M: int, N: int, K: int, *, b_const: bool, c_mode: Optional[str], alpha: float = 1.0,
         beta: float = 1.0, act: Optional[Act] = None) -> Lowered:
    """Y[M,N] = act(alpha * A[M,K] @ B[K,N] + beta * C); params a, b, [c], y."""
    trans, mr, nr, rs, cs = _plan(M, N, K, b_const)
    adds: Tuple = ()
    if c_mode is not None:
        if c_mode not in ("scalar", "row", "col", "full"):
            raise ValueError(f"gemm: unknown c_mode {c_mode!r}")
        idx = _C_INDEX.get(c_mode, f"{{m}} * {N} + {{n}}")
        adds = (("c", idx, beta),)
    ep = Epilogue(ldy=N, trans=trans, alpha=alpha, addends=adds, act=act)
    c = core("gemm", N if trans else M, M if trans else N, K, rs, cs, ep, mr, nr)
    params = [Param("a"), Param("b")] + ([Param("c")] if c_mode else []) + [Param("y", False)]
    rest = ("c, " if c_mode else "") + ("y, ws" if c.workspace else "y, (float *)0")
    body = "  " + _call(trans, c.name, "a", "b", rest) + "\n"
    kern = Kernel("gemm", tuple(params), body, c.workspace, c.support, M * N * K,
                  spec={"b_panel": (mr if trans else nr) if b_const else None})
    tr = {1: _b_transform(trans, mr, nr, K, N, 1)} if b_const else None
    return Lowered(kern, tr)


def matmul_dims(a_shape, b_shape):
    """(M, K, N, batch dims of a, b, y) of numpy.matmul: 1-D operands promoted, batch dims
    right-aligned and padded with 1 (broadcast)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) == 1:
        a_shape = (1,) + a_shape
    if len(b_shape) == 1:
        b_shape = b_shape + (1,)
    M, K = a_shape[-2:]
    N = b_shape[-1]
    nb = max(len(a_shape), len(b_shape)) - 2
    abat = (1,) * (nb - len(a_shape) + 2) + a_shape[:-2]
    bbat = (1,) * (nb - len(b_shape) + 2) + b_shape[:-2]
    ybat = tuple(max(x, y) for x, y in zip(abat, bbat))
    return M, K, N, abat, bbat, ybat


@specified("matmul")
def matmul(a_shape, b_shape, y_shape, *, b_const: bool) -> Lowered:
    """numpy.matmul with batch broadcasting (1-D operands per numpy rules); params a, b, y."""
    M, K, N, abat, bbat, ybat = matmul_dims(a_shape, b_shape)
    nb = len(ybat)
    assert int(np.prod(ybat, dtype=np.int64)) * M * N == int(np.prod(y_shape, dtype=np.int64))
    trans, mr, nr, rs, cs = _plan(M, N, K, b_const)
    ep = Epilogue(ldy=N, trans=trans)
    c = core("mm", N if trans else M, M if trans else N, K, rs, cs, ep, mr, nr)
    bsz = cdiv(N, mr if trans else nr) * (mr if trans else nr) * K if b_const else K * N
    lines, ind = [], "  "
    aoff, boff, yoff = [], [], []
    for d in range(nb):            # nested loops over batch dims; broadcast dims get stride 0
        v = f"i{d}"
        lines.append(f"{ind}for (int {v} = 0; {v} < {ybat[d]}; ++{v}) {{")
        ind += "  "
        sa = int(np.prod(abat[d + 1:], dtype=np.int64)) * M * K if abat[d] > 1 else 0
        sb = int(np.prod(bbat[d + 1:], dtype=np.int64)) * bsz if bbat[d] > 1 else 0
        sy = int(np.prod(ybat[d + 1:], dtype=np.int64)) * M * N
        aoff += [f"(ptrdiff_t){v} * {sa}"] if sa else []
        boff += [f"(ptrdiff_t){v} * {sb}"] if sb else []
        yoff.append(f"(ptrdiff_t){v} * {sy}")
    ap = " + ".join(["a"] + aoff)
    bp = " + ".join(["b"] + boff)
    yp = " + ".join(["y"] + yoff)
    rest = f"{yp}, " + ("ws" if c.workspace else "(float *)0")
    lines.append(ind + _call(trans, c.name, ap, bp, rest))
    for d in range(nb):
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    nbat = int(np.prod(ybat, dtype=np.int64))
    kern = Kernel("matmul", (Param("a"), Param("b"), Param("y", False)), "\n".join(lines) + "\n",
                  c.workspace, c.support, nbat * M * N * K,
                  spec={"b_panel": (mr if trans else nr) if b_const else None,
                        "b_batch_floats": bsz})
    nbb = int(np.prod(bbat, dtype=np.int64))
    tr = {1: _b_transform(trans, mr, nr, K, N, nbb)} if b_const else None
    return Lowered(kern, tr)
