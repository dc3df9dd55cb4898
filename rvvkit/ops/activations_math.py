"""Unary float math as rows of the activation table (activations.py): Abs, Exp, Sqrt, the
trigonometric and hyperbolic functions, Erf, the exponential-linear units, Softplus and friends.
Each row is then folded, lowered as a unary kernel on every target and fused into the
epilogue of its producer like any activation. Vector (RVV) forms exist where the operation is
a few arithmetic intrinsics or a call of the vector exp helpers (rvvkit/codegen/kernels/
math/vmath.py); the rest run the portable loop, which calls the C library."""
from __future__ import annotations

import math

import numpy as np

from .activations import Act, ActivationDef, _v, _vmath, define, lit, relu_rvv
from .registry import REGISTRY


def _np(fn):
    """A numpy form computed in float64 (the reference rounds once, like the C library)."""
    return lambda x, *p: fn(np.asarray(x, np.float64), *p)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _libm(kind, op, numpy, cfn, rvv=None, rvv_support=None):
    """A row whose C form is one float function of <math.h> (or of the prelude: rvk_expf)."""
    return ActivationDef(kind, (op,), numpy=_np(numpy), c=lambda v: f"{cfn}({v})", rvv=rvv,
                         rvv_support=rvv_support)


def _neg(v, lmul, vl):
    return f"{_v('vfmul_vf', lmul)}({v}, -1.0f, {vl})"


def _exp_call(arg, lmul, vl):
    return f"rvk_vexp_f32m{lmul}({arg}, {vl})"


def _elu_rvv(v, lmul, vl, alpha, scale=1.0, inner=1.0):
    """scale * (max(v, 0) + alpha * expm1(min(v, 0) * inner)); the max keeps NaN (relu_rvv),
    so a NaN v gives NaN as in C and onnxruntime."""
    neg = f"{_v('vfmin_vf', lmul)}({v}, 0.0f, {vl})"
    if inner != 1.0:
        neg = f"{_v('vfmul_vf', lmul)}({neg}, {lit(inner)}, {vl})"
    out = (f"{_v('vfmacc_vf', lmul)}({relu_rvv(v, lmul, vl)}, {lit(alpha)}, "
           f"rvk_vexpm1_f32m{lmul}({neg}, {vl}), {vl})")
    return out if scale == 1.0 else f"{_v('vfmul_vf', lmul)}({out}, {lit(scale)}, {vl})"


def _elu_c(v, alpha, scale=1.0, inner=1.0):
    # rvk_expm1f: the RVV form's e^x - 1 step for step (codegen/expmath.py)
    neg = f"{lit(alpha)} * rvk_expm1f({v}{'' if inner == 1.0 else ' * ' + lit(inner)})"
    body = f"({v} > 0.0f ? {v} : {neg})"
    return body if scale == 1.0 else f"({lit(scale)} * {body})"


def _elu_np(x, alpha, scale=1.0, inner=1.0):
    x = np.asarray(x, np.float64)
    return scale * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0) * inner))


SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def _expm1_support(lmul):
    return _vmath().expm1_support(lmul)


def _exp_support(lmul):
    return _vmath().exp_support(lmul)


