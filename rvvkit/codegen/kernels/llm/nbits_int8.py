"""MatMulNBits with int8 activations (accuracy_level 4: onnxruntime quantizes each block of
the activation row to int8 with scale amax / 127 and sums integer products per block):

    y[n] = sum_blk sw[blk, n] * (sa[blk] * (sum_k aq[k] * code[k, n] - zp[blk, n] * sum_k aq[k]))

The weights are in the column layout of nbits_layout.py, so a vector runs along output
columns. The activation rows are quantized once per thread (the kernel's prologue), not once
per part of the columns. Per k a vector loads one byte per column (pair), splits the nibbles
and multiplies them by the activation scalar into 16-bit sums; each packed weight byte is
read once per pair of rows (a prompt chunk's rows go two at a time, sharing the loads and
nibble splits).

At 4 bits with blocks of at most 32 the 16-bit sums need no 32-bit ones: they may wrap, but
the block's sum of aq * (code - 8) lies within 32 * 127 * 8 = 32512, so the 16-bit sum less
8 * sum(aq) is that value exactly. So the low nibbles need no mask either: the low sums take
whole bytes (lo + 16 hi) and lose 16 times the high sums after the block, modulo 2^16 like the
rest. The portable path computes the same integer sums (in 16 bits too in that form, which a
host vectorises twice as wide); both apply the scales in one order, so their results are
equal. On an AVX2 host the portable form takes whole vectors of 32 byte columns through
nbits_x86.py's intrinsics first (the same sums, the same order)."""
from __future__ import annotations

from textwrap import dedent

from ... import rvv, x86
from ...cfmt import indent
from ...kernel import Lowered, declare_spec
from ....ops.llm import nbits
from . import nbits_x86
from .nbits_layout import (PAIRS, at_column, column_kernel, default_zero_point, halves_of,
                           portable_part, rows, rvv_columns, rvv_zero_point, scale_at, scale_load,
                           width_of)

declare_spec("matmul_nbits_i8", ("M", "K", "N", "bits", "block", "zp_kind", "bias", "pairs",
                                     "scales"))

WRAP_BLOCK = 32   # the largest 4-bit block whose 16-bit sums need no 32-bit ones (above)


def _quantize_row(k: int, nb: int, block: int) -> str:
    """C: row `x` to int8 blocks (aq, sa, asum), as onnxruntime's MLAS does it: scale
    amax / 127, values times 127 / amax rounded to nearest even."""
    # RVV: vfcvt.x.f rounds in the dynamic mode, nearest even by default. (A compiler's own
    # vectorisation of the scalar loop tripped QEMU 7.2's translator: an assertion.)
    rvv_block = """            size_t vl;
            vfloat32m1_t mx = __riscv_vfmv_v_f_f32m1(0.0f, 1);
            for (long t = k0; t < k1; t += (long)vl) {
                vl = __riscv_vsetvl_e32m4((size_t)(k1 - t));
                mx = __riscv_vfredmax_vs_f32m4_f32m1(
                    __riscv_vfabs_v_f32m4(__riscv_vle32_v_f32m4(x + t, vl), vl), mx, vl);
            }
            const float amax = __riscv_vfmv_f_s_f32m1_f32(mx);
            const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
            vint32m1_t sum = __riscv_vmv_v_x_i32m1(0, 1);
            for (long t = k0; t < k1; t += (long)vl) {
                vl = __riscv_vsetvl_e32m4((size_t)(k1 - t));
                const vint32m4_t q = __riscv_vfcvt_x_f_v_i32m4(
                    __riscv_vfmul_vf_f32m4(__riscv_vle32_v_f32m4(x + t, vl), inv, vl), vl);
                sum = __riscv_vredsum_vs_i32m4_i32m1(q, sum, vl);
                __riscv_vse8_v_i8m1(aq + t, __riscv_vncvt_x_x_w_i8m1(
                    __riscv_vncvt_x_x_w_i16m2(q, vl), vl), vl);
            }
            asum[blk] = __riscv_vmv_x_s_i32m1_i32(sum);
"""
    portable_block = """            float amax = 0.0f;
            for (long t = k0; t < k1; ++t) amax = fabsf(x[t]) > amax ? fabsf(x[t]) : amax;
            const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
            int32_t sum = 0;
            for (long t = k0; t < k1; ++t) {
                /* the product rounded, then to nearest even, as the RVV form (vfmul,
                   vfcvt): adding 1.5 * 2^23 to it instead let compilers fuse the two into
                   one rounding, and an activation an ulp from a tie took the other int8
                   value than on RVV (a 24-layer decoder's logits then parted by 1.0) */
                aq[t] = (int8_t)(int)rintf(x[t] * inv);
                sum += aq[t];
            }
            asum[blk] = sum;
"""
    guarded = indent(rvv.guarded(dedent(rvv_block), dedent(portable_block)), directives=True)
    return f"""for (long blk = 0; blk < {nb}; ++blk) {{
    const long k0 = blk * {block}, k1 = k0 + {block} < {k} ? k0 + {block} : {k};
{guarded}
    for (long t = k1; t < k0 + {block}; ++t) aq[t] = 0;   /* K's tail */
    sa[blk] = amax / 127.0f;
}}
"""


