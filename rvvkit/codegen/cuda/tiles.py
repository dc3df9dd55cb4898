"""Shared-memory tiled GEMM templates for the CUDA dialect.

A `Problem` is OUT[z][p][q] = sum_k A(z, p, k) * B(z, k, q) followed by a per-element epilogue,
with A and B given as C expressions (so conv's im2col happens inside the tile loads). Two
templates compute it:
  * `tiled`  - a block of 256 threads computes a BM x BN tile of OUT; per BK-slice of k it
               stages A and B in __shared__ arrays (loads coalesced along the operand's
               contiguous index, zero outside the matrix) and each thread accumulates a TM x TN
               register micro-tile. The next slice is fetched into registers while the current
               one is multiplied. Thread (tx, ty) owns rows ty + i*BM/TM and columns
               tx + j*BN/TN: the shared reads of a warp are broadcasts or distinct banks, and
               its stores are consecutive columns.
  * `skinny` - for P <= SKINNY_P rows (FC layers at batch 1): a block owns a strip of columns
               for all P rows and splits k among its threads (split-K inside the block): A's
               k-chunk is staged in shared memory, every B element is read once, coalesced,
               and the partial sums are reduced through shared memory in a fixed order.
Blocks are numbered on a 1-D grid (no 65535 limit on y/z): z outermost, then row tiles.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Tuple

from ...errors import ModelError

NT = 256            # threads per block of the GEMM templates
SKINNY_P = 8        # at most this many rows: the split-K template
MAX_BLOCKS = 2**31 - 1

UNROLL_NAME = "RVK_UNROLL"   # support key: the macro it defines
# `#pragma unroll` is nvcc's; the emulator's host compiler would warn about an unknown pragma.
UNROLL_TEXT = """#ifndef RVK_UNROLL
#if defined(__NVCC__)
#define RVK_UNROLL _Pragma("unroll")
#else
#define RVK_UNROLL
#endif
#endif
"""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


# 64x64 for big operands; 16x128 for few rows (early conv layers, small batch); 128x16 for few
# columns (tiny images at batch 1, matrix-vector products). The narrow tiles do 8 FMAs per 6
# shared loads (4x4: 16 per 8) and load more of A and B per output: COST weighs that in.
TILES = (Tile(64, 64, 16, 4, 4), Tile(16, 128, 16, 2, 4), Tile(128, 16, 16, 4, 2))
COST = {TILES[0]: 1.0, TILES[1]: 1.35, TILES[2]: 1.35}


@dataclass
class Operand:
    """How the tile loader reads one operand. `val(i, k)` is a C expression of the element at
    non-k index i and k (both in range when it is evaluated); `fast_k` says k is the operand's
    contiguous index (threads then map to consecutive k). Otherwise the non-k index is fixed
    per thread, and `pre(i)` gives statements evaluated once per thread for it (variables it
    declares must carry a prefix unique to the operand)."""
    fast_k: bool
    val: Callable[[str, str], str]
    pre: Callable[[str], str] = lambda i: ""


@dataclass
class Problem:
    tag: str                                   # fragment of the kernel name: conv, gemm, mm
    params: str                                # __global__ parameter list
    args: str                                  # launch arguments (host parameter names)
    p: int
    q: int
    k: int
    nz: int                                    # independent products (groups, batches)
    zpre: Callable[[str], str]                 # per-block statements given z
    a: Operand
    b: Operand
    ep_col: Callable[[str], str]               # statements per output column q
    ep_store: Callable[[str, str, str], str]   # statements storing value v at (p, q)


def choose_tile(p: int, q: int) -> Tile:
    """The tile with the least padded work, weighed by its relative cost (ties: the first)."""
    return min(TILES, key=lambda t: cdiv(p, t.bm) * t.bm * cdiv(q, t.bn) * t.bn * COST[t])


def named(tag: str, shape: str, text: str) -> Tuple[str, str]:
    """(name, text): `@NAME@` in text replaced by a name carrying the shapes and a text hash.
    The templates here are written two spaces a level, which keeps their deep loop nests
    readable in Python; the emitted code gets the four spaces of every other generated line."""
    text = four_spaces(text)
    h = hashlib.sha1(text.encode()).hexdigest()[:10]
    name = f"rvk_cu_{tag}_{shape}_{h}"
    return name, text.replace("@NAME@", name)


def _blocks(n: int, what: str) -> int:
    if n > MAX_BLOCKS:
        raise ModelError(f"CUDA {what}: {n} thread blocks exceed the grid limit")
    return n


def four_spaces(text: str) -> str:
    """Doubles each line's leading spaces: two-space template levels become four."""
    return "\n".join(" " * (len(ln) - len(ln.lstrip(" "))) + ln for ln in text.split("\n"))


