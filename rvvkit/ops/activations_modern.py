"""The activations of modern networks as rows of the activation table (activations.py):
HardSigmoid, HardSwish, Gelu (erf and tanh forms), SiLU (rvvkit.Silu, what passes/patterns.py
makes of x * Sigmoid(x)) and Swish. Each is folded, lowered as a unary kernel on every target
and fused into its producer's epilogue like any activation.

Vector forms: HardSigmoid/HardSwish are a few min/max/mul/add intrinsics; SiLU, Swish and the
tanh GELU are x / (1 + e^a) on the vector exp of codegen/kernels/math/vmath.py (the tanh GELU is
x sigmoid(2u) exactly); the erf GELU calls the helper of codegen/kernels/math/vgelu.py."""
from __future__ import annotations

import math

import numpy as np

from ..ir import Graph, Node
from .activations import Act, ActivationDef, _v, _vmath, define, lit
from .registry import bad


def _hard_sigmoid_c(v, alpha, beta):
    # comparisons, not fminf/fmaxf: without -ffinite-math-only those are libm calls on x86
    # (their NaN rule is not the min/max instructions'), which keep the loop scalar
    t = f"{lit(alpha)} * {v} + {lit(beta)}"
    return f"({t} < 0.0f ? 0.0f : ({t} > 1.0f ? 1.0f : {t}))"


def _hard_sigmoid_rvv(v, lmul, vl, alpha, beta):
    # a NaN stays NaN (onnxruntime's HardSigmoid, and the C form's comparisons): the masked
    # clamp of rvvkit.codegen.rvv (the linear term is spelled thrice; compilers compute it once)
    from ..codegen.rvv import vclamp
    scaled = f"{_v('vfmul_vf', lmul)}({v}, {lit(alpha)}, {vl})"
    lin = f"{_v('vfadd_vf', lmul)}({scaled}, {lit(beta)}, {vl})"
    return vclamp(lmul, lin, "0.0f", "1.0f", vl)


def _hard_sigmoid_np(x, alpha, beta):
    return np.clip(alpha * x + beta, 0, 1)


# HardSwish is x * HardSigmoid(x) with alpha = 1/6, beta = 1/2 (= x * relu6(x + 3) / 6)
_SIXTH = 1.0 / 6.0
_SQRT_HALF = 0.7071067811865476      # 1/sqrt(2), GELU's erf argument scale
_SQRT_2_PI = 0.7978845608028654      # sqrt(2/pi), the tanh approximation's scale


def _erf_np(x):
    """numpy has no erf: math.erf per element in float64 (folding and references only)."""
    return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))


def _gelu_tanh_np(x):
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1 + np.tanh(_SQRT_2_PI * (x + 0.044715 * x ** 3)))


def _x_over_1_plus_exp(v, lmul, vl, arg):
    """v / (1 + e^arg) on vectors: SiLU (arg = -v) and the tanh GELU, which is
    x sigmoid(2u) = x / (1 + e^(-2u)) exactly."""
    e = f"rvk_vexp_f32m{lmul}({arg}, {vl})"
    return f"{_v('vfdiv_vv', lmul)}({v}, {_v('vfadd_vf', lmul)}({e}, 1.0f, {vl}), {vl})"


# -2u = -2 sqrt(2/pi) x (1 + 0.044715 x^2) = c1 x + (c2 x^2) x: one fused multiply-add and no
# multiply feeding an add, so the C form (a compiler may fuse those) gives the same bits
_GELU_C1 = -2 * _SQRT_2_PI
_GELU_C2 = -2 * _SQRT_2_PI * 0.044715


def _gelu_tanh_rvv(v, lmul, vl):
    sq = f"{_v('vfmul_vv', lmul)}({v}, {v}, {vl})"
    arg = (f"{_v('vfmacc_vv', lmul)}({_v('vfmul_vf', lmul)}({v}, {lit(_GELU_C1)}, {vl}), "
           f"{_v('vfmul_vf', lmul)}({sq}, {lit(_GELU_C2)}, {vl}), {v}, {vl})")
    return _x_over_1_plus_exp(v, lmul, vl, arg)


