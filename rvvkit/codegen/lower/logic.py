"""C lowerings of the typed element-wise ops: comparisons, logic, IsNaN/IsInf, Where, Cast,
CastLike, Pow, Mod, Min/Max/Mean, PRelu, BitShift, and the integer forms of Add/Sub/Mul/Div/Sum
and Abs/Neg/Sign (core.py hands non-float nodes of those here). Each is one C expression over
the operands a0, a1, ... of the typed element-wise kernel (kernels/math/logic.py)."""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np

from ... import dtypes
from ...ir import Graph, Node
from ...ops.logic import COMPARE, LOGIC
from ...ops.registry import bad, lowering
from .. import half
from ..kernel import Lowered
from ..kernels.math.logic import ewise, floor_mod, min_max

_CMP = {"Equal": "==", "Less": "<", "LessOrEqual": "<=", "Greater": ">", "GreaterOrEqual": ">="}
_LOGIC = {"And": "&", "Or": "|", "Xor": "^"}
_ARITH = {"Add": "+", "Sub": "-", "Mul": "*", "Sum": "+"}


def _ctype(g: Graph, name: str) -> str:
    return dtypes.of(g.t(name).dtype).ctype


def _lower(n: Node, g: Graph, expr: str, support: Dict[str, str] = None) -> Lowered:
    ins = [i for i in n.inputs if i]
    out = g.t(n.outputs[0])
    return ewise(n.op, expr, [g.t(i).shape for i in ins], [g.t(i).dtype.name for i in ins],
                 out.shape, out.dtype.name, support)


def _chain(sym: str, k: int) -> str:
    return f" {sym} ".join(f"a{j}" for j in range(k))


@lowering(*COMPARE)
def _compare(n: Node, g: Graph) -> Lowered:
    return _lower(n, g, f"a0 {_CMP[n.op]} a1")


@lowering(*LOGIC)
def _logic(n: Node, g: Graph) -> Lowered:
    return _lower(n, g, f"a0 {_LOGIC[n.op]} a1")   # bools are 0/1: bitwise is logical


@lowering("Not")
def _not(n: Node, g: Graph) -> Lowered:
    return _lower(n, g, "!a0")


@lowering("IsNaN")
def _isnan(n: Node, g: Graph) -> Lowered:
    return _lower(n, g, "isnan(a0)")


@lowering("IsInf")
def _isinf(n: Node, g: Graph) -> Lowered:
    tests = []
    if n.attrs.get("detect_positive", 1):
        tests.append("a0 == INFINITY")
    if n.attrs.get("detect_negative", 1):
        tests.append("a0 == -INFINITY")
    return _lower(n, g, " || ".join(tests) or "0")


@lowering("Where")
def _where(n: Node, g: Graph) -> Lowered:
    return _lower(n, g, "a0 ? a1 : a2")


# float -> integer through a call the compiler cannot vectorise on RISC-V: a plain cast loop
# becomes vfcvt.rtz.* vector conversions, on which QEMU 7.2 (Debian 12's) aborts.
TRUNC = {"hd_rvk_trunc_i64": """\
#if defined(__riscv) && !defined(__CUDACC__) && !defined(RVK_CUDA_EMU)
__attribute__((noinline, unused)) static int64_t rvk_trunc_i64(float a) {
#else
static RVK_HD inline int64_t rvk_trunc_i64(float a) {
#endif
    return (int64_t)a;   /* toward zero, as ONNX Cast asks */
}"""}


TRUNC_DOUBLE = {"hd_rvk_trunc_d_i64": TRUNC["hd_rvk_trunc_i64"].replace(
    "rvk_trunc_i64(float a)", "rvk_trunc_d_i64(double a)")}


def _cast_expr(src: str, dst: str) -> Tuple[str, Dict[str, str]]:
    """ONNX Cast as C: to bool is != 0; float -> integer truncates toward zero (a C cast);
    float16 converts through float32 (codegen/half.py), exactly: float32 holds every half, and
    every integer that rounds to a finite half is exact in float32 too (float64 -> float16
    rounds twice, which differs from one rounding only within a float32 ulp of a half tie)."""
    if src == dst:
        return "a0", {}
    if src == "float64" and dst not in ("float32", "float16", "bool"):
        return f"({dtypes.TABLE[dst].ctype})rvk_trunc_d_i64(a0)", TRUNC_DOUBLE
    if src == "float16":
        if dst == "bool":
            return "(a0 & 0x7fffu) != 0", {}   # +-0 are false; NaN is true, as != 0 says
        expr, support = _cast_expr("float32", dst)
        return expr.replace("a0", "rvk_h2f(a0)"), {**half.TO_FLOAT, **support}
    if dst == "float16":
        return "rvk_f2h((float)a0)", dict(half.FROM_FLOAT)
    if dst == "bool":
        return "a0 != 0", {}
    if src == "float32" and dst != "float64":
        return f"({dtypes.TABLE[dst].ctype})rvk_trunc_i64(a0)", TRUNC
    return f"({dtypes.TABLE[dst].ctype})a0", {}


