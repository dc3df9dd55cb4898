"""Element-wise kernels: n-ary broadcasting arithmetic with a fused activation, per-channel
affine, and copies. Loops are collapsed so the innermost one is long and unit-stride, which is
what lets gcc/clang vectorise them. Under RVV intrinsics the innermost loop is strip-mined
explicitly (LMUL 8): unit-stride operands are vector loads, broadcast ones scalar (`.vf`)
operands, and the activation is applied in registers (the vector helpers an activation's form
calls, such as vector exp, come with its `rvv_support`); activations without a vector form
keep the portable loop. Integer arithmetic is the typed kernel's (kernels/math/logic.py)."""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ....ops.activations import Act, act_expr, act_rvv_support, has_vector_form
from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, make_spec
from ...parallel import Split, parts_loop
from ...loops import broadcast_strides, collapse, loop, nest, strides_of
from ...rvv import guarded, header, vle, vop, vse, vsetvl, vsetvlmax, vsplat, vt

OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Sum": "+"}

# Elements per part of a split element-wise kernel: a multiple of every vector length, so the
# parts' bounds never change how an element is computed.
BLOCK = 16384


def nary(op: str, in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int],
         act: Optional[Act]) -> Lowered:
    """y = act(x0 <op> x1 <op> ...) with numpy broadcasting; params x0.., y."""
    names = [f"x{i}" for i in range(len(in_shapes))]
    strides = [broadcast_strides(s, out_shape) for s in in_shapes] + [strides_of(out_shape)]
    dims, sts = collapse(out_shape, strides)
    sym = OPERATORS[op]

    def body(idx):
        expr = f" {sym} ".join(f"x{i}[{idx[n]}]" for i, n in enumerate(names))
        return f"const float v = {expr};\ny[{idx['y']}] = {act_expr(act, 'v')};"

    dims, sts = _rows_of(dims, sts)
    code = nest(dims, sts, names + ["y"], body)
    rvv = _nary_rvv(dims, sts, names, sym, act)
    split = None
    if len(dims) > 1:   # the outermost loop's iterations are the parts threads share
        head = f"for (long i0 = 0; i0 < {dims[0]}; ++i0)"
        code, rvv = (_outer_parts(t, head) for t in (code, rvv))
        split = Split(dims[0], math.prod(dims) * (len(names) + 4))
    params = tuple(Param(n) for n in names) + (Param("y", const=False),)
    spec = make_spec("nary", operator=op, in_shapes=in_shapes, out_shape=out_shape, act=act)
    if rvv is None:
        return Lowered(Kernel(op.lower(), params, code, spec=spec, split=split))
    return Lowered(Kernel(op.lower(), params, guarded(rvv, code), support=_support(act),
                          spec=spec, split=split))


