"""x86 forms of MatMulNBits with int8 activations (nbits_int8.py): one row, or a pair of a
prompt chunk's rows sharing every load and nibble split, over a part's byte columns 32 at a
time, on the panels of nbits_layout.py (code (t, j) at qp[t * PAIRS + j]). They compute the
integer sums of the portable form exactly and apply the scales in its order, so a host gives
the portable form's results bit for bit (and so the RVV form's).

AVX2, two k at a time: the bytes of rows t and t + 1 are interleaved (vpunpck[lh]bw), so each
16-bit lane holds one column's pair, which one multiply-add (vpmaddubsw at 4 bits, vpmaddwd
at 8) takes against the broadcast activation pair (aq[t], aq[t + 1]).
- 4 bits (blocks up to nbits_int8.WRAP_BLOCK): nibbles 0..15 times int8 activations, a pair
  within 2 * 15 * 128, summed in 16 bits that may wrap: the block's sum less 8 * sum(aq) is
  the exact value, as in the other forms.
- 8 bits: the stored codes (code - 128, int8) sign-extended to 16 bits, pairs summed into
  32-bit lanes (vpmaddwd). vpmaddubsw would saturate here (2 * 255 * 127 > 2^15), and its
  sign trick cannot negate the code -128.
The interleave works within each 128-bit half, so the lanes of the low-k register hold
columns 0-7 and 16-23 of the 32, the high-k one 8-15 and 24-31: the sums are taken apart in
groups of 8 columns in column order before any float arithmetic.

VNNI (x86.VNNI_GUARD), four k at a time: rows t .. t + 3 interleaved into quads, one
vpdpbusd (unsigned codes times int8 activations, four products into an int32 lane, exact)
per 8 columns; at 8 bits the codes are made unsigned (code = stored ^ 0x80) and 128 * sum(aq)
taken away after."""
from __future__ import annotations

from typing import Dict, List

from ...cfmt import indent
from ...x86 import VNNI_GUARD
from .nbits_layout import PAIRS, at_column, halves_of

VEC = 32   # byte columns per vector (one ymm of codes)

_SCALES: Dict[str, str] = {
    "float32": "_mm256_loadu_ps(scales + {i})",
    # the 16 bits are the top half of a float32
    "bfloat16": ("_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128("
                 "(const __m128i *)(const void *)(scales + 2 * ({i})))), 16))"),
    "float16": "_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)"
               "((const rvk_half *)(const void *)scales + ({i}))))",
}


def scale_load(index: str, kind: str) -> str:
    """8 scales as floats from element `index` of the stored scales (at_column)."""
    return _SCALES[kind].format(i=index)


def supported(bits: int, block: int, wrap_block: int) -> bool:
    """Whether the x86 forms cover this layout: 8 bits, or 4 bits in the wrapping form."""
    return bits == 8 or block <= wrap_block


def _group(d32: str, y: str, at: str, r: str, zp_kind: str, scales: str) -> str:
    """C: 8 columns' block sums `d32` (__m256i, int32, column order) of row suffix `r` into
    y[0..7], their scales and zero points from index `at` (at_column): y += scale * ((d -
    zp * asum) * sa), the portable form's operations."""
    zp = (f"\n    f = _mm256_fnmadd_ps(_mm256_loadu_ps(zp + {at}), asum_f{r}, f);"
          if zp_kind else "")
    return f"""{{
    __m256 f = _mm256_cvtepi32_ps({d32});{zp}
    f = _mm256_mul_ps(f, sa_f{r});
    _mm256_storeu_ps({y}, _mm256_fmadd_ps({scale_load(at, scales)}, f,
                                          _mm256_loadu_ps({y})));
}}"""


def _loads(block: int, step: int) -> str:
    """C: the k loop of the block, `step` rows t.. of the panel loaded as r0..; the body is
    the placeholder BODY."""
    loads = "\n".join(f"    const __m256i r{u} = _mm256_loadu_si256((const __m256i *)"
                      f"(const void *)(qg + (t + {u}) * {PAIRS}));" for u in range(step))
    return f"""for (long t = blk * {block}; t < blk * {block} + {block}; t += {step}) {{
{loads}
BODY
}}
"""


