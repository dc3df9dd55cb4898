"""Kernels that treat each line of one axis on its own: ArgMax/ArgMin, TopK, Hardmax,
LpNormalization (kind "lines", one C body per line, which the CUDA form runs one thread per
line) and CumSum (kind "cumsum", accumulated row after row so the inner loop is contiguous).

The input is viewed as (outer, n, inner) with the axis in the middle; line `ln` is
(o, i) = (ln / inner, ln % inner) and reads x[o * n * inner + k * inner + i] for k in [0, n)."""
from __future__ import annotations

from typing import List, Tuple

from ....dtypes import TABLE
from ...cfmt import indent
from ...loops import loop
from ...rvv import guarded, header, vle, vse, vsetvl
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec

# rows = (outer, n, inner); k = TopK's K or LpNormalization's p; flag = select_last_index
# (ArgMax/ArgMin) or largest (TopK)
declare_spec("lines", ("fn", "dtype", "rows", "k", "flag"))
declare_spec("cumsum", ("dtype", "rows", "exclusive", "reverse"))


def _origin(n: int, inner: int, per_line: int) -> str:
    """Declarations of `base` (first input element of line ln) and `ob` (first output element,
    lines of `per_line` elements)."""
    if inner == 1:
        return f"const long base = ln * {n};\nconst long ob = ln * {per_line};"
    return (f"const long base = (ln / {inner}) * {n * inner} + ln % {inner};\n"
            f"const long ob = (ln / {inner}) * {per_line * inner} + ln % {inner};")


def line_body(spec: dict) -> Tuple[int, str]:
    """(number of lines, C statements for line `ln`) of a "lines" kernel; the C kernel loops
    over ln, the CUDA kernel gives each line a thread."""
    fn, ty = spec["fn"], TABLE[spec["dtype"]].ctype
    outer, n, inner = spec["rows"]
    s = inner   # element stride along the axis
    if fn in ("ArgMax", "ArgMin"):
        cmp = (">" if fn == "ArgMax" else "<") + ("=" if spec["flag"] else "")
        body = f"""{_origin(n, inner, 1)}
const {ty} *__restrict xp = x + base;
{ty} best = xp[0];
long bi = 0;
for (long k = 1; k < {n}; ++k) {{
    const {ty} v = xp[k * {s}];
    if (v {cmp} best) {{
        best = v;
        bi = k;
    }}
}}
y[ob] = (int64_t)bi;"""
    elif fn == "TopK":
        kk, better = spec["k"], ">" if spec["flag"] else "<"
        # insertion into the sorted outputs; equal values keep their input order
        body = f"""{_origin(n, inner, kk)}
const {ty} *__restrict xp = x + base;
{ty} *__restrict vp = values + ob;
int64_t *__restrict ip = indices + ob;
long cnt = 0;
for (long j = 0; j < {n}; ++j) {{
    const {ty} v = xp[j * {s}];
    if (cnt == {kk} && !(v {better} vp[{(kk - 1) * s}])) continue;
    long p = cnt < {kk} ? cnt++ : {kk - 1};
    for (; p > 0 && v {better} vp[(p - 1) * {s}]; --p) {{
        vp[p * {s}] = vp[(p - 1) * {s}];
        ip[p * {s}] = ip[(p - 1) * {s}];
    }}
    vp[p * {s}] = v;
    ip[p * {s}] = (int64_t)j;
}}"""
    elif fn == "Hardmax":
        body = f"""{_origin(n, inner, n)}
const float *__restrict xp = x + base;
float *__restrict yp = y + ob;
float best = xp[0];
long bi = 0;
for (long k = 1; k < {n}; ++k)
    if (xp[k * {s}] > best) {{
        best = xp[k * {s}];
        bi = k;
    }}
for (long k = 0; k < {n}; ++k) yp[k * {s}] = k == bi ? 1.0f : 0.0f;"""
    elif fn == "LpNormalization":
        term = "fabsf(v)" if spec["k"] == 1 else "v * v"
        norm = "s" if spec["k"] == 1 else "sqrtf(s)"
        body = f"""{_origin(n, inner, n)}
const float *__restrict xp = x + base;
float *__restrict yp = y + ob;
float s = 0.0f;
for (long k = 0; k < {n}; ++k) {{
    const float v = xp[k * {s}];
    s += {term};
}}
const float nrm = s == 0.0f ? INFINITY : {norm};   /* a zero line stays 0, not 0/0 */
for (long k = 0; k < {n}; ++k) yp[k * {s}] = xp[k * {s}] / nrm;"""
    else:
        raise ValueError(f"no line kernel for {fn}")
    return outer * inner, body