def _rows_of(dims, sts):
    """A long 1-D loop as rows of a divisor of its length (1024 to BLOCK elements, a multiple
    of 64: every vector length), so that threads can share it; other nests unchanged."""
    if len(dims) != 1 or dims[0] <= BLOCK:
        return dims, sts
    n = dims[0]
    for row in range(BLOCK, 1023, -64):
        if n % row == 0:
            return [n // row, row], [[st[0] * row, st[0]] for st in sts]
    return dims, sts


def _outer_parts(text, head: str):
    """`text` with its outermost loop over the parts rvk_lo..rvk_hi instead of all of them."""
    if text is None:
        return None
    assert text.count(head) == 1, head
    return text.replace(head, "for (long i0 = rvk_lo; i0 < rvk_hi; ++i0)")


L = 8   # LMUL of the element-wise strips: a value, one loaded operand and a temporary


def _support(act: Optional[Act]) -> dict:
    """The RVV header, then the helpers the activation's vector form calls."""
    return {**header(), **act_rvv_support(act, L)}

# (vector, vector), (vector, scalar), (scalar, vector) forms of each operator
_VV = {"+": "vfadd_vv", "-": "vfsub_vv", "*": "vfmul_vv", "/": "vfdiv_vv"}
_VF = {"+": "vfadd_vf", "-": "vfsub_vf", "*": "vfmul_vf", "/": "vfdiv_vf"}
_FV = {"+": "vfadd_vf", "-": "vfrsub_vf", "*": "vfmul_vf", "/": "vfrdiv_vf"}


def _strip(n: str, body: str, pad: str) -> str:
    """A strip-mined loop over i in [0, n): `body` sees `i` and `vl`."""
    inner = "\n".join(pad + "    " + line for line in body.splitlines())
    return f"""{pad}for (size_t i = 0; i < (size_t){n};) {{
{pad}    const size_t vl = {vsetvl(L, f'(size_t){n} - i')};
{inner}
{pad}    i += vl;
{pad}}}"""


def _nary_rvv(dims, sts, names, sym, act):
    """RVV version of the nary loop nest, or None when it has no vector form (activation
    without one, an innermost stride other than 0/1, a single-element output)."""
    if not has_vector_form(act) or dims[-1] == 1 or sts[-1][-1] != 1:
        return None
    if any(st[-1] not in (0, 1) for st in sts[:-1]):
        return None
    depth, pad = len(dims), "    "
    lines, ind = [], pad
    for k in range(depth - 1):
        lines.append(f"{ind}for (long i{k} = 0; i{k} < {dims[k]}; ++i{k}) {{")
        ind += pad
    base = {}
    for name, st in zip(names + ["y"], sts):
        terms = [f"i{k} * {st[k]}" for k in range(depth - 1) if st[k]]
        base[name] = f"{name} + {' + '.join(terms)}" if terms else name
    # broadcast operands are loaded once per outer iteration as scalars
    scal = {}
    for j, (name, st) in enumerate(zip(names, sts)):
        if st[-1] == 0:
            scal[name] = f"s{j}"
            lines.append(f"{ind}const float s{j} = *({base[name]});")
    body, cur = [], None     # cur: ("s", expr) or ("v", var)
    for j, name in enumerate(names):
        if name in scal:
            opnd = ("s", scal[name])
        else:
            body.append(f"const {vt(L)} v{j} = {vle(L, f'{base[name]} + i')};")
            opnd = ("v", f"v{j}")
        if cur is None:
            cur = opnd
            continue
        kinds = cur[0] + opnd[0]
        if kinds == "ss":
            cur = ("s", f"({cur[1]} {sym} {opnd[1]})")
        elif kinds == "vv":
            cur = ("v", f"{vop(_VV[sym], L)}({cur[1]}, {opnd[1]}, vl)")
        elif kinds == "vs":
            cur = ("v", f"{vop(_VF[sym], L)}({cur[1]}, {opnd[1]}, vl)")
        else:
            cur = ("v", f"{vop(_FV[sym], L)}({opnd[1]}, {cur[1]}, vl)")
    value = cur[1] if cur[0] == "v" else vsplat(L, cur[1])
    body.append(f"{vt(L)} v = {value};")
    if act is not None:
        body.append(f"v = {act.rvv_expr('v', L)};")
    body.append(vse(L, f"{base['y']} + i", "v"))
    lines.append(_strip(str(dims[-1]), "\n".join(body), ind))
    for k in range(depth - 2, -1, -1):
        lines.append(pad * (k + 1) + "}")
    return "\n".join(lines)


def _blocks(n: int):
    """(statements moving x and y to this range of blocks, its length, Split factory) for n
    elements split in BLOCKs; nothing to move when there is one block."""
    if n <= BLOCK:
        return "", str(n), lambda work: None
    head = f"""const long lo = (long)rvk_lo * {BLOCK};
const long len = ((long)rvk_hi * {BLOCK} < {n}L ? (long)rvk_hi * {BLOCK} : {n}L) - lo;
x += lo;
y += lo;
"""
    return head, "len", lambda work: Split(-(-n // BLOCK), work)


def unary(act: Act, shape: Sequence[int]) -> Lowered:
    n = math.prod(shape)
    head, cnt, split = _blocks(n)
    code = indent(head + loop("i", 0, n if cnt == str(n) else cnt,
                              f"const float v = x[i];\ny[i] = {act.c_expr('v')};",
                              ty="long", flat=True))
    params = (Param("x"), Param("y", const=False))
    spec = make_spec("unary", act=act, shape=shape)
    split = split(n * 16)
    if not has_vector_form(act):
        return Lowered(Kernel(act.kind, params, code, spec=spec, split=split))
    rvv = indent(head) + _strip(cnt, f"{vt(L)} v = {vle(L, 'x + i')};\n"
                                f"v = {act.rvv_expr('v', L)};\n{vse(L, 'y + i', 'v')}", "    ")
    return Lowered(Kernel(act.kind, params, guarded(rvv, code), support=_support(act), spec=spec,
                          split=split))


def _per_channel(batch: int, chans: int, size: int, head: str, inner: str) -> str:
    """Loops over (n, c) around `head` (per channel statements) and `inner` (the loop over
    the channel's `size` elements, between xp and yp); single-trip loops are left out. With
    one image, the channels are the parts threads share (`_channel_split`)."""
    body = f"""{head}
const float *__restrict xp = x + (n * {chans} + c) * {size};
float *__restrict yp = y + (n * {chans} + c) * {size};
{inner}"""
    channels = parts_loop("c", chans, body, flat=True)[0] if batch == 1 else \
        loop("c", 0, chans, body, "long", flat=True)
    return indent(loop("n", 0, batch, channels, "long", flat=True))


def _channel_split(shape) -> Optional[Split]:
    work = math.prod(shape) * 2
    return parts_loop("c", shape[1], "")[1](work) if shape[0] == 1 else None


def channel_affine(shape: Sequence[int], act: Optional[Act]) -> Lowered:
    """y[n, c, :] = act(x[n, c, :] * s[c] + t[c]): BatchNormalization and friends."""
    batch, chans = shape[0], shape[1]
    inner = math.prod(shape[2:])
    params = (Param("x"), Param("s"), Param("t"), Param("y", const=False))
    kw = dict(macs=batch * chans * inner, spec=make_spec("affine", shape=shape, act=act),
              split=_channel_split(shape))
    elems = loop("i", 0, inner, f"const float v = xp[i] * sc + sh;\nyp[i] = {act_expr(act, 'v')};",
                 "long", flat=True)
    code = _per_channel(batch, chans, inner, "const float sc = s[c], sh = t[c];", elems)
    if not has_vector_form(act):
        return Lowered(Kernel("affine", params, code, **kw))
    # y = x * sc + sh as one vfmadd (as the portable code contracts it) with sh splatted once
    fin = f"\nv = {act.rvv_expr('v', L)};" if act is not None else ""
    strip = _strip(str(inner), f"{vt(L)} v = {vle(L, 'xp + i')};\n"
                   f"v = {vop('vfmadd_vf', L)}(v, sc, shv, vl);{fin}\n{vse(L, 'yp + i', 'v')}",
                   "")
    head = f"const float sc = s[c];\nconst {vt(L)} shv = {vsplat(L, 't[c]', vsetvlmax(L))};"
    rvv = _per_channel(batch, chans, inner, head, strip)
    return Lowered(Kernel("affine", params, guarded(rvv, code), support=_support(act), **kw))


def copy(n_elems: int, dtype: str = "float32") -> Lowered:
    """y = x, for a tensor of any dtype (Identity, and aliases that must own their buffer)."""
    params = (Param("x", dtype=dtype), Param("y", const=False, dtype=dtype))
    spec = make_spec("copy", n_elems=n_elems, dtype=dtype)
    if dtype != "float32":   # RVK_MEMCPY moves float words; others are copied byte-exact
        return Lowered(Kernel(f"copy_{dtype}", params,
                              f"    memcpy(y, x, sizeof(*y) * {n_elems});", spec=spec))
    code = f"    RVK_MEMCPY(y, x, sizeof(float) * {n_elems});"
    return Lowered(Kernel("copy", params, code, support=header(), spec=spec))