def _avx2_4(block: int, rs: List[str]) -> str:
    """C (AVX2, 4 bits): per row r the exact block sums lo<r>0..3 / hi<r>0..3 (int32,
    column order)."""
    zeros = ", ".join(f"s{r}_{u} = _mm256_setzero_si256()" for r in rs for u in range(4))
    shared = """    const __m256i p0 = _mm256_unpacklo_epi8(r0, r1), p1 = _mm256_unpackhi_epi8(r0, r1);
    const __m256i n0 = _mm256_and_si256(p0, m15), n1 = _mm256_and_si256(p1, m15);
    const __m256i n2 = _mm256_and_si256(_mm256_srli_epi16(p0, 4), m15);
    const __m256i n3 = _mm256_and_si256(_mm256_srli_epi16(p1, 4), m15);"""
    per_row = "\n".join(
        f"    const __m256i a{r} = _mm256_set1_epi16((short)(uint16_t)((uint8_t)aq{r}[t] |\n"
        f"        (uint16_t)(uint8_t)aq{r}[t + 1] << 8));\n" +
        "\n".join(f"    s{r}_{u} = _mm256_add_epi16(s{r}_{u}, _mm256_maddubs_epi16(n{u}, a{r}));"
                  for u in range(4)) for r in rs)
    widen = "".join(f"""const __m256i z8{r} = _mm256_set1_epi16((short)(8 * asum{r}[blk]));
const __m256i d{r}_0 = _mm256_sub_epi16(s{r}_0, z8{r}), d{r}_1 = _mm256_sub_epi16(s{r}_1, z8{r});
const __m256i d{r}_2 = _mm256_sub_epi16(s{r}_2, z8{r}), d{r}_3 = _mm256_sub_epi16(s{r}_3, z8{r});
""" + "".join(f"""const __m256i {h}{r}_0 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(d{r}_{a}));
const __m256i {h}{r}_1 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(d{r}_{b}));
const __m256i {h}{r}_2 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(d{r}_{a}, 1));
const __m256i {h}{r}_3 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(d{r}_{b}, 1));
""" for h, a, b in (("lo", 0, 1), ("hi", 2, 3))) for r in rs)
    return f"__m256i {zeros};\n" + _loads(block, 2).replace("BODY", shared + "\n" + per_row) \
        + widen


def _avx2_8(block: int, rs: List[str]) -> str:
    """C (AVX2, 8 bits): per row r the block's int32 sums lo<r>0..3 (column order)."""
    zeros = ", ".join(f"lo{r}_{u} = _mm256_setzero_si256()" for r in rs for u in range(4))
    shared = """    const __m256i p0 = _mm256_unpacklo_epi8(r0, r1), p1 = _mm256_unpackhi_epi8(r0, r1);
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p0));
    const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p1));
    const __m256i w2 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p0, 1));
    const __m256i w3 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p1, 1));"""
    per_row = "\n".join(
        f"    const __m256i a{r} = _mm256_set1_epi32((int)(uint32_t)((uint16_t)(int16_t)aq{r}[t] |\n"
        f"        (uint32_t)(uint16_t)(int16_t)aq{r}[t + 1] << 16));\n" +
        "\n".join(f"    lo{r}_{u} = _mm256_add_epi32(lo{r}_{u}, _mm256_madd_epi16(w{u}, a{r}));"
                  for u in range(4)) for r in rs)
    return f"__m256i {zeros};\n" + _loads(block, 2).replace("BODY", shared + "\n" + per_row)


# The quads' accumulators (qa, qb, qc, qd) into column order: 0-7, 8-15, 16-23, 24-31.
_ORDER = ["_mm256_permute2x128_si256({0}, {1}, 0x20)", "_mm256_permute2x128_si256({2}, {3}, 0x20)",
          "_mm256_permute2x128_si256({0}, {1}, 0x31)", "_mm256_permute2x128_si256({2}, {3}, 0x31)"]
_QUADS = """    const __m256i l01 = _mm256_unpacklo_epi8(r0, r1), h01 = _mm256_unpackhi_epi8(r0, r1);
    const __m256i l23 = _mm256_unpacklo_epi8(r2, r3), h23 = _mm256_unpackhi_epi8(r2, r3);
    const __m256i qa = _mm256_unpacklo_epi16(l01, l23), qb = _mm256_unpackhi_epi16(l01, l23);
    const __m256i qc = _mm256_unpacklo_epi16(h01, h23), qd = _mm256_unpackhi_epi16(h01, h23);"""