@lowering("Cast", "CastLike")
def _cast(n: Node, g: Graph) -> Lowered:
    return _lower(n, g, *_cast_expr(g.t(n.inputs[0]).dtype.name, g.t(n.outputs[0]).dtype.name))


def typed_nary(n: Node, g: Graph) -> Lowered:
    """Integer Add/Sub/Mul/Div/Sum (float32 ones are kernels/math/elementwise.py's nary). Division
    truncates toward zero, as C and onnxruntime do; x / 0 gives 0 instead of a trap."""
    if n.op == "Div":
        expr = "a1 == 0 ? 0 : a0 / a1"
    else:
        expr = _chain(_ARITH[n.op], len([i for i in n.inputs if i]))
    if n.act is not None:    # an integer Abs/Neg/Sign fused after it (passes/fuse.py)
        expr = _int_unary(n, g, n.act.kind).replace("a0", f"({expr})")
    return _lower(n, g, expr)


def _int_unary(n: Node, g: Graph, kind: str) -> str:
    forms = {"abs": "a0 < 0 ? -a0 : a0", "neg": "-a0", "sign": "(a0 > 0) - (a0 < 0)"}
    if g.t(n.outputs[0]).dtype == np.uint8:      # no sign: avoid always-false comparisons
        forms = {"abs": "a0", "neg": "-a0", "sign": "a0 != 0"}
    if kind not in forms:
        raise bad(n, f"{kind} computes on float32 only")
    return forms[kind]


def typed_unary(n: Node, g: Graph) -> Lowered:
    """Abs, Neg and Sign of integer tensors."""
    return _lower(n, g, _int_unary(n, g, n.op.lower()))


@lowering("Pow")
def _pow(n: Node, g: Graph) -> Lowered:
    base, expo = (g.t(i) for i in n.inputs[:2])
    if base.dtype != np.float32:    # through double, as onnxruntime computes integer powers
        return _lower(n, g, "pow((double)a0, (double)a1)")
    if g.is_const(n.inputs[1]) and expo.size == 1 and \
            float(g.const(n.inputs[1]).reshape(-1)[0]) == 2.0:
        return _lower(n, g, "a0 * a0")      # LayerNorm's square: exact, no libm call
    return _lower(n, g, "powf(a0, (float)a1)")


@lowering("Mod")
def _mod(n: Node, g: Graph) -> Lowered:
    ct = _ctype(g, n.inputs[0])
    if n.attrs["fmod"]:     # the remainder takes the dividend's sign: C's fmod and %
        if ct == "float":
            return _lower(n, g, "fmodf(a0, a1)")
        return _lower(n, g, "a1 == 0 ? 0 : a0 % a1")
    return _lower(n, g, f"rvk_mod_{ct}(a0, a1)", floor_mod(ct))


def _fold(fn: str, k: int) -> str:
    expr = "a0"
    for j in range(1, k):
        expr = f"{fn}({expr}, a{j})"
    return expr


@lowering("Min", "Max")
def _min_max(n: Node, g: Graph) -> Lowered:
    which, ct, k = n.op.lower(), _ctype(g, n.inputs[0]), len(n.inputs)
    # nvcc warns about a helper defined but not called (one input: no helper)
    return _lower(n, g, _fold(f"rvk_{which}_{ct}", k), min_max(which, ct) if k > 1 else {})


@lowering("Mean")
def _mean(n: Node, g: Graph) -> Lowered:
    k = len(n.inputs)
    return _lower(n, g, f"({_chain('+', k)}) / {k}.0f" if k > 1 else "a0")


@lowering("PRelu")
def _prelu(n: Node, g: Graph) -> Lowered:
    if g.t(n.inputs[0]).dtype == np.uint8:       # nothing is negative
        return _lower(n, g, "a0")
    return _lower(n, g, "a0 < 0 ? a0 * a1 : a0")


@lowering("BitShift")
def _bitshift(n: Node, g: Graph) -> Lowered:
    """Shift amounts outside [0, width) give 0 (-1 for a negative value shifted right); left
    shifts go through the unsigned type (no signed overflow)."""
    dt = g.t(n.inputs[0]).dtype
    width, ct = dt.itemsize * 8, _ctype(g, n.inputs[0])
    outside = f"a1 >= {width}" if dt == np.uint8 else f"a1 < 0 || a1 >= {width}"
    if n.attrs["direction"] == "LEFT":
        ut = f"uint{width}_t"
        return _lower(n, g, f"({outside}) ? 0 : ({ct})({ut})(({ut})a0 << a1)")
    far = "0" if dt == np.uint8 else "(a0 < 0 ? -1 : 0)"
    return _lower(n, g, f"({outside}) ? {far} : a0 >> a1")