class _Layout:
    """Where the quantized rows lie in the workspace: row i's int8 values at aqs + i * row
    bytes (a whole number of blocks, rounded up to words), its block scales and sums at
    sas / asums + i * blocks."""

    def __init__(self, m: int, k: int, block: int):
        self.m, self.k, self.nb = m, k, nbits.blocks_of(k, block)
        self.words = -(-self.nb * block // 4)
        self.size = m * (self.words + 2 * self.nb)

    def pointers(self, const: bool) -> str:
        c = "const " if const else ""
        m, nb, w = self.m, self.nb, self.words
        return f"""    {c}int8_t *__restrict aqs = ({c}int8_t *)ws;
    {c}float *__restrict sas = ws + {m * w};
    {c}int32_t *__restrict asums = ({c}int32_t *)(ws + {m * (w + nb)});
"""

    def row(self, r: int, const: bool = True) -> str:
        """C: aq<r>, sa<r>, asum<r> of row i + r (no suffix for r None)."""
        c, s = ("const " if const else ""), ("" if r is None else str(r))
        at = "i" if not r else f"(i + {r})"
        return (f"{c}int8_t *__restrict aq{s} = aqs + {at} * {4 * self.words};\n"
                f"{c}float *__restrict sa{s} = sas + {at} * {self.nb};\n"
                f"{c}int32_t *__restrict asum{s} = asums + {at} * {self.nb};\n"
                f"(void)asum{s};   /* unused where the zero point is 0 */\n")

    def prologue(self, block: int) -> str:
        """C: every row of `a` quantized into the workspace."""
        body = (self.row(None, const=False) + f"const float *__restrict x = a + i * {self.k};\n"
                + _quantize_row(self.k, self.nb, block))
        return ("{\n" + self.pointers(False) +
                indent(rows(body, self.m), directives=True) + "\n}\n")


def _portable(lay: _Layout, n: int, bits: int, block: int, zp_kind: str, bias: bool,
              scales: str) -> str:
    """Portable C: the same integer sums and float operations as the RVV form. In the WRAP
    form the sums are 16-bit too (unsigned, so wrapping is defined; a host vectorises twice
    as many lanes), read back as the exact signed value less 8 * sum(aq)."""
    if _wraps(bits, block):   # zero points are stored less 8 (see matmul_nbits_i8)
        acc, first, term = "uint16_t", "const uint16_t at = (uint16_t)aq[t];", \
            "(uint16_t)(at * {code})"
        zero = "0.0f"

        def dot(d: str) -> str:
            return f"(float)(((int32_t)(uint16_t)({d} - 8 * asum[blk]) ^ 32768) - 32768)"
    else:
        acc, first, term = "int32_t", "const int32_t at = aq[t];", "at * (int32_t){code}"
        zero = f"{default_zero_point(bits)!r}f"

        def dot(d: str) -> str:
            return f"(float){d}"

    def finish(d: str, half: int) -> str:
        at = at_column(half, "c", lay.nb, bits)
        z = f"zp[{at}]" if zp_kind else zero
        return (f"{scale_at(at, scales)} *\n"
                f"            (({dot(d)} - {z} * (float)asum[blk]) * sa[blk])")
    def part(vector: str = "", row: str = "i") -> str:
        return portable_part(n, bits, bias, lay.nb, acc,
                             f"long t = blk * {block}; t < blk * {block} + {block}", first,
                             term, finish, vector, row)
    plain = rows(lay.row(None) + part(), lay.m)
    if not nbits_x86.supported(bits, block, WRAP_BLOCK):
        return plain
    return x86.guarded(_x86(lay, n, bits, block, zp_kind, bias, scales, part), plain)


def _x86(lay: _Layout, n: int, bits: int, block: int, zp_kind: str, bias: bool, scales: str,
         part) -> str:
    """x86 (nbits_x86.py): rows two at a time sharing each load and nibble split, their
    whole vectors' results in yv<r><half>, which each row's portable part (`part(vector,
    row)`) takes as its first nv columns; then a last odd row on its own."""
    width, halves = width_of(n, bits), ("lo", "hi")[:halves_of(bits)]
    paired = lay.m // 2 * 2
    one = rows(lay.row(None) + part(nbits_x86.vector_part(bits, block, lay.nb, zp_kind,
                                                          scales)), lay.m, paired)
    if not paired:
        return one
    decl = "float " + ", ".join(f"yv{r}{h}[{PAIRS}]" for r in range(2) for h in halves) + ";\n"
    init = "".join(
        f"for (long c = 0; c < j1 - j0; ++c) yv{r}{h}[c] = "
        + (f"j0 + {off} + c < {n} ? bias[j0 + {off} + c] : 0.0f;\n" if bias else "0.0f;\n")
        for r in range(2) for h, off in zip(halves, (0, width)))
    vector = nbits_x86.vector_part(bits, block, lay.nb, zp_kind, scales, rows=2,
                                   into="yv{r}{h}")
    per_row = ""
    for r in range(2):
        take = (f"const long nv = (j1 - j0) / {nbits_x86.VEC} * {nbits_x86.VEC};\n"
                "for (long c = 0; c < nv; ++c) {\n" +
                "".join(f"    y{h}[c] = yv{r}{h}[c];\n" for h in halves) + "}\n")
        names = (f"const int8_t *__restrict aq = aq{r};\nconst float *__restrict sa = sa{r};\n"
                 f"const int32_t *__restrict asum = asum{r};\n(void)aq; (void)asum;\n")
        per_row += "{\n" + indent((names + part(take, f"(i + {r})")).rstrip(),
                                  directives=True) + "\n}\n"
    pair = lay.row(0) + lay.row(1) + decl + init + "{\n" + \
        indent(vector.rstrip(), directives=True) + "\n}\n" + per_row
    return rows(pair, paired, step=2) + one


def _wraps(bits: int, block: int) -> bool:
    return bits == 4 and block <= WRAP_BLOCK


def _sums(rows: int, width: int, bits: int, block: int) -> str:
    """RVV: the block's integer sums of `rows` rows: s<r>lo/s<r>hi (vint16m2, wrapped) in the
    WRAP form, else c<r>lo/c<r>hi (4 bits) or c<r>lo (8 bits) as vint32m4."""
    rs = range(rows)
    if _wraps(bits, block):
        zeros = ", ".join(f"s{r}{h} = __riscv_vmv_v_x_i16m2(0, vl)" for r in rs
                          for h in ("lo", "hi"))
        # the low sums take whole bytes (lo + 16 hi) and lose 16 x the high sums after the
        # block: one vand fewer per step, exact modulo 2^16 like the rest
        macs = "\n".join(f"    s{r}{h} = __riscv_vwmaccsu_vx_i16m2(s{r}{h}, aq{r}[t], {v}, vl);"
                         for r in rs for h, v in (("lo", "qv"), ("hi", "hi")))
        split = "\n".join(f"s{r}lo = __riscv_vsub_vv_i16m2(s{r}lo, "
                          f"__riscv_vsll_vx_i16m2(s{r}hi, 4, vl), vl);" for r in rs)
        # steps of 16 at most: loops of 16 trips are unrolled by the compilers, of 32 not
        step = min(block, 16)
        return f"""vint16m2_t {zeros};
for (long h = blk * {block}; h < blk * {block} + {block}; h += {step}) {{
    for (long t = h; t < h + {step}; ++t) {{
        const vuint8m1_t qv = __riscv_vle8_v_u8m1(qp + t * {PAIRS} + j, vl);
        const vuint8m1_t hi = __riscv_vsrl_vx_u8m1(qv, 4, vl);
{indent(macs)}
    }}
}}
{split}
"""
    if bits == 4:   # larger blocks, one row: 16 steps fit 16 bits (16 * 128 * 15 < 2^15)
        return f"""vint32m4_t c0lo = __riscv_vmv_v_x_i32m4(0, vl), c0hi = c0lo;
for (long h = blk * {block}; h < blk * {block} + {block}; h += 16) {{
    vint16m2_t slo = __riscv_vmv_v_x_i16m2(0, vl), shi = slo;
    for (long t = h; t < h + 16; ++t) {{
        const vuint8m1_t qv = __riscv_vle8_v_u8m1(qp + t * {PAIRS} + j, vl);
        slo = __riscv_vwmaccsu_vx_i16m2(slo, aq0[t], __riscv_vand_vx_u8m1(qv, 15, vl), vl);
        shi = __riscv_vwmaccsu_vx_i16m2(shi, aq0[t], __riscv_vsrl_vx_u8m1(qv, 4, vl), vl);
    }}
    c0lo = __riscv_vwadd_wv_i32m4(c0lo, slo, vl);
    c0hi = __riscv_vwadd_wv_i32m4(c0hi, shi, vl);
}}
"""
    zeros = ", ".join(f"c{r}lo = __riscv_vmv_v_x_i32m4(0, vl)" for r in rs)
    # two products fit 16 bits (|aq| <= 127, |code - 128| <= 128); four k per trip, the
    # 16-bit products all made before the 32-bit sums, so the vector type changes twice per
    # trip rather than at every product
    loads = "\n".join(f"    const vint8m1_t w{u} = "
                      f"__riscv_vle8_v_i8m1(qp + (t + {u}) * {PAIRS} + j, vl);" for u in range(4))
    pairs = "\n".join(f"""    const vint16m2_t p{r}{u} = __riscv_vwmacc_vx_i16m2(
        __riscv_vwmul_vx_i16m2(w{2 * u}, aq{r}[t + {2 * u}], vl), aq{r}[t + {2 * u + 1}],
        w{2 * u + 1}, vl);""" for r in rs for u in range(2))
    sums = "\n".join(f"    c{r}lo = __riscv_vwadd_wv_i32m4(__riscv_vwadd_wv_i32m4(c{r}lo, p{r}0, "
                      f"vl), p{r}1, vl);" for r in rs)
    return f"""vint32m4_t {zeros};
for (long t = blk * {block}; t < blk * {block} + {block}; t += 4) {{
{loads}
{pairs}
{sums}
}}
"""


def _finish(rows: int, nb: int, bits: int, block: int, zp_kind: str, scales: str) -> str:
    """RVV: each row's block sums into its outputs o<r><half>: the zero point's share taken
    away, times the row's block scale, then the weights' scales (loaded once per half)."""
    out = []
    for half, h in enumerate(("lo", "hi")[:halves_of(bits)]):
        at = at_column(half, "(j - j0)", nb, bits)
        per_row = []
        for r in range(rows):
            asum = f"(float)asum{r}[blk]"
            if _wraps(bits, block):
                conv = (f"__riscv_vfwcvt_f_x_v_f32m4(__riscv_vsub_vx_i16m2(s{r}{h}, "
                        f"(int16_t)(8 * asum{r}[blk]), vl), vl)")
                zp = rvv_zero_point(zp_kind, bits, at, "f", asum, default=0.0)
            else:
                conv = f"__riscv_vfcvt_f_x_v_f32m4(c{r}{h}, vl)"
                zp = rvv_zero_point(zp_kind, bits, at, "f", asum)
            per_row.append(f"""{{
    vfloat32m4_t f = {conv};
    {zp}
    f = __riscv_vfmul_vf_f32m4(f, sa{r}[blk], vl);
    o{r}{h} = __riscv_vfmacc_vv_f32m4(o{r}{h}, f, s, vl);
}}""")
        out.append(f"""{{
    const vfloat32m4_t s = {scale_load(at, scales)};
{indent(chr(10).join(per_row))}
}}""")
    return "\n".join(out) + "\n"


def _rvv(lay: _Layout, n: int, bits: int, block: int, zp_kind: str, bias: bool,
         scales: str) -> str:
    """RVV: rows two at a time (one at a time at 4 bits with blocks over WRAP_BLOCK, whose
    32-bit sums would not fit the registers twice), then a last odd row."""
    width = width_of(n, bits)
    step = 1 if bits == 4 and not _wraps(bits, block) else 2

    def group(rows: int) -> str:
        per_block = _sums(rows, width, bits, block) + _finish(rows, lay.nb, bits, block, zp_kind,
                                                             scales)
        return "".join(lay.row(r) for r in range(rows)) + \
            rvv_columns(n, bits, bias, lay.nb, per_block, rows)
    paired = lay.m // step * step
    return rows(group(step), paired, step=step) + rows(group(1), lay.m, paired)


def matmul_nbits_i8(m: int, k: int, n: int, bits: int, block: int, zp_kind: str,
                    bias: bool, scales: str = "float32") -> Lowered:
    """Params as nbits_layout.column_kernel. Workspace: the quantized rows (aq int8, sa float
    and asum int32 per block), written by the prologue."""
    lay = _Layout(m, k, block)
    per_part = rvv.guarded(_rvv(lay, n, bits, block, zp_kind, bias, scales),
                           _portable(lay, n, bits, block, zp_kind, bias, scales))
    return column_kernel("matmul_nbits_i8", m, k, n, bits, block, zp_kind, bias,
                         lay.pointers(True), per_part, lay.size, scales,
                         prologue=lay.prologue(block),
                         zp_shift=8.0 if _wraps(bits, block) else 0.0)
