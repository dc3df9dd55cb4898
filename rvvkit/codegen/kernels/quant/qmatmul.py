"""rvvkit.QMatMul (ops/quant/internal.py): quantized a [..., M, K] x b [(batch,) K, N].

Per batch: a uint8 `a` (or run-time uint8 `b`) is copied flipped to int8 into the workspace;
the row sums of a are formed when b has non-zero zero points, the column sums of a run-time b
when a's zero point is not 0 (a constant b's are folded into the bias); the int8 GEMM core
(qgemm.py) with a as A (scalars) and b as B (vectors along N); the epilogue adds the folded
bias and requantises per column."""
from __future__ import annotations

import math
from typing import Dict

from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import cdiv, loop
from ...parallel import parts_loop
from ...rvv import header
from .qgemm import QGEMM_NAME, qgemm_support, scratch_words
from .qgemm_parts import part_blocks, part_indices, part_span
from .requant import epilogue_support, tail_params

declare_spec("qmatmul", ("a_shape", "b_shape", "y_shape", "a_dtype", "b_dtype", "out", "a_zp",
                         "y_zp", "lo", "hi", "paired", "b_zp", "b_const", "rt_zp"))


def _words(nbytes: int) -> int:
    return -(-nbytes // 4)


def _flip(dst: str, src: str, rows: str, cols: str, ld: int) -> str:
    """dst[r * cols + j] = src[r * ld + j] ^ 0x80 (uint8 read as int8) for r < rows, j < cols."""
    if cols == str(ld):
        return loop("i", 0, f"{rows} * {cols}" if rows != "1" else cols,
                    f"{dst}[i] = (int8_t)({src}[i] ^ 0x80);", ty="long")
    return loop("r", 0, rows, loop("j", 0, cols, f"{dst}[r * {cols} + j] = "
                                   f"(int8_t)({src}[r * {ld} + j] ^ 0x80);", ty="long"),
                ty="long")


def qmatmul(a_shape, b_shape, y_shape, *, a_dtype: str, b_dtype: str, out: str, a_zp: int,
            y_zp: int, lo: int, hi: int, paired: bool, has_scale: bool, b_zp: bool,
            b_const: bool, rt_zp: bool = False, zp_shift: int = 0) -> Lowered:
    """Params: a, b, bias (int32 [N]), [scale (float [N])], [b_zp (int32 [N])], y.

    Threads: a part is one batch step's block of rows by block of columns
    (qgemm_parts.part_blocks); it flips and sums only its own rows of a and columns of b, in its
    thread's workspace, and writes its block of y."""
    m, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    a_batch = math.prod(a_shape[:-2])
    b_batch = math.prod(b_shape[:-2])
    batch = math.prod(y_shape[:-2])
    if b_batch == 1:          # one B: all of a's rows are one GEMM
        rows, steps, a_step, b_step = a_batch * m, 1, 0, 0
    else:
        if a_batch not in (1, batch) or b_batch != batch:
            from ....errors import ModelError
            raise ModelError(f"quantized MatMul of {list(a_shape)} x {list(b_shape)}: batch "
                             "broadcasting other than a shared or single B is not supported")
        rows, steps = m, batch
        a_step, b_step = (m * k if a_batch > 1 else 0), k * n
    mb, nb = part_blocks(rows, n, steps)
    rparts, cparts = cdiv(rows, mb), cdiv(n, nb)
    a_flip, b_flip = a_dtype == "uint8", b_dtype == "uint8" and not b_const
    need_rowsum = b_zp
    need_colsum = (not b_const) and a_zp != 0
    lay = {}
    off = 0
    for name, size in (("acc", mb * nb), ("rowsum", mb if need_rowsum else 0),
                       ("colsum", nb if need_colsum else 0),
                       ("af", _words(mb * k) if a_flip else 0),
                       ("bf", _words(k * nb) if b_flip else 0),
                       ("scr", scratch_words(mb, nb, k))):
        lay[name] = off
        off += size
    at = "uint8_t" if a_dtype == "uint8" else "int8_t"
    bt = "uint8_t" if b_dtype == "uint8" and not b_const else "int8_t"
    yt = "float" if out == "float32" else f"{out}_t"
    head = [f"int32_t *__restrict acc = (int32_t *)(ws + {lay['acc']});",
            f"int32_t *__restrict scr = (int32_t *)(ws + {lay['scr']});"]
    if need_rowsum:
        head.append(f"int32_t *__restrict rowsum = (int32_t *)(ws + {lay['rowsum']});")
    if need_colsum:
        head.append(f"int32_t *__restrict colsum = (int32_t *)(ws + {lay['colsum']});")
    if out in ("int8", "uint8"):
        head.append(f"const float flo = {float(lo - y_zp)!r}f, fhi = {float(hi - y_zp)!r}f;")
    if rt_zp:
        head.insert(0, f"const int32_t az = (int32_t)a_zp[0] - {zp_shift};")
    part = [part_span("m0", "mn", "rb", mb, rows), part_span("p0", "pn", "cb", nb, n),
            f"const {at} *__restrict as = a + {'s * ' + str(a_step) + ' + ' if a_step else ''}"
            f"m0 * {k};",
            f"const {bt} *__restrict bs = b + {'s * ' + str(b_step) + ' + ' if b_step else ''}p0;",
            f"{yt} *__restrict ys = y + {'s * ' + str(rows * n) + ' + ' if steps > 1 else ''}"
            f"m0 * {n} + p0;"]
    if a_flip:
        part += [f"int8_t *__restrict av = (int8_t *)(ws + {lay['af']});",
                 _flip("av", "as", "mn", str(k), k)]
    else:
        part.append("const int8_t *__restrict av = as;")
    ldb = "pn" if b_flip else str(n)
    if b_flip:
        part += [f"int8_t *__restrict bv = (int8_t *)(ws + {lay['bf']});",
                 _flip("bv", "bs", str(k), "pn", n)]
    else:
        part.append("const int8_t *__restrict bv = (const int8_t *)bs;")
    if need_rowsum:
        part.append(loop("i", 0, "mn", f"""int32_t t = 0;
{loop("kk", 0, k, f"t += av[i * {k} + kk];", ty="long")}
rowsum[i] = t;""", ty="long"))
    if need_colsum:
        part += [loop("j", 0, "pn", "colsum[j] = 0;", ty="long"),
                 loop("kk", 0, k, loop("j", 0, "pn", f"colsum[j] += bv[kk * {ldb} + j];",
                                       ty="long"), ty="long")]
    part.append(f"{QGEMM_NAME}(mn, pn, {k}, av, {k}, bv, {ldb}, acc, pn, {int(paired)}, scr);")
    terms = (" - b_zp[p0 + j] * rowsum[i]" if need_rowsum else "") + \
        (f" - {a_zp} * colsum[j]" if need_colsum else "") + \
        (" - az * b_cols[p0 + j]" if rt_zp else "")
    if out == "int32":
        store = f"ys[i * {n} + j] = v;"
    elif out == "float32":
        store = f"ys[i * {n} + j] = (float)v * scale[p0 + j];"
    else:
        store = f"ys[i * {n} + j] = ({yt})rvk_requant(v, scale[p0 + j], flo, fhi, {y_zp});"
    part.append(loop("i", 0, "mn", loop("j", 0, "pn", f"""\
const int32_t v = acc[i * pn + j] + bias[p0 + j]{terms};
{store}""", ty="long"), ty="long"))
    text = "\n".join(part)
    text = "\n".join(filter(None, (part_indices((("s", steps), ("rb", rparts), ("cb", cparts)),
                                                 text), text)))
    parts, split = parts_loop("u", steps * rparts * cparts, text)
    body = indent("\n".join(head) + "\n" + parts) + "\n"
    params = [Param("a", dtype=a_dtype), Param("b", dtype="int8" if b_const else b_dtype),
              Param("bias", dtype="int32"),
              *tail_params(has_scale, "b_zp" if b_zp else "",
                           ("a_zp", "b_cols") if rt_zp else (), a_dtype, out)]
    support: Dict[str, str] = {**header(), **qgemm_support()}
    if out in ("int8", "uint8"):
        support.update(epilogue_support())
    spec = make_spec("qmatmul", a_shape=a_shape, b_shape=b_shape, y_shape=y_shape,
                     a_dtype=a_dtype, b_dtype=b_dtype, out=out, a_zp=a_zp, y_zp=y_zp, lo=lo,
                     hi=hi, paired=int(paired), b_zp=int(b_zp), b_const=int(b_const),
                     rt_zp=int(rt_zp))
    macs = batch * m * n * k
    return Lowered(Kernel("qmatmul", tuple(params), body, workspace=off,
                          support=support, macs=macs, spec=spec, split=split(macs)))