def _params(fn: str, dtype: str, const_dtype: str) -> List[Param]:
    x = Param("x", dtype=dtype)
    if fn in ("ArgMax", "ArgMin"):
        return [x, Param("y", const=False, dtype="int64")]
    if fn == "TopK":   # K is bound only when it is an input (from opset 10)
        return [x] + [Param("k", dtype=const_dtype)] * bool(const_dtype) + \
            [Param("values", const=False, dtype=dtype),
             Param("indices", const=False, dtype="int64")]
    return [x, Param("y", const=False)]


def lines(fn: str, dtype: str, rows, k: int = 0, flag: int = 0, const_dtype: str = "int64"
          ) -> Lowered:
    """Line kernel of `fn` over x viewed as rows = (outer, n, inner). `const_dtype`: the dtype
    of TopK's constant K input, bound to the kernel and unused ("": K is an attribute)."""
    spec = make_spec("lines", fn=fn, dtype=dtype, rows=tuple(rows), k=k, flag=flag)
    count, body = line_body(spec)
    params = _params(fn, dtype, const_dtype)
    pre = "(void)k;\n" if fn == "TopK" and const_dtype else ""
    code = pre + loop("ln", 0, count, body, "long")
    if fn == "LpNormalization" and rows[2] == 1:
        code = guarded(_lp_rvv(rows[0], rows[1], k), code)
    return Lowered(Kernel(fn.lower(), tuple(params), indent(code),
                          support=header() if "#if" in code else {}, spec=spec))


def _lp_rvv(lines: int, n: int, p: int) -> str:
    """RVV LpNormalization of contiguous rows: a vector norm, then a strip-mined scaling."""
    from .normalize import vsum
    norm = "s" if p == 1 else "sqrtf(s)"
    return loop("ln", 0, lines, f"""const float *__restrict xp = x + ln * {n};
float *__restrict yp = y + ln * {n};
{vsum("s", "xp", n, "abs" if p == 1 else "sq")}
const float r = s == 0.0f ? 0.0f : 1.0f / {norm};   /* a zero line stays 0, not 0 * inf */
for (size_t k = 0; k < {n};) {{
    const size_t vl = {vsetvl(8, f"{n} - k")};
    {vse(8, "yp + k", f"__riscv_vfmul_vf_f32m8({vle(8, 'xp + k')}, r, vl)")}
    k += vl;
}}""", "long")


def cumsum(dtype: str, rows, exclusive: bool, reverse: bool, axis_dtype: str) -> Lowered:
    """y[k] = y[k-1] + x[k] (exclusive: + x[k-1]; reverse: k runs backwards), a whole row of
    `inner` elements at a time."""
    outer, n, inner = rows
    ty = TABLE[dtype].ctype

    def at(j: str) -> str:   # the row index of step j
        return f"({n - 1} - {j})" if reverse else j
    first = "(" + ty + ")0" if exclusive else f"xp[{at('0')} * {inner} + i]"
    src = at("(j - 1)") if exclusive else at("j")
    body = f"""const {ty} *__restrict xp = x + o * {n * inner};
{ty} *__restrict yp = y + o * {n * inner};
{loop("i", 0, inner, f"yp[{at('0')} * {inner} + i] = {first};", "long")}
for (long j = 1; j < {n}; ++j) {{
{indent(loop("i", 0, inner, f"yp[{at('j')} * {inner} + i] = "
                                f"yp[{at('(j - 1)')} * {inner} + i] + xp[{src} * {inner} + i];",
                  "long"))}
}}"""
    code = "(void)axis;\n" + loop("o", 0, outer, body, "long")
    params = (Param("x", dtype=dtype), Param("axis", dtype=axis_dtype),
              Param("y", const=False, dtype=dtype))
    spec = make_spec("cumsum", dtype=dtype, rows=tuple(rows), exclusive=int(exclusive),
                     reverse=int(reverse))
    return Lowered(Kernel("cumsum", params, indent(code), spec=spec))