def _gelu_tanh_c(v):
    """x / (1 + e^(-2u)), in the RVV form's steps."""
    arg = f"fmaf(({v}) * ({v}) * {lit(_GELU_C2)}, ({v}), ({v}) * {lit(_GELU_C1)})"
    return f"(({v}) / (1.0f + rvk_expf({arg})))"


def _swish_act(alpha: float) -> "Act":
    return Act("silu") if alpha == 1.0 else Act("swish", (alpha,))


def _vgelu():
    """rvvkit.codegen.kernels.math.vgelu, imported when a kernel asks (as activations._vmath)."""
    from ..codegen.kernels.math import vgelu
    return vgelu


def _gelu_mode(node: Node, g: Graph) -> None:
    mode = node.attrs.get("approximate", "none")
    if mode not in ("none", "tanh"):
        raise bad(node, f"approximate={mode!r}: Gelu takes 'none' or 'tanh'")
    node.attrs["approximate"] = mode


_ROWS = (
    ActivationDef(
        "hard_sigmoid", ("HardSigmoid",),
        numpy=_hard_sigmoid_np, c=_hard_sigmoid_c, rvv=_hard_sigmoid_rvv,
        of_node=lambda n: Act("hard_sigmoid", (float(n.attrs.get("alpha", 0.2)),
                                               float(n.attrs.get("beta", 0.5))))),
    ActivationDef(
        "hard_swish", ("HardSwish",),
        numpy=lambda x: x * _hard_sigmoid_np(x, _SIXTH, 0.5),
        c=lambda v: f"({v} * {_hard_sigmoid_c(v, _SIXTH, 0.5)})",
        rvv=lambda v, lmul, vl: (
            f"{_v('vfmul_vv', lmul)}({v}, {_hard_sigmoid_rvv(v, lmul, vl, _SIXTH, 0.5)}, {vl})")),
    ActivationDef(
        "gelu", ("Gelu",),
        numpy=lambda x: 0.5 * x * (1 + _erf_np(x * _SQRT_HALF)),
        c=lambda v: f"rvk_geluf({v})",
        rvv=lambda v, lmul, vl: f"rvk_vgelu_f32m{lmul}({v}, {vl})",
        rvv_support=lambda lmul: _vgelu().gelu_support(lmul),
        of_node=lambda n: Act("gelu_tanh" if n.attrs.get("approximate") == "tanh" else "gelu"),
        canonical=_gelu_mode),
    ActivationDef(   # Gelu(approximate="tanh"): no op of its own (of_node above picks it)
        "gelu_tanh", (),
        numpy=_gelu_tanh_np,
        c=_gelu_tanh_c, rvv=_gelu_tanh_rvv, rvv_support=lambda lmul: _vmath().exp_support(lmul)),
    ActivationDef(   # x * sigmoid(x): what passes/patterns.py makes of Mul(x, Sigmoid(x))
        "silu", ("rvvkit.Silu",),
        numpy=lambda x: x / (1 + np.exp(-x)),
        # x / (1 + e^-x): one rounding where x * sigmoid(x) has two, as the RVV form
        c=lambda v: f"(({v}) / (1.0f + rvk_expf(-({v}))))",
        rvv=lambda v, lmul, vl: _x_over_1_plus_exp(
            v, lmul, vl, f"{_v('vfmul_vf', lmul)}({v}, -1.0f, {vl})"),
        rvv_support=lambda lmul: _vmath().exp_support(lmul)),
    ActivationDef(   # x * sigmoid(alpha x) (opset 24; QuickGELU is alpha = 1.702)
        "swish", ("Swish",),
        numpy=lambda x, alpha: x / (1 + np.exp(-alpha * x)),
        c=lambda v, alpha: f"(({v}) / (1.0f + rvk_expf({lit(-alpha)} * ({v}))))",
        rvv=lambda v, lmul, vl, alpha: _x_over_1_plus_exp(
            v, lmul, vl, f"{_v('vfmul_vf', lmul)}({v}, {lit(-alpha)}, {vl})"),
        rvv_support=lambda lmul: _vmath().exp_support(lmul),
        of_node=lambda n: _swish_act(float(n.attrs.get("alpha", 1.0)))),
)

for _row in _ROWS:
    define(_row)
