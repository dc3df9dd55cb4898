"""Reduce* kernels (kind "reduce"; ArgMax, TopK & co. are in lines.py).

A reduction is laid out once (`layout`): size-1 axes dropped, neighbouring axes of one kind
(kept / reduced) merged, giving (size, stride, reduced) groups. When the reduced axes form one
block the input is (outer, r, inner):
  * inner == 1: rows of r contiguous elements; RVV accumulates whole registers (LMUL 8) and
    ends with one vfredusum/vfredmax/vfredmin into an m1 result;
  * inner > 1: the outputs of one `o` are accumulated together, contiguous along inner
    (RVV: strips of inner in vector accumulators, one unit-stride load per reduced index).
Otherwise (reduced axes split by kept ones) a scalar nested loop per output."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import List, Tuple

from ....dtypes import TABLE
from ...cfmt import flt, indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop
from ..math.vmath import exp_support
from .vreduce import reduce_rvv, vexp_sum
from ...rvv import guarded, header, vle, vse, vsetvl, vsetvlmax, vsplat, vt

declare_spec("reduce", ("fn", "dtype", "x_shape", "axes"))

L = 8   # LMUL of the vector forms


@dataclass(frozen=True)
class Form:
    """acc = step(acc, v) from init over the reduced set, then y = post(acc). `vacc`/`vred`:
    the RVV accumulate (of acc and v) and the final m1 reduction; "" = no vector form."""
    init: str
    step: str          # C expression of `a` (accumulator) and `v` (element)
    post: str = "a"    # C expression of `a` (and `n`, the reduced count)
    vacc: str = ""
    vred: str = ""

    def out(self, first: str) -> str:
        """post, reading `first` (the C expression of the set's first element) for X0."""
        return self.post.replace("X0", first)


_ADD = "__riscv_vfadd_vv_f32m8(a, v, vl)"
FORMS = {
    "ReduceSum": Form("0", "a + v", vacc=_ADD, vred="vfredusum"),
    "ReduceMean": Form("0", "a + v", "a * NINV", _ADD, "vfredusum"),
    "ReduceMax": Form("MIN", "v > a ? v : a", vacc="__riscv_vfmax_vv_f32m8(a, v, vl)",
                      vred="vfredmax"),
    "ReduceMin": Form("MAX", "v < a ? v : a", vacc="__riscv_vfmin_vv_f32m8(a, v, vl)",
                      vred="vfredmin"),
    # no vector product reduction exists: rows stay scalar, planes multiply in registers
    "ReduceProd": Form("1", "a * v", vacc="__riscv_vfmul_vv_f32m8(a, v, vl)"),
    "ReduceL1": Form("0", "a + fabsf(v)", vacc="__riscv_vfadd_vv_f32m8(a, __riscv_vfmax_vv_"
                     "f32m8(v, __riscv_vfrsub_vf_f32m8(v, 0.0f, vl), vl), vl)", vred="vfredusum"),
    "ReduceL2": Form("0", "a + v * v", "sqrtf(a)", "__riscv_vfmacc_vv_f32m8(a, v, v, vl)",
                     "vfredusum"),
    "ReduceSumSquare": Form("0", "a + v * v", vacc="__riscv_vfmacc_vv_f32m8(a, v, v, vl)",
                            vred="vfredusum"),
    "ReduceLogSum": Form("0", "a + v", "logf(a)", _ADD, "vfredusum"),
    "ReduceLogSumExp": Form("0", "a + expf(v - m)", "m + logf(a)"),   # after a max pass
}
_LIMITS = {"float32": ("INFINITY", "(-INFINITY)"), "int64": ("INT64_MAX", "INT64_MIN"),
           "int32": ("INT32_MAX", "INT32_MIN"), "int8": ("INT8_MAX", "INT8_MIN"),
           "uint8": ("UINT8_MAX", "0"), "bool": ("1", "0")}


# LogSumExp shifts by the max m only when m is finite, as onnxruntime does: a +inf element
# then gives +inf and a line of -inf gives -inf instead of e^(inf - inf) = NaN
LSE_FINITE = "m = (m == INFINITY || m == -INFINITY) ? 0.0f : m;"


def _sub(expr: str, **names: str) -> str:
    """`expr` with single-letter variables replaced (a, v, m are whole words in FORMS)."""
    return re.sub(r"\b([avm])\b", lambda mt: names.get(mt.group(1), mt.group(1)), expr)


def layout(shape, axes) -> List[Tuple[int, int, bool]]:
    """(size, stride, reduced) groups of `shape`: size-1 axes dropped, neighbours of one kind
    merged (row-major, so a merged group is contiguous over its parts)."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    strides.reverse()
    groups: List[Tuple[int, int, bool]] = []
    for d, (s, st) in enumerate(zip(shape, strides)):
        if s == 1:
            continue
        red = d in axes
        if groups and groups[-1][2] == red:
            groups[-1] = (groups[-1][0] * s, st, red)
        else:
            groups.append((int(s), st, red))
    return groups


def ori(groups) -> Tuple[int, int, int]:
    """(outer, r, inner) when the reduced groups are one block, else None."""
    kinds = [g[2] for g in groups]
    if kinds.count(True) > 1:
        return None
    if True not in kinds:
        return math.prod(g[0] for g in groups), 1, 1
    j = kinds.index(True)
    return (math.prod(g[0] for g in groups[:j]), groups[j][0],
            math.prod(g[0] for g in groups[j + 1:]))


def _outer_head(outer: int) -> str:
    """The head of the loop over o (a block with o fixed when there is one)."""
    return "{\n    const long o = 0;" if outer == 1 else \
        f"for (long o = 0; o < {outer}; ++o) {{"


def _terms(fn: str, dtype: str, n: int) -> Form:
    f = FORMS[fn]
    hi, lo = _LIMITS[dtype]
    init = {"MIN": lo, "MAX": hi}.get(f.init, f.init + (".0f" if dtype == "float32" else ""))
    # the mean of an empty set is 0/0 (NaN, as onnxruntime gives)
    ninv = flt(1.0 / n) if n else "NAN"
    post = f.post.replace("NINV", ninv)
    if fn in ("ReduceMax", "ReduceMin") and dtype == "float32" and n:
        # onnxruntime's NaN rule (1.32, measured on rows, planes and split axes), not IEEE's:
        # its folds start from the first element and step on `v > a`, so a NaN first element
        # is the result and a later NaN is skipped. Our folds skip every NaN (comparison,
        # vfmax/vfredmax), so the first element decides afterwards.
        post = "X0 != X0 ? X0 : a"
    return Form(init, f.step, post, f.vacc, f.vred)


def _rows(fn, ty, f, outer, r) -> str:
    """Portable: one accumulator per row of r contiguous elements."""
    lse = fn == "ReduceLogSumExp"
    pre = loop("k", 0, r, "m = xp[k] > m ? xp[k] : m;", "long") if lse else ""
    pre = f"float m = -INFINITY;\n{pre}\n{LSE_FINITE}\n" if lse else ""
    step = loop("k", 0, r, f"const {ty} v = xp[k];\na = {f.step};", "long")
    return loop("o", 0, outer, f"""const {ty} *__restrict xp = x + o * {r};
{pre}{ty} a = {f.init};
{step}
y[o] = {f.out("xp[0]")};""", "long")


def _rows_rvv(f, outer, r) -> str:
    """RVV rows: whole registers accumulate with vacc (every lane defined), then one m1
    reduction of the accumulator and one of the (mapped) remainder."""
    tail = _sub(f.vacc, a=vsplat(L, f.init), v="vt")
    return f"""const size_t vm = {vsetvlmax(L)};
{_outer_head(outer)}
    const float *__restrict xp = x + o * {r};
    {vt(L)} acc = {vsplat(L, f.init, 'vm')};
    size_t k = 0;
    for (; k + vm <= (size_t){r}; k += vm) {{
        const size_t vl = vm;
        const {vt(L)} v = {vle(L, 'xp + k')};
        acc = {_sub(f.vacc, a='acc')};
    }}
    vfloat32m1_t r1 = __riscv_vfmv_v_f_f32m1({f.init}, 1);
    r1 = __riscv_{f.vred}_vs_f32m8_f32m1(acc, r1, vm);
    if (k < (size_t){r}) {{
        const size_t vl = {vsetvl(L, f'(size_t){r} - k')};
        const {vt(L)} vt = {vle(L, 'xp + k')};
        r1 = __riscv_{f.vred}_vs_f32m8_f32m1({tail}, r1, vl);
    }}
    const float a = __riscv_vfmv_f_s_f32m1_f32(r1);
    y[o] = {f.out("xp[0]")};
}}"""


def _lse_rvv(outer: int, r: int) -> str:
    """RVV LogSumExp rows: a vector max, then the vector-exp sum."""
    return f"""{_outer_head(outer)}
    const float *__restrict xp = x + o * {r};
    float m;
    {{
{indent(reduce_rvv("max", "xp", str(r), "-INFINITY"), 2)}
        m = red;
    }}
    {LSE_FINITE}
{indent(vexp_sum("s", "xp", r, "m"))}
    y[o] = m + logf(s);
}}"""


def _planes(fn, ty, f, outer, r, inner) -> str:
    """Portable: the `inner` outputs of one `o` accumulate together in y (LogSumExp: the max in
    y, the sum in ws)."""
    lse = fn == "ReduceLogSumExp"
    acc = "ws[i]" if lse else "yp[i]"
    head = f"""const {ty} *__restrict xp = x + o * {r * inner};
{ty} *__restrict yp = y + o * {inner};
for (long i = 0; i < {inner}; ++i) yp[i] = {"-INFINITY" if lse else f.init};
"""
    if lse:
        head += f"""for (long k = 0; k < {r}; ++k)
    for (long i = 0; i < {inner}; ++i)
        yp[i] = xp[k * {inner} + i] > yp[i] ? xp[k * {inner} + i] : yp[i];
