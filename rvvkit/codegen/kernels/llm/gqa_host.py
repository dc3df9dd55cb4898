"""GroupQueryAttention's attention on the host and the CUDA path (blocks.gqa), in the order
gqa_rvv.py computes it, so that every executor gives the same bits (a deep decoder with int8
activations carries any last-bit difference on from layer to layer: issue 39):

- a score sums its products along the head dimension in order, one fused multiply-add each
  from 0, then is scaled;
- the maximum is taken (in any order: it is exact), then e^(s - max) (codegen/expmath.py);
- the exponentials are summed in position order from 0 (RVV: vfredosum, the ordered
  reduction, so a board's hardware adds as QEMU does), the probabilities are each times
  1 / sum;
- an output element sums probability times value over the positions in order, fused.

The x86 form (AVX2) takes the query heads that share a key/value head together, like the RVV
one: 8 positions at a time, their keys transposed 8 x 8 in registers, so that each key load
serves every head of the chunk and the sums stay per position in head-dimension order. The
portable form (the CUDA path's too) runs a head at a time."""
from __future__ import annotations

from typing import Callable

from ... import x86
from ...cfmt import flt, indent
from ...loops import loop
from . import gqa_rvv

TRANSPOSE_KEY = "1_rvk_gqa_tr8"
# Rows p, p + stride, ..., p + 7 stride (8 floats each) transposed: c[k] holds element k of
# every row. The unpack / shuffle / permute steps of the classic 8 x 8 AVX transpose.
TRANSPOSE = f"""{x86.GUARD}
static inline void rvk_gqa_tr8(const float *p, long stride, __m256 *c) {{
    const __m256 r0 = _mm256_loadu_ps(p), r1 = _mm256_loadu_ps(p + stride);
    const __m256 r2 = _mm256_loadu_ps(p + 2 * stride), r3 = _mm256_loadu_ps(p + 3 * stride);
    const __m256 r4 = _mm256_loadu_ps(p + 4 * stride), r5 = _mm256_loadu_ps(p + 5 * stride);
    const __m256 r6 = _mm256_loadu_ps(p + 6 * stride), r7 = _mm256_loadu_ps(p + 7 * stride);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    c[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    c[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    c[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    c[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    c[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    c[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    c[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    c[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}}
#endif"""


def support() -> dict:
    return {**x86.header(), TRANSPOSE_KEY: TRANSPOSE}


def softmax_pv(sc: str, o: str, head: int) -> str:
    """C: `o` = softmax(`sc`[0 .. live)) . v (vh), in the order the module docstring gives;
    `sc` ends holding the probabilities."""
    return f"""{{
    float mx = -3.402823466e38f;
    for (long t = 0; t < live; ++t) mx = {sc}[t] > mx ? {sc}[t] : mx;
    for (long t = 0; t < live; ++t) {sc}[t] = rvk_expf({sc}[t] - mx);
    float sum = 0.0f;
    for (long t = 0; t < live; ++t) sum += {sc}[t];   /* in order: vfredosum's */
    const float inv = 1.0f / sum;
    for (long t = 0; t < live; ++t) {sc}[t] *= inv;
    for (long d = 0; d < {head}; ++d) {o}[d] = 0.0f;
    for (long t = 0; t < live; ++t) {{
        const float p = {sc}[t];
        for (long d = 0; d < {head}; ++d) {o}[d] = fmaf(p, vh[t * {head} + d], {o}[d]);
    }}
}}"""


def _score(qr: str, sc: str, head: int, scale: float, t: str) -> str:
    """C: `sc`[t] for one position, its products summed in order."""
    return f"""{{
    const float *__restrict kt = kh + {t} * {head};
    float a = 0.0f;
    for (long d = 0; d < {head}; ++d) a = fmaf({qr}[d], kt[d], a);
    {sc}[{t}] = a * {flt(scale)};
}}"""


def _portable(heads: int, group: int, head: int, max_seq: int, row: str,
              rotate: Callable[[str, str], str], scale: float) -> str:
    kv = "h" if group == 1 else f"(h / {group})"
    per_head = f"""const float *__restrict qs = q + {row} * {heads * head} + h * {head};
const float *__restrict kh = kd + {kv} * {max_seq * head};
const float *__restrict vh = vd + {kv} * {max_seq * head};
float *__restrict o = out + {row} * {heads * head} + h * {head};
{rotate("qr", "qs")}
for (long t = 0; t < live; ++t) {_score("qr", "sc", head, scale, "t")}
{softmax_pv("sc", "o", head)}"""
    return loop("h", 0, heads, per_head, "long")


def _x86_chunk(first: int, n: int, heads: int, group: int, head: int, max_seq: int,
               row: str, rotate: Callable[[str, str], str], scale: float) -> str:
    """C (AVX2): query heads g * group + first .. + n - 1 of token `row`."""
    hs = range(n)
    decl, queries = gqa_rvv.chunk_rows(first, n, heads, group, head, max_seq, row, rotate)
    zeros = ", ".join(f"a{i} = _mm256_setzero_ps()" for i in hs)
    macs = "\n".join(f"a{i} = _mm256_fmadd_ps(_mm256_set1_ps(qr{i}[d0 + {k}]), c[{k}], a{i});"
                     for k in range(8) for i in hs)
    stores = "\n".join(f"_mm256_storeu_ps(sc{i} + t0, _mm256_mul_ps(a{i}, "
                       f"_mm256_set1_ps({flt(scale)})));" for i in hs)
    tails = "\n".join(_score(f"qr{i}", f"sc{i}", head, scale, "t0") for i in hs)
    return f"""{{
{indent(decl)}
{indent(queries)}
    long t0 = 0;
    for (; t0 + 8 <= live; t0 += 8) {{
        __m256 {zeros};
        for (long d0 = 0; d0 < {head}; d0 += 8) {{
            __m256 c[8];
            rvk_gqa_tr8(kh + t0 * {head} + d0, {head}, c);
{indent(macs, 3)}
        }}
{indent(stores, 2)}
    }}
    for (; t0 < live; ++t0) {{
{indent(tails, 2)}
    }}
{indent(chr(10).join(softmax_pv(f"sc{i}", f"o{i}", head) for i in hs))}
}}"""


def attend(heads: int, group: int, head: int, max_seq: int, row: str,
           rotate: Callable[[str, str], str], scale: float) -> str:
    """C (host, CUDA): every query head of token `row` at position `pos` against the `live`
    cached keys into out. `rotate(dst, src)`: C putting a query row (rotated) into the
    workspace. Workspace: sc (gqa_rvv.CHUNK rows of max_seq scores), qr (CHUNK rows of
    head)."""
    portable = _portable(heads, group, head, max_seq, row, rotate, scale)
    if head % 8:
        return portable
    fast = gqa_rvv.by_group(lambda first, n: _x86_chunk(first, n, heads, group, head, max_seq,
                                                        row, rotate, scale),
                            heads, group, head, max_seq)
    return x86.guarded(fast, portable)