def _vnni(block: int, bits: int, rs: List[str]) -> str:
    """C (VNNI): per row r the exact block sums lo<r>0..3 (and at 4 bits hi<r>0..3), int32,
    column order: quads (qa: columns 0-3 and 16-19, qb 4-7 / 20-23, qc 8-11 / 24-27, qd
    12-15 / 28-31) against the row's activations aq[t .. t + 3] in every lane."""
    if bits == 4:
        kinds = {"lo": "_mm256_and_si256({q}, m15)",
                 "hi": "_mm256_and_si256(_mm256_srli_epi16({q}, 4), m15)"}
        zero = "8"
    else:
        kinds = {"lo": "_mm256_xor_si256({q}, m80)"}
        zero = "128"
    operands = "\n".join(f"    const __m256i {h}_{x} = {e.format(q='q' + x)};"
                         for h, e in kinds.items() for x in "abcd")
    zeros = ", ".join(f"v{h}{r}_{x} = _mm256_setzero_si256()" for r in rs for h in kinds
                      for x in "abcd")
    per_row = "\n".join(
        f"""    int32_t a4{r};
    memcpy(&a4{r}, aq{r} + t, sizeof a4{r});
    const __m256i a{r} = _mm256_set1_epi32(a4{r});
""" + "\n".join(f"    v{h}{r}_{x} = RVK_DPBUSD(v{h}{r}_{x}, {h}_{x}, a{r});"
                for h in kinds for x in "abcd") for r in rs)
    out = "".join(
        f"const __m256i z{r} = _mm256_set1_epi32({zero} * asum{r}[blk]);\n" +
        "".join(f"const __m256i {h}{r}_{u} = _mm256_sub_epi32("
                f"{_ORDER[u].format(*(f'v{h}{r}_{x}' for x in 'abcd'))}, z{r});\n"
                for h in kinds for u in range(4)) for r in rs)
    body = _QUADS + "\n" + operands + "\n" + per_row
    return f"__m256i {zeros};\n" + _loads(block, 4).replace("BODY", body) + out


def _sums(block: int, bits: int, rs: List[str]) -> str:
    avx2 = _avx2_4(block, rs) if bits == 4 else _avx2_8(block, rs)
    return f"{VNNI_GUARD}\n{_vnni(block, bits, rs)}#else\n{avx2}#endif\n"


def vector_part(bits: int, block: int, nb: int, zp_kind: str, scales: str, rows: int = 1,
                into: str = "y{h}") -> str:
    """C: the whole vectors of 32 byte columns of this part for `rows` rows: row r's (aq<r>,
    sa<r>, asum<r>; no suffix for one row) block results added into `into` (a C array
    expression, {h} the half "lo"/"hi", {r} the row) at [c]; declares nv, the columns taken.
    One row: the `vector` statements of nbits_layout.portable_part."""
    rs = [""] if rows == 1 else [str(r) for r in range(rows)]
    halves = ["lo", "hi"][:halves_of(bits)]
    groups = "\n".join(
        _group(f"{h}{r}_{u}", f"{into.format(h=h, r=r)} + g + {8 * u}",
               at_column(half, f"g + {8 * u}", nb, bits), r, zp_kind, scales)
        for r in rs for half, h in enumerate(halves) for u in range(4))
    per_block = "".join(f"const __m256 sa_f{r} = _mm256_set1_ps(sa{r}[blk]);\n" +
                        (f"const __m256 asum_f{r} = _mm256_set1_ps((float)asum{r}[blk]);\n"
                         if zp_kind else "") for r in rs)
    mask = "const __m256i m15 = _mm256_set1_epi8(15);\n" if bits == 4 else \
        f"{VNNI_GUARD}\nconst __m256i m80 = _mm256_set1_epi8((char)0x80);\n#endif\n"
    # blocks outside the vectors: the part's 64-byte lines are read once, the second vector's
    # half of a block's lines from L1
    return f"""const long nv = (j1 - j0) / {VEC} * {VEC};
{mask}for (long blk = 0; blk < {nb}; ++blk) {{
{indent(per_block.rstrip())}
    for (long g = 0; g < nv; g += {VEC}) {{
        const {"uint8_t" if bits == 4 else "int8_t"} *__restrict qg = qp + j0 + g;
{indent(_sums(block, bits, rs).rstrip(), 2, directives=True)}
{indent(groups.rstrip(), 2)}
    }}
}}
"""
