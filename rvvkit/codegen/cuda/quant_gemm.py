"""CUDA forms of the integer convolution and matrix product (kernels/quant/qconv.py, qmatmul.py; the
semantics: ops/quant/internal.py). Both are one product

    OUT[z][p][q] = sum_k A(z, p, k) * B(z, k, q)      (int8 x int8 -> exact int32)

  qconv    z = group, p = output channel in the group, q = image * Ho*Wo + position; A = the
           int8 weights (rows contiguous in k), B = the im2col matrix, gathered from x as it is
           read (never stored): uint8 x read as x - 128, padding = the (shifted) zero point.
  qmatmul  z = batch step, p = row of a (rows contiguous in k), q = column of b [K][N].

One thread owns TP rows p of one column q: it gathers its column of B once per k and meets
every A row with it, so A's loads are the same for the threads of a warp (broadcasts) and B's
are consecutive columns. When K is a multiple of 4, four k are taken at a time as int8x4 words
multiplied with __dp4a (sm_61+; the emulator and older GPUs: the same sum byte by byte); A's
words are loaded whole (the weights: 64-byte aligned in the blob; a's rows: when a is 4-byte
aligned, checked at run time, else assembled from bytes). Column sums (weights with zero
points), row sums (b's zero points) and run-time zero points enter the epilogue exactly as in
the C kernels, so every int32 total is the C kernel's; requantisation is onnxruntime's (float
multiply, clamp, round half to even, + zero point): __fmul_rn and __float2int_rn on the GPU,
the C kernels' magic-number rounding in the emulator — equal results, no contraction."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..kernel import Kernel
from ..loops import loop
from ..kernels.quant import qconv as _qconv, qmatmul as _qmatmul  # noqa: F401  (declare the specs)
from ..kernels.quant.requant import EPILOGUE, EPILOGUE_KEY
from .elementwise import per_element
from .registry import CudaKernel, generator
from .tiles import UNROLL_NAME, UNROLL_TEXT, cdiv

WORDS_KEY = "rvk_cu_q8_words"
WORDS = """\
/* int8x4 words for the quantized products (codegen/cuda/quant_gemm.py). */
static __device__ __forceinline__ int rvk_cu_q8_pack(int v0, int v1, int v2, int v3) {
    return (int)(((unsigned)v0 & 255u) | ((unsigned)v1 & 255u) << 8 |
                 ((unsigned)v2 & 255u) << 16 | ((unsigned)v3 & 255u) << 24);
}
/* 4 bytes at p as one word; `aligned`: p is 4-byte aligned (one load on the GPU). */
static __device__ __forceinline__ int rvk_cu_q8_word(const int8_t *p, bool aligned) {
#if defined(__CUDA_ARCH__)
    if (aligned) return *(const int *)p;
#else
    if (aligned && ((size_t)p & 3u) != 0) {   /* a GPU would fault: fail here as loudly */
        fprintf(stderr, "rvk_cu_q8_word: misaligned word at %p\\n", (const void *)p);
        abort();
    }
#endif
    return rvk_cu_q8_pack(p[0], p[1], p[2], p[3]);
}
/* acc + the dot product of two int8x4 words. */
static __device__ __forceinline__ int rvk_cu_q8_dot(int a, int b, int acc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    return __dp4a(a, b, acc);
#else
    for (int s = 0; s < 32; s += 8) acc += (int)(int8_t)(a >> s) * (int)(int8_t)(b >> s);
    return acc;
#endif
}
"""
REQUANT_KEY = "rvk_cu_q8_requant"
REQUANT = """\
/* int32 -> quantized as rvk_requant in the C kernels (float multiply, clamp to [lo, hi],
 * round half to even, + zp): the GPU's own correctly rounded multiply and conversion; the
 * emulator runs the C helper itself. */