ROWS = (
    ActivationDef(
        "abs", ("Abs",), numpy=np.abs, c=lambda v: f"fabsf({v})",
        rvv=lambda v, lmul, vl: f"{_v('vfmax_vv', lmul)}({v}, {_neg(v, lmul, vl)}, {vl})"),
    ActivationDef(
        "neg", ("Neg",), numpy=np.negative, c=lambda v: f"(-({v}))", rvv=_neg),
    ActivationDef(
        "reciprocal", ("Reciprocal",), numpy=lambda x: 1 / x, c=lambda v: f"(1.0f / {v})",
        rvv=lambda v, lmul, vl: f"{_v('vfrdiv_vf', lmul)}({v}, 1.0f, {vl})"),
    _libm("sqrt", "Sqrt", np.sqrt, "sqrtf",
          rvv=lambda v, lmul, vl: f"{_v('vfsqrt_v', lmul)}({v}, {vl})"),
    # rvk_expf, not libm's: the same steps as the RVV form (codegen/expmath.py), so Exp gives
    # the same bits on every executor, and loops over it vectorise
    _libm("exp", "Exp", np.exp, "rvk_expf", rvv=_exp_call, rvv_support=_exp_support),
    _libm("log", "Log", np.log, "logf"),
    _libm("floor", "Floor", np.floor, "floorf"),
    _libm("ceil", "Ceil", np.ceil, "ceilf"),
    _libm("round", "Round", np.round, "nearbyintf"),     # halves to even, as ONNX asks
    _libm("sin", "Sin", np.sin, "sinf"),
    _libm("cos", "Cos", np.cos, "cosf"),
    _libm("tan", "Tan", np.tan, "tanf"),
    _libm("asin", "Asin", np.arcsin, "asinf"),
    _libm("acos", "Acos", np.arccos, "acosf"),
    _libm("atan", "Atan", np.arctan, "atanf"),
    _libm("sinh", "Sinh", np.sinh, "sinhf"),
    _libm("cosh", "Cosh", np.cosh, "coshf"),
    _libm("asinh", "Asinh", np.arcsinh, "asinhf"),
    _libm("acosh", "Acosh", np.arccosh, "acoshf"),
    _libm("atanh", "Atanh", np.arctanh, "atanhf"),
    _libm("erf", "Erf", _erf, "erff"),
    ActivationDef(   # NaN stays NaN in numpy; the C form gives 0 (ONNX leaves it open)
        "sign", ("Sign",), numpy=np.sign,
        c=lambda v: f"(float)(({v} > 0.0f) - ({v} < 0.0f))"),
    ActivationDef(   # log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)
        "softplus", ("Softplus",),
        numpy=_np(lambda x: np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))),
        c=lambda v: f"(fmaxf({v}, 0.0f) + log1pf(expf(-fabsf({v}))))",
        rvv=lambda v, lmul, vl: f"rvk_vsoftplus_f32m{lmul}({v}, {vl})",
        rvv_support=lambda lmul: _vmath().softplus_support(lmul)),
    ActivationDef(
        "softsign", ("Softsign",), numpy=lambda x: x / (1 + np.abs(x)),
        c=lambda v: f"({v} / (1.0f + fabsf({v})))",
        rvv=lambda v, lmul, vl: (
            f"{_v('vfdiv_vv', lmul)}({v}, {_v('vfadd_vf', lmul)}({_v('vfmax_vv', lmul)}({v}, "
            f"{_neg(v, lmul, vl)}, {vl}), 1.0f, {vl}), {vl})")),
    ActivationDef(
        "elu", ("Elu",), numpy=_elu_np, c=_elu_c, rvv=_elu_rvv, rvv_support=_expm1_support,
        of_node=lambda n: Act("elu", (float(n.attrs.get("alpha", 1.0)),))),
    ActivationDef(
        "selu", ("Selu",), numpy=_elu_np, c=_elu_c, rvv=_elu_rvv, rvv_support=_expm1_support,
        of_node=lambda n: Act("selu", (float(n.attrs.get("alpha", SELU_ALPHA)),
                                       float(n.attrs.get("gamma", SELU_GAMMA))))),
    ActivationDef(   # max(0, x) + min(0, a (e^(x/a) - 1)) = the ELU of x/a scaled by a
        "celu", ("Celu",),
        numpy=lambda x, a: _elu_np(x, a, 1.0, 1.0 / a),
        c=lambda v, a: _elu_c(v, a, 1.0, 1.0 / a),
        rvv=lambda v, lmul, vl, a: _elu_rvv(v, lmul, vl, a, 1.0, 1.0 / a),
        rvv_support=_expm1_support,
        of_node=lambda n: Act("celu", (float(n.attrs.get("alpha", 1.0)),))),
    ActivationDef(
        "mish", ("Mish",),
        numpy=_np(lambda x: x * np.tanh(np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))))),
        c=lambda v: f"({v} * tanhf(fmaxf({v}, 0.0f) + log1pf(expf(-fabsf({v})))))",
        rvv=lambda v, lmul, vl: f"rvk_vmish_f32m{lmul}({v}, {vl})",
        rvv_support=lambda lmul: _vmath().mish_support(lmul)),
    ActivationDef(
        "thresholded_relu", ("ThresholdedRelu",),
        numpy=lambda x, a: np.where(x > a, x, 0),
        c=lambda v, a: f"({v} > {lit(a)} ? {v} : 0.0f)",
        of_node=lambda n: Act("thresholded_relu", (float(n.attrs.get("alpha", 1.0)),))),
    ActivationDef(   # x - bias above lambd, x + bias below -lambd, 0 between (no vector form)
        "shrink", ("Shrink",),
        numpy=lambda x, b, lam: np.where(x < -lam, x + b, np.where(x > lam, x - b, 0)),
        c=lambda v, b, lam: (f"({v} < {lit(-lam)} ? {v} + {lit(b)} : "
                             f"({v} > {lit(lam)} ? {v} - {lit(b)} : 0.0f))"),
        of_node=lambda n: Act("shrink", (float(n.attrs.get("bias", 0.0)),
                                         float(n.attrs.get("lambd", 0.5))))),
)

for _row in ROWS:
    define(_row)
# integers too (codegen/lower/logic.py typed_unary): exported text models negate index tensors
for _op in ("Abs", "Neg", "Sign"):
    REGISTRY[_op].dtypes = ("float32", "int64", "int32", "int8", "uint8")