def _ind(text: str, pad: str) -> str:
    return "\n".join(pad + ln if ln.strip() else ln for ln in text.strip("\n").split("\n"))


def _each_row(p: int, stmt: str, pad: str) -> str:
    """`stmt` (indexing rows as [m]) for the P rows of the skinny template, unrolled; one row
    is the statement itself at row 0, not a single-trip loop."""
    if p == 1:
        return pad + stmt.replace("[m]", "[0]")
    return f"{pad}RVK_UNROLL\n{pad}for (int m = 0; m < {p}; ++m) {stmt}"


def _plus(v: int) -> str:
    return f" + {v}" if v else ""


def _loader(x: str, op: Operand, bi: int, bk: int, lim: int, k: int, base: str
            ) -> Tuple[str, str, str, int]:
    """(per-thread setup, load of slice `kn` into registers, store into shared, count) for
    operand `x` ("a"/"b") whose tile spans bi non-k indices from `base`."""
    n = bi * bk // NT
    if op.fast_k:
        rows = NT // bk
        setup = [f"const int {x}k = tid % {bk};"]
        load, store = [f"const int {x}q = kn + {x}k;"], []
        for u in range(n):
            setup.append(f"const int {x}i{u} = {base} + tid / {bk}{_plus(u * rows)};")
            load.append(f"{x}r[{u}] = {x}i{u} < {lim} && {x}q < {k} ? "
                        f"{op.val(f'{x}i{u}', f'{x}q')} : 0.0f;")
            store.append(f"{x.upper()}s[{x}k][tid / {bk}{_plus(u * rows)}] = {x}r[{u}];")
    else:
        ks = NT // bi
        setup = [f"const int {x}i = {base} + tid % {bi};", f"const bool {x}ok = {x}i < {lim};"]
        pre = op.pre(f"{x}i")
        setup += [pre] if pre else []
        load, store = [], []
        for u in range(n):
            load.append(f"{{ const int {x}q = kn + tid / {bi}{_plus(u * ks)};\n"
                        f"  {x}r[{u}] = {x}ok && {x}q < {k} ? {op.val(f'{x}i', f'{x}q')} "
                        f": 0.0f; }}")
            store.append(f"{x.upper()}s[tid / {bi}{_plus(u * ks)}][tid % {bi}] = {x}r[{u}];")
    return "\n".join(setup), "\n".join(load), "\n".join(store), n


def tiled(pr: Problem, t: Tile) -> Tuple[str, str, str]:
    """(kernel name, kernel text, launch statement) of the shared-memory tiled template."""
    assert t.threads == NT
    tp, tq = cdiv(pr.p, t.bm), cdiv(pr.q, t.bn)
    blocks = _blocks(tp * tq * pr.nz, pr.tag)
    ry, rx = t.bm // t.tm, t.bn // t.tn
    asetup, aload, astore, na = _loader("a", pr.a, t.bm, t.bk, pr.p, pr.k, "i0")
    bsetup, bload, bstore, nb = _loader("b", pr.b, t.bn, t.bk, pr.q, pr.k, "j0")
    # a k-contiguous loader writes a column of the shared tile: pad rows against bank conflicts
    pa, pb = int(pr.a.fast_k), int(pr.b.fast_k)
    zdecl = f"const int z = blockIdx.x / {tp * tq};\n" if pr.nz > 1 else "const int z = 0;\n"
    zpre = pr.zpre("z")
    text = f"""__global__ void @NAME@({pr.params}) {{
  __shared__ float As[{t.bk}][{t.bm + pa}];
  __shared__ float Bs[{t.bk}][{t.bn + pb}];
  const int tid = threadIdx.x;
  const int bt = blockIdx.x % {tp * tq};
  const int i0 = bt / {tq} * {t.bm}, j0 = bt % {tq} * {t.bn};
  const int tx = tid % {rx}, ty = tid / {rx};
{_ind(zdecl + zpre, "  ")}
  (void)z;
{_ind(asetup, "  ")}
{_ind(bsetup, "  ")}
  float acc[{t.tm}][{t.tn}];
  RVK_UNROLL
  for (int i = 0; i < {t.tm}; ++i) {{
    RVK_UNROLL
    for (int j = 0; j < {t.tn}; ++j) acc[i][j] = 0.0f;
  }}
  float ar[{na}], br[{nb}];
  {{
    const int kn = 0;
{_ind(aload + chr(10) + bload, "    ")}
  }}
  for (int k0 = 0; k0 < {pr.k}; k0 += {t.bk}) {{
{_ind(astore + chr(10) + bstore, "    ")}
    __syncthreads();
    if (k0 + {t.bk} < {pr.k}) {{
      const int kn = k0 + {t.bk};
{_ind(aload + chr(10) + bload, "      ")}
    }}
    RVK_UNROLL
    for (int kk = 0; kk < {t.bk}; ++kk) {{
      float av[{t.tm}], bv[{t.tn}];
      RVK_UNROLL
      for (int i = 0; i < {t.tm}; ++i) av[i] = As[kk][ty + i * {ry}];
      RVK_UNROLL
      for (int j = 0; j < {t.tn}; ++j) bv[j] = Bs[kk][tx + j * {rx}];
      RVK_UNROLL
      for (int i = 0; i < {t.tm}; ++i) {{
        RVK_UNROLL
        for (int j = 0; j < {t.tn}; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }}
    }}
    __syncthreads();
  }}
  RVK_UNROLL
  for (int j = 0; j < {t.tn}; ++j) {{
    const int q = j0 + tx + j * {rx};
    if (q >= {pr.q}) continue;
{_ind(pr.ep_col("q"), "    ")}
    RVK_UNROLL
    for (int i = 0; i < {t.tm}; ++i) {{
      const int p = i0 + ty + i * {ry};
      if (p >= {pr.p}) continue;
      const float v = acc[i][j];
{_ind(pr.ep_store("p", "q", "v"), "      ")}
    }}
  }}
}}
"""
    shape = f"{pr.p}x{pr.q}x{pr.k}" + (f"x{pr.nz}" if pr.nz > 1 else "") + f"_t{t.bm}x{t.bn}"
    name, text = named(pr.tag, shape, text)
    return name, text, f"RVK_LAUNCH({name}, dim3({blocks}), dim3({NT}), ({pr.args}));"