static __device__ __forceinline__ int rvk_cu_q8_requant(int v, float scale, float lo, float hi,
                                                        int zp) {
#if defined(__CUDA_ARCH__)
    float f = __fmul_rn((float)v, scale);
    f = f < lo ? lo : f;
    f = f > hi ? hi : f;
    return __float2int_rn(f) + zp;
#else
    return rvk_requant(v, scale, lo, hi, zp);
#endif
}
"""

ONES = "0x01010101"
FLIP = "0x80808080"


def _ct(dtype: str) -> str:
    return {"int8": "int8_t", "uint8": "uint8_t", "int32": "int32_t", "float32": "float"}[dtype]


def _val(dtype: str, ref: str) -> str:
    """An element of an int8/uint8 operand as the signed value the kernels multiply."""
    return f"((int){ref} - 128)" if dtype == "uint8" else f"(int){ref}"


@dataclass
class _Product:
    hint: str
    rows: int               # p extent
    cols: int               # q extent
    k: int
    nz: int
    pre: str                # per thread, given z and q: declares `a0` (A's first row) etc.
    a_dtype: str            # A's elements: int8 or uint8; rows K apart from a0
    a_aligned: str          # C bool: a0 is 4-byte aligned
    b_elem: Callable[[str, str], str]   # (k, var) -> statements declaring `const int var`
    a_sums: bool            # row sums of A wanted (rs[t])
    b_sums: bool            # column sums of B wanted (cs)
    store: Callable[[str, str], str]    # (p, t) -> statements storing acc[t] (rs[t], cs)
    extents: tuple
    requant: bool           # the outputs are requantised (int8/uint8)


def _rows_per_thread(pr: _Product) -> int:
    """8 rows a thread, fewer when that would leave too few threads to fill a GPU."""
    tp = 8
    while tp > 1 and (tp > pr.rows or pr.nz * cdiv(pr.rows, tp) * pr.cols < 16384):
        tp //= 2
    return tp


def _body(pr: _Product, tp: int) -> str:
    pt = cdiv(pr.rows, tp)
    at = _ct(pr.a_dtype)
    s = [f"const int q = (int)(i % {pr.cols});"]
    rest = f"(int)(i / {pr.cols})"
    s.append(f"const int p0 = {rest} % {pt} * {tp};" if pt > 1 else "const int p0 = 0;")
    s.append(f"const int z = {rest} / {pt};" if pr.nz > 1 else "const int z = 0;")
    s += [pr.pre, "(void)z;"]
    s.append(f"const {at} *ap[{tp}];\nint acc[{tp}];")
    if pr.a_sums:
        s.append(f"int rs[{tp}];")
    init = f"const int p = p0 + t < {pr.rows} ? p0 + t : {pr.rows - 1};\n" \
        f"ap[t] = a0 + (long long)p * {pr.k};\nacc[t] = 0;" + ("\nrs[t] = 0;" if pr.a_sums else "")
    s.append(("int cs = 0;\n" if pr.b_sums else "") + _each_row(tp, init))
    if pr.k % 4 == 0:   # four k a step, as int8x4 words
        word = f"rvk_cu_q8_word((const int8_t *)(ap[t] + k0), {pr.a_aligned})"
        if pr.a_dtype == "uint8":   # x - 128 in each byte
            word = f"(int)((unsigned){word} ^ {FLIP}u)"
        gather = "\n".join(f"{{\n    const int kk = k0 + {u};\n{_ind(pr.b_elem('kk', 'v'))}\n"
                           f"    b{u} = v;\n}}" for u in range(4))
        mac = f"const int aw = {word};\nacc[t] = rvk_cu_q8_dot(aw, bw, acc[t]);" + \
            (f"\nrs[t] = rvk_cu_q8_dot(aw, {ONES}, rs[t]);" if pr.a_sums else "")
        s.append(f"""for (int k0 = 0; k0 < {pr.k}; k0 += 4) {{
    int b0, b1, b2, b3;
{_ind(gather)}
    const int bw = rvk_cu_q8_pack(b0, b1, b2, b3);
{'    cs = rvk_cu_q8_dot(bw, ' + ONES + ', cs);' if pr.b_sums else ''}
{_ind(_each_row(tp, mac))}
}}""")
    else:               # one k a step
        mac = f"const int av = {_val(pr.a_dtype, 'ap[t][k]')};\nacc[t] += av * bv;" + \
            ("\nrs[t] += av;" if pr.a_sums else "")
        s.append(f"""for (int k = 0; k < {pr.k}; ++k) {{
{_ind(pr.b_elem('k', 'bv'))}
{'    cs += bv;' if pr.b_sums else ''}
{_ind(_each_row(tp, mac))}
}}""")
    store = pr.store("p", "t")
    if pr.rows % tp:    # the last thread's rows run past the product's
        store = f"if (p < {pr.rows}) {{\n{_ind(store)}\n}}"
    s.append(_each_row(tp, f"const int p = p0 + t;\n{store}"))
    return "\n".join(ln for ln in "\n".join(s).split("\n") if ln.strip())


def _each_row(tp: int, body: str) -> str:
    """`body` for each row t of a thread's tp, unrolled; one row is a block with t = 0 (no
    single-trip loop: loops.loop)."""
    return ("RVK_UNROLL\n" if tp > 1 else "") + loop("t", 0, tp, body)


def _ind(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + ln if ln.strip() else ln for ln in text.split("\n"))


def _launch(pr: _Product, kernel: Kernel) -> CudaKernel:
    tp = _rows_per_thread(pr)
    total = pr.nz * cdiv(pr.rows, tp) * pr.cols
    ck = per_element(f"{pr.hint}_{pr.rows}x{pr.cols}x{pr.k}_t{tp}", kernel, total,
                     _body(pr, tp), pr.extents)
    if total == 0:      # an empty output: nothing launched, no helper to define
        return ck
    support = {UNROLL_NAME: UNROLL_TEXT}
    if pr.k % 4 == 0:
        support[WORDS_KEY] = WORDS
    if pr.requant:
        support[EPILOGUE_KEY] = EPILOGUE
        support[REQUANT_KEY] = REQUANT
    return CudaKernel(ck.body, {**support, **ck.support})


def _result(out: str, v: str, scale: str, y_zp: int, lo: int, hi: int) -> str:
    """The stored value of int32 total `v` (the C kernels' epilogue)."""
    if out == "int32":
        return v
    if out == "float32":
        return f"(float){v} * {scale}"
    flo, fhi = float(lo - y_zp), float(hi - y_zp)
    return f"({_ct(out)})rvk_cu_q8_requant({v}, {scale}, {flo!r}f, {fhi!r}f, {y_zp})"


@generator("qconv")
def qconv(spec: dict, kernel: Kernel) -> CudaKernel:
    """Params: x, w (int8 [M][C/g][kh][kw]), bias, [scale], [w_zp], [x_zp, w_rows], y."""
    n, c, h, w = spec["x_shape"]
    m, cg, kh, kw = spec["w_shape"]
    oh, ow = spec["y_shape"][2], spec["y_shape"][3]
    group, xdt, out = spec["group"], spec["x_dtype"], spec["out"]
    (sh, sw), (pt, pl, _, _), (dh, dw) = spec["strides"], spec["pads"], spec["dilations"]
    rt_zp, w_zp = bool(spec["rt_zp"]), bool(spec["w_zp"])
    mg, hw, taps = m // group, oh * ow, kh * kw
    k = cg * taps
    pad = "xz" if rt_zp else str(spec["x_zp"])
    pointwise = taps == 1 and (sh, sw) == (1, 1) and (pt, pl) == (0, 0)
    shift = 128 if xdt == "uint8" else 0     # uint8 x is read as x - 128 (passes/quant.py)
    pre = [f"const int8_t *__restrict__ a0 = w + (long long)z * {mg * k};",
           f"const int img = q / {hw}, pos = q % {hw};" if n > 1 else "const int img = 0, pos = q;",
           f"const {_ct(xdt)} *__restrict__ xb = x + ((long long)img * {c} + z * {cg}) * {h * w};"]
    if rt_zp:
        pre.append(f"const int xz = (int)x_zp[0] - {shift};")
    if not pointwise:
        pre.append(f"const int ih0 = pos / {ow} * {sh} - {pt}, iw0 = pos % {ow} * {sw} - {pl};")

    def b_elem(kv: str, var: str) -> str:
        if pointwise:
            return f"const int {var} = {_val(xdt, f'xb[(long long){kv} * {hw} + pos]')};"
        ch = f"{kv} / {taps}" if taps > 1 else kv
        r = f"{kv} % {taps} / {kw}" if kh > 1 else "0"
        s = f"{kv} % {kw}" if kw > 1 else "0"
        return (f"const int ih = ih0 + {r} * {dh}, iw = iw0 + {s} * {dw};\n"
                f"const int {var} = (unsigned)ih < {h}u && (unsigned)iw < {w}u ? "
                f"{_val(xdt, f'xb[(long long)({ch}) * {h * w} + ih * {w} + iw]')} : {pad};")

    y_zp, lo, hi = spec["y_zp"], spec["lo"], spec["hi"]

    def store(p: str, t: str) -> str:
        v = (f"acc[{t}] + bias[co]" + (" - w_zp[co] * cs" if w_zp else "")
             + (" - xz * w_rows[co]" if rt_zp else ""))
        return (f"const int co = z * {mg} + {p};\nconst int v = {v};\n"
                f"y[((long long)img * {m} + co) * {hw} + pos] = "
                f"{_result(out, 'v', 'scale[co]', y_zp, lo, hi)};")

    pr = _Product("qconv", mg, n * hw, k, group, "\n".join(pre), "int8", "true", b_elem,
                  False, w_zp, store, (n * c * h * w, n * m * hw, m * k),
                  out in ("int8", "uint8"))
    return _launch(pr, kernel)


@generator("qmatmul")
def qmatmul(spec: dict, kernel: Kernel) -> CudaKernel:
    """Params: a, b, bias (int32 [N]), [scale], [b_zp], [a_zp, b_cols], y."""
    a_shape, b_shape, y_shape = spec["a_shape"], spec["b_shape"], spec["y_shape"]
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    a_batch, b_batch = math.prod(a_shape[:-2]), math.prod(b_shape[:-2])
    batch = math.prod(y_shape[:-2])
    if b_batch == 1:          # as the C kernel: one B, all of a's rows one product
        rows, steps, a_step, b_step = a_batch * m, 1, 0, 0
    else:                     # (the C lowering refuses other broadcasts)
        rows, steps = m, batch
        a_step, b_step = (m * k if a_batch > 1 else 0), k * n
    adt, out, a_zp = spec["a_dtype"], spec["out"], spec["a_zp"]
    b_const, rt_zp, b_zp = bool(spec["b_const"]), bool(spec["rt_zp"]), bool(spec["b_zp"])
    bdt = "int8" if b_const else spec["b_dtype"]
    colsum = not b_const and a_zp != 0
    shift = 128 if adt == "uint8" else 0
    pre = [f"const {_ct(adt)} *__restrict__ a0 = a + (long long)z * {a_step};",
           f"const {_ct(bdt)} *__restrict__ bs = b + (long long)z * {b_step};"]
    if rt_zp:
        pre.append(f"const int az = (int)a_zp[0] - {shift};")

    def b_elem(kv: str, var: str) -> str:
        return f"const int {var} = {_val(bdt, f'bs[(long long){kv} * {n} + q]')};"

    y_zp, lo, hi = spec["y_zp"], spec["lo"], spec["hi"]

    def store(p: str, t: str) -> str:
        v = (f"acc[{t}] + bias[q]" + (f" - b_zp[q] * rs[{t}]" if b_zp else "")
             + (f" - {a_zp} * cs" if colsum else "") + (" - az * b_cols[q]" if rt_zp else ""))
        return (f"const int v = {v};\n"
                f"y[(long long)z * {rows * n} + (long long){p} * {n} + q] = "
                f"{_result(out, 'v', 'scale[q]', y_zp, lo, hi)};")

    pr = _Product("qmatmul", rows, n, k, steps, "\n".join(pre), adt,
                  "((size_t)a & 3u) == 0", b_elem, b_zp, colsum, store,
                  (a_batch * m * k, b_batch * k * n, batch * m * n), out in ("int8", "uint8"))
    return _launch(pr, kernel)
