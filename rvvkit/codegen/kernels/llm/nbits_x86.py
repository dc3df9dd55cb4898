"""AVX2 forms of MatMulNBits with int8 activations (nbits_int8.py): one row over a part's byte
columns, 32 at a time, on the panels of nbits_layout.py (code (t, j) at qp[t * PAIRS + j]). They compute the integer sums
of the portable form exactly and apply the scales in its order, so a host with AVX2 gives the
portable form's results bit for bit (and so the RVV form's).

Two k at a time: the bytes of rows t and t + 1 are interleaved (vpunpck[lh]bw), so each
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
groups of 8 columns in column order before any float arithmetic."""
from __future__ import annotations

from typing import Dict

from ...cfmt import indent
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
    """AVX2: 8 scales as floats from element `index` of the stored scales (at_column)."""
    return _SCALES[kind].format(i=index)


def supported(bits: int, block: int, wrap_block: int) -> bool:
    """Whether the AVX2 form covers this layout: 8 bits, or 4 bits in the wrapping form."""
    return bits == 8 or block <= wrap_block


def _group(d32: str, y: str, at: str, zp_kind: str, scales: str) -> str:
    """C: 8 columns' block sums `d32` (__m256i, int32, column order) into y[0..7], their
    scales and zero points from index `at` (at_column): y += scale * ((d - zp * asum) * sa),
    the portable form's operations."""
    zp = (f"\n    f = _mm256_fnmadd_ps(_mm256_loadu_ps(zp + {at}), asum_f, f);"
          if zp_kind else "")
    return f"""{{
    __m256 f = _mm256_cvtepi32_ps({d32});{zp}
    f = _mm256_mul_ps(f, sa_f);
    _mm256_storeu_ps({y}, _mm256_fmadd_ps({scale_load(at, scales)}, f,
                                          _mm256_loadu_ps({y})));
}}"""


def _sums4(block: int) -> str:
    """C: the block's wrapped 16-bit sums of 32 byte columns: s0/s1 (low nibbles, low / high
    k interleave), s2/s3 (high nibbles)."""
    return f"""__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
for (long t = blk * {block}; t < blk * {block} + {block}; t += 2) {{
    const __m256i r0 = _mm256_loadu_si256((const __m256i *)(const void *)(qg + t * {PAIRS}));
    const __m256i r1 = _mm256_loadu_si256((const __m256i *)(const void *)(qg + (t + 1) * {PAIRS}));
    const __m256i a = _mm256_set1_epi16((short)(uint16_t)((uint8_t)aq[t] |
                                                          (uint16_t)(uint8_t)aq[t + 1] << 8));
    const __m256i p0 = _mm256_unpacklo_epi8(r0, r1), p1 = _mm256_unpackhi_epi8(r0, r1);
    s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(_mm256_and_si256(p0, m15), a));
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(_mm256_and_si256(p1, m15), a));
    s2 = _mm256_add_epi16(s2, _mm256_maddubs_epi16(
        _mm256_and_si256(_mm256_srli_epi16(p0, 4), m15), a));
    s3 = _mm256_add_epi16(s3, _mm256_maddubs_epi16(
        _mm256_and_si256(_mm256_srli_epi16(p1, 4), m15), a));
}}
"""


def _sums8(block: int) -> str:
    """C: the block's int32 sums of 32 byte columns in column order: c0 (0-7) .. c3 (24-31)."""
    return f"""__m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
for (long t = blk * {block}; t < blk * {block} + {block}; t += 2) {{
    const __m256i r0 = _mm256_loadu_si256((const __m256i *)(const void *)(qg + t * {PAIRS}));
    const __m256i r1 = _mm256_loadu_si256((const __m256i *)(const void *)(qg + (t + 1) * {PAIRS}));
    const __m256i a = _mm256_set1_epi32((int)(uint32_t)((uint16_t)(int16_t)aq[t] |
                                                        (uint32_t)(uint16_t)(int16_t)aq[t + 1] << 16));
    const __m256i p0 = _mm256_unpacklo_epi8(r0, r1), p1 = _mm256_unpackhi_epi8(r0, r1);
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(
        _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p0)), a));
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(
        _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p1)), a));
    c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(
        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p0, 1)), a));
    c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(
        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p1, 1)), a));
}}
"""


def _widen4(half: str, lo: str, hi: str) -> str:
    """C: the exact sums of one nibble half (16-bit registers `lo`/`hi` of the low/high k
    interleave) as int32 in column order: <half>0 .. <half>3."""
    return f"""const __m256i {lo}d = _mm256_sub_epi16({lo}, z8), {hi}d = _mm256_sub_epi16({hi}, z8);
const __m256i {half}0 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128({lo}d));
const __m256i {half}1 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128({hi}d));
const __m256i {half}2 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256({lo}d, 1));
const __m256i {half}3 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256({hi}d, 1));
"""


def row_part(bits: int, block: int, nb: int, zp_kind: str, scales: str) -> str:
    """C: the `vector` statements of nbits_layout.portable_part for one row (aq, sa, asum)
    over this part's byte columns j0..j1: whole vectors of 32 into ylo[c] (and yhi[c]),
    declaring nv, the columns they took."""
    halves = ["lo", "hi"][:halves_of(bits)]
    if bits == 4:
        sums = _sums4(block) + \
            "const __m256i z8 = _mm256_set1_epi16((short)(8 * asum[blk]));\n" + \
            _widen4("lo", "s0", "s1") + _widen4("hi", "s2", "s3")
        parts = {"lo": "lo", "hi": "hi"}
    else:
        sums = _sums8(block)
        parts = {"lo": "c"}
    groups = "\n".join(
        _group(f"{parts[h]}{u}", f"y{h} + g + {8 * u}",
               at_column(half, f"g + {8 * u}", nb, bits), zp_kind, scales)
        for half, h in enumerate(halves) for u in range(4))
    asum = "const __m256 asum_f = _mm256_set1_ps((float)asum[blk]);\n" if zp_kind else ""
    mask = "const __m256i m15 = _mm256_set1_epi8(15);\n" if bits == 4 else ""
    # blocks outside the vectors: the part's 64-byte lines are read once, the second vector's
    # half of a block's lines from L1
    return f"""const long nv = nj / {VEC} * {VEC};
{mask}for (long blk = 0; blk < {nb}; ++blk) {{
    const __m256 sa_f = _mm256_set1_ps(sa[blk]);
{indent(asum.rstrip(), 1)}
    for (long g = 0; g < nv; g += {VEC}) {{
        const {"uint8_t" if bits == 4 else "int8_t"} *__restrict qg = qp + j0 + g;
{indent(sums.rstrip(), 2)}
{indent(groups.rstrip(), 2)}
    }}
}}
"""