def skinny(pr: Problem) -> Tuple[str, str, str]:
    """(kernel name, kernel text, launch statement) of the split-K template (P <= SKINNY_P,
    A read k-contiguously). BN columns x S k-lanes per block; S lanes stride through each
    k-chunk so that a warp reads BN consecutive columns of one k row."""
    assert pr.p <= SKINNY_P and pr.a.fast_k and not pr.b.fast_k
    bn = 32 if cdiv(pr.q, 32) * pr.nz >= 128 else 16
    s = NT // bn
    kc = min(256, max(1, cdiv(pr.k, 32)) * 32)       # k-chunk staged in shared memory
    tq = cdiv(pr.q, bn)
    blocks = _blocks(tq * pr.nz, pr.tag)
    zdecl = f"const int z = blockIdx.x / {tq};\n" if pr.nz > 1 else "const int z = 0;\n"
    bpre = pr.b.pre("bi")
    text = f"""__global__ void @NAME@({pr.params}) {{
  __shared__ float As[{pr.p}][{kc}];
  __shared__ float Red[{s}][{pr.p}][{bn}];
  const int tid = threadIdx.x, tx = tid % {bn}, ts = tid / {bn};
  const int j0 = blockIdx.x % {tq} * {bn};
{_ind(zdecl + pr.zpre("z"), "  ")}
  (void)z;
  const int bi = j0 + tx;
  const bool bok = bi < {pr.q};
{_ind(bpre, "  ") if bpre else ""}
  float acc[{pr.p}];
{_each_row(pr.p, "acc[m] = 0.0f;", "  ")}
  for (int k0 = 0; k0 < {pr.k}; k0 += {kc}) {{
    for (int e = tid; e < {pr.p * kc}; e += {NT}) {{
      const int m = e / {kc}, kq = k0 + e % {kc};
      As[m][e % {kc}] = kq < {pr.k} ? {pr.a.val("m", "kq")} : 0.0f;
    }}
    __syncthreads();
    if (bok) {{
      const int kend = {pr.k} - k0 < {kc} ? {pr.k} - k0 : {kc};
      for (int kk = ts; kk < kend; kk += {s}) {{
        const float bv = {pr.b.val("bi", "(k0 + kk)")};
{_each_row(pr.p, "acc[m] = fmaf(As[m][kk], bv, acc[m]);", "        ")}
      }}
    }}
    __syncthreads();
  }}
{_each_row(pr.p, "Red[ts][m][tx] = acc[m];", "  ")}
  __syncthreads();
  for (int e = tid; e < {pr.p * bn}; e += {NT}) {{
    const int p = e / {bn}, q = j0 + e % {bn};
    if (q >= {pr.q}) continue;
    float v = 0.0f;
    for (int l = 0; l < {s}; ++l) v += Red[l][p][e % {bn}];
{_ind(pr.ep_col("q"), "    ")}
{_ind(pr.ep_store("p", "q", "v"), "    ")}
  }}
}}
"""
    shape = f"{pr.p}x{pr.q}x{pr.k}" + (f"x{pr.nz}" if pr.nz > 1 else "") + f"_s{bn}"
    name, text = named(pr.tag + "_splitk", shape, text)
    return name, text, f"RVK_LAUNCH({name}, dim3({blocks}), dim3({NT}), ({pr.args}));"