for (long i = 0; i < {inner}; ++i) {{
    float m = yp[i];
    {LSE_FINITE}
    yp[i] = m;
    ws[i] = 0.0f;
}}
"""
    step = _sub(f.step, a=acc, v=f"xp[k * {inner} + i]", m="yp[i]")
    post = "" if f.post == "a" else \
        f"\nfor (long i = 0; i < {inner}; ++i) yp[i] = " \
        f"{_sub(f.out('xp[i]'), a=acc, m='yp[i]')};"
    body = f"""{head}for (long k = 0; k < {r}; ++k)
    for (long i = 0; i < {inner}; ++i) {acc} = {step};{post}"""
    return loop("o", 0, outer, body, "long")


def _planes_rvv(f, outer, r, inner) -> str:
    if f.post == "a":
        vpost = ""
    elif f.post == "sqrtf(a)":
        vpost = "acc = __riscv_vfsqrt_v_f32m8(acc, vl);\n"
    elif f.post.startswith("a * "):   # the mean: a literal reciprocal of the count
        vpost = f"acc = __riscv_vfmul_vf_f32m8(acc, {f.post[4:]}, vl);\n"
    else:
        vpost = None
    scalar_post = "" if vpost is not None else \
        f"\nfor (long i = 0; i < {inner}; ++i) {{ const float a = yp[i]; " \
        f"yp[i] = {f.out('xp[i]')}; }}"
    return f"""{_outer_head(outer)}
    const float *__restrict xp = x + o * {r * inner};
    float *__restrict yp = y + o * {inner};
    for (size_t i = 0; i < {inner};) {{
        const size_t vl = {vsetvl(L, f'{inner} - i')};
        {vt(L)} acc = {vsplat(L, f.init)};
        for (long k = 0; k < {r}; ++k) {{
            const {vt(L)} v = {vle(L, f'xp + k * {inner} + i')};
            acc = {_sub(f.vacc, a='acc')};
        }}
{indent(vpost, 2) + chr(10) if vpost else ''}        {vse(L, 'yp + i', 'acc')}
        i += vl;
    }}{indent(scalar_post)}
}}"""


def over_reduced(red, stmts: str) -> str:
    """`stmts` inside nested loops r0, r1, ... over the reduced groups [(size, stride)]."""
    for j, (s, _) in reversed(list(enumerate(red))):
        stmts = f"for (long r{j} = 0; r{j} < {s}; ++r{j}) {{\n{indent(stmts)}\n}}"
    return stmts


def _general(fn, ty, f, groups) -> str:
    """Scalar nest: kept groups outside (outputs in order), reduced groups inside."""
    kept = [(s, st) for s, st, red in groups if not red]
    red = [(s, st) for s, st, red in groups if red]
    base = " + ".join(f"k{j} * {st}" for j, (_, st) in enumerate(kept)) or "0"
    off = " + ".join(f"r{j} * {st}" for j, (_, st) in enumerate(red)) or "0"
    pre = ""
    if fn == "ReduceLogSumExp":
        pre = "float m = -INFINITY;\n" + \
            over_reduced(red, f"m = xb[{off}] > m ? xb[{off}] : m;") + f"\n{LSE_FINITE}\n"
    body = f"""const {ty} *__restrict xb = x + {base};
{pre}{ty} a = {f.init};
{over_reduced(red, f"const {ty} v = xb[{off}];{chr(10)}a = {f.step};")}
y[oi++] = {f.out("xb[0]")};"""
    for j, (s, _) in reversed(list(enumerate(kept))):
        body = f"for (long k{j} = 0; k{j} < {s}; ++k{j}) {{\n{indent(body)}\n}}"
    return f"long oi = 0;\n{body}"


def reduce(fn: str, dtype: str, x_shape, axes, axes_param: str = "") -> Lowered:
    """Reduce op `fn` of an x of `dtype` over `axes` (sorted; () reduces nothing: each output
    is its element mapped). `axes_param`: dtype of a constant axes input bound to the kernel."""
    groups = layout(x_shape, axes)
    r_all = math.prod(int(x_shape[d]) for d in axes)
    f = _terms(fn, dtype, r_all)
    ty = TABLE[dtype].ctype
    shape = ori(groups)
    ws = 0
    rvv = ""
    support = header()
    if shape is None:
        code = _general(fn, ty, f, groups)
    elif shape[2] == 1:
        code = _rows(fn, ty, f, shape[0], shape[1])
        if f.vred and dtype == "float32":
            rvv = _rows_rvv(f, shape[0], shape[1])
        elif fn == "ReduceLogSumExp":
            rvv = _lse_rvv(shape[0], shape[1])
            support.update(exp_support(4))
    else:
        code = _planes(fn, ty, f, *shape)
        ws = shape[2] if fn == "ReduceLogSumExp" else 0
        if f.vacc and dtype == "float32":
            rvv = _planes_rvv(f, *shape)
    params = [Param("x", dtype=dtype)]
    pre = ""
    if axes_param:
        params.append(Param("axes", dtype=axes_param))
        pre = "(void)axes;\n"
    params.append(Param("y", const=False, dtype=dtype))
    body = pre + (guarded("(void)ws;\n" * bool(ws) + rvv, code) if rvv else code)
    spec = make_spec("reduce", fn=fn, dtype=dtype, x_shape=tuple(x_shape), axes=tuple(axes))
    return Lowered(Kernel(fn.lower(), tuple(params), indent(body), workspace=ws,
                          support=support if rvv else {}, spec=spec))
