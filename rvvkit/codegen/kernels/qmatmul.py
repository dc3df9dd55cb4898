"""rvvkit.QMatMul (ops/quant_internal.py): quantized a [..., M, K] x b [(batch,) K, N].

Per batch: a uint8 `a` (or run-time uint8 `b`) is copied flipped to int8 into the workspace;
the row sums of a are formed when b has non-zero zero points, the column sums of a run-time b
when a's zero point is not 0 (a constant b's are folded into the bias); the int8 GEMM core
(qgemm.py) with a as A (scalars) and b as B (vectors along N); the epilogue adds the folded
bias and requantises per column."""
from __future__ import annotations

import math
from typing import Dict

from ..kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ..rvv import header
from .qgemm import QGEMM_NAME, epilogue_support, qgemm_support, scratch_words, tail_params

declare_spec("qmatmul", ("a_shape", "b_shape", "y_shape", "a_dtype", "b_dtype", "out", "a_zp",
                         "y_zp", "lo", "hi", "paired", "b_zp", "b_const", "rt_zp"))


def _words(nbytes: int) -> int:
    return -(-nbytes // 4)


def _flip(dst: str, src: str, n: int) -> str:
    return f"        for (long i = 0; i < {n}; ++i) {dst}[i] = (int8_t)({src}[i] ^ 0x80);\n"


def qmatmul(a_shape, b_shape, y_shape, *, a_dtype: str, b_dtype: str, out: str, a_zp: int,
            y_zp: int, lo: int, hi: int, paired: bool, has_scale: bool, b_zp: bool,
            b_const: bool, rt_zp: bool = False, zp_shift: int = 0) -> Lowered:
    """Params: a, b, bias (int32 [N]), [scale (float [N])], [b_zp (int32 [N])], y."""
    m, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    a_batch = math.prod(a_shape[:-2])
    b_batch = math.prod(b_shape[:-2])
    batch = math.prod(y_shape[:-2])
    if b_batch == 1:          # one B: all of a's rows are one GEMM
        rows, steps, a_step, b_step = a_batch * m, 1, 0, 0
    else:
        if a_batch not in (1, batch) or b_batch != batch:
            from ...errors import ModelError
            raise ModelError(f"quantized MatMul of {list(a_shape)} x {list(b_shape)}: batch "
                             "broadcasting other than a shared or single B is not supported")
        rows, steps = m, batch
        a_step, b_step = (m * k if a_batch > 1 else 0), k * n
    a_flip, b_flip = a_dtype == "uint8", b_dtype == "uint8" and not b_const
    need_rowsum = b_zp
    need_colsum = (not b_const) and a_zp != 0
    acc_w = rows * n
    rs_w = rows if need_rowsum else 0
    cs_w = n if need_colsum else 0
    af_w = _words(rows * k) if a_flip else 0
    bf_w = _words(k * n) if b_flip else 0
    lay = {}
    off = 0
    for name, size in (("acc", acc_w), ("rowsum", rs_w), ("colsum", cs_w), ("af", af_w),
                       ("bf", bf_w), ("scr", scratch_words(rows, n, k))):
        lay[name] = off
        off += size
    at = "uint8_t" if a_dtype == "uint8" else "int8_t"
    bt = "uint8_t" if b_dtype == "uint8" and not b_const else "int8_t"
    yt = "float" if out == "float32" else f"{out}_t"
    body = [f"    int32_t *__restrict acc = (int32_t *)(ws + {lay['acc']});\n",
            f"    int32_t *__restrict scr = (int32_t *)(ws + {lay['scr']});\n"]
    if need_rowsum:
        body.append(f"    int32_t *__restrict rowsum = (int32_t *)(ws + {lay['rowsum']});\n")
    if need_colsum:
        body.append(f"    int32_t *__restrict colsum = (int32_t *)(ws + {lay['colsum']});\n")
    if out in ("int8", "uint8"):
        body.append(f"    const float flo = {float(lo - y_zp)!r}f, fhi = {float(hi - y_zp)!r}f;\n")
    if steps > 1:
        body.append(f"    for (long s = 0; s < {steps}; ++s) {{\n"
                    f"        const {at} *__restrict as = a + s * {a_step};\n"
                    f"        const {bt} *__restrict bs = b + s * {b_step};\n"
                    f"        {yt} *__restrict ys = y + s * {rows * n};\n")
    else:   # one step: a block, so that the step's names read the same
        body.append(f"    {{\n        const {at} *__restrict as = a;\n"
                    f"        const {bt} *__restrict bs = b;\n        {yt} *__restrict ys = y;\n")
    if a_flip:
        body.append(f"        int8_t *__restrict av = (int8_t *)(ws + {lay['af']});\n"
                    + _flip("av", "as", rows * k))
    else:
        body.append("        const int8_t *__restrict av = as;\n")
    if b_flip:
        body.append(f"        int8_t *__restrict bv = (int8_t *)(ws + {lay['bf']});\n"
                    + _flip("bv", "bs", k * n))
    else:
        body.append("        const int8_t *__restrict bv = (const int8_t *)bs;\n")
    if need_rowsum:
        body.append(f"""        for (long i = 0; i < {rows}; ++i) {{
            int32_t t = 0;
            for (long kk = 0; kk < {k}; ++kk) t += av[i * {k} + kk];
            rowsum[i] = t;
        }}
""")
    if need_colsum:
        body.append(f"""        for (long j = 0; j < {n}; ++j) colsum[j] = 0;
        for (long kk = 0; kk < {k}; ++kk)
            for (long j = 0; j < {n}; ++j) colsum[j] += bv[kk * {n} + j];
""")
    body.append(f"        {QGEMM_NAME}({rows}, {n}, {k}, av, {k}, bv, {n}, acc, {n}, "
                f"{int(paired)}, scr);\n")
    terms = (" - b_zp[j] * rowsum[i]" if need_rowsum else "") + \
        (f" - {a_zp} * colsum[j]" if need_colsum else "") + \
        (" - az * b_cols[j]" if rt_zp else "")
    if rt_zp:
        body.insert(0, f"    const int32_t az = (int32_t)a_zp[0] - {zp_shift};\n")
    if out == "int32":
        store = "ys[i * {n} + j] = v;"
    elif out == "float32":
        store = "ys[i * {n} + j] = (float)v * scale[j];"
    else:
        store = f"ys[i * {{n}} + j] = ({yt})rvk_requant(v, scale[j], flo, fhi, {y_zp});"
    body.append(f"""        for (long i = 0; i < {rows}; ++i)
            for (long j = 0; j < {n}; ++j) {{
                const int32_t v = acc[i * {n} + j] + bias[j]{terms};
                {store.format(n=n)}
            }}
    }}
""")
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
    return Lowered(Kernel("qmatmul", tuple(params), "".join(body), workspace=off,
                          support=support, macs=batch * m * n * k, spec=spec))
