"""Activations: one table, one row per kind, holding everything rvvkit knows about it.

A row names the ONNX op(s) that are this activation and how its float parameters come from a
node, and gives its forms: numpy (constant folding, test references), C (portable kernels and
fused epilogues), RVV intrinsics (None when there is no vector form: the loops stay scalar;
forms calling vector helpers such as the exp of sigmoid and tanh, codegen/kernels/math/vmath.py,
list them in `rvv_support`, which every kernel applying the form merges) and CUDA (None: the C
form). Adding a row is all a new activation needs: it is registered as an operator here,
lowered as a unary kernel on every target, fused into the epilogue of its producer
(passes/fuse.py) and folded on constants. The unary math rows (Abs, Exp, Erf, Elu...) are in
activations_math.py.

Forms take the value as a plain C variable name `v` (it may be evaluated more than once) and
the parameters as Python floats; `lit` turns one into a C float literal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from ..ir import Graph, Node
from .registry import const_input, register, same_as_input

_FLT_MAX = float(np.finfo(np.float32).max)


def lit(x: float) -> str:
    """`x` as a C float literal, formatted by the code generator (imported late: ops never
    depends on codegen while modules load)."""
    from ..codegen.cfmt import flt
    return flt(x)


def _v(op: str, lmul: int) -> str:
    """RVV intrinsic name of f32 operation `op` at LMUL (rvvkit.codegen.rvv.vop's naming)."""
    return f"__riscv_{op}_f32m{lmul}"


def _rvv():
    """rvvkit.codegen.rvv (its intrinsic spellings), imported when a form is written."""
    from ..codegen import rvv
    return rvv


def relu_rvv(v: str, lmul: int, vl: str) -> str:
    """max(v, 0) with NaN lanes left NaN, as the C form and onnxruntime: vfmax alone returns
    0 for a NaN (IEEE maxNum). One compare, then the masked (`_mu`) max; masked-off lanes
    come from `v`."""
    return f"{_v('vfmax_vf', lmul)}_mu({_rvv().not_nan(lmul, v, vl)}, {v}, {v}, 0.0f, {vl})"


@dataclass(frozen=True)
class ActivationDef:
    kind: str
    onnx_ops: Tuple[str, ...]
    numpy: Callable[..., np.ndarray]             # (x, *params) -> array
    c: Callable[..., str]                        # (v, *params) -> C expression
    rvv: Optional[Callable[..., str]] = None     # (v, lmul, vl, *params) -> vector expression
    cuda: Optional[Callable[..., str]] = None    # (v, *params) -> CUDA expression; None: c
    # (node) -> its Act, from attrs that `canonical` settled at shape inference; None: no params
    of_node: Optional[Callable[[Node], "Act"]] = None
    canonical: Optional[Callable[[Node, Graph], None]] = None
    # (lmul) -> {key: static C helper} the rvv form calls (vector exp, ...): every kernel that
    # applies the rvv form merges it into its support, after the RVV header
    rvv_support: Optional[Callable[[int], Dict[str, str]]] = None


@dataclass(frozen=True)
class Act:
    """An activation `kind` (a row of ACTIVATIONS) with its float parameters. Its repr is part
    of fused-epilogue helper names: keep it to these two fields."""
    kind: str
    params: Tuple[float, ...] = ()

    @property
    def row(self) -> ActivationDef:
        try:
            return ACTIVATIONS[self.kind]
        except KeyError:
            raise ValueError(f"unknown activation {self.kind}") from None

    @property
    def has_vector_form(self) -> bool:
        return self.row.rvv is not None

    def c_expr(self, v: str) -> str:
        """C expression applying the activation to the variable `v`."""
        return self.row.c(v, *self.params)

    def cuda_expr(self, v: str) -> str:
        return (self.row.cuda or self.row.c)(v, *self.params)

    def rvv_expr(self, v: str, lmul: int, vl: str = "vl") -> str:
        """RVV intrinsics expression applying the activation to the vector variable `v`."""
        if self.row.rvv is None:
            raise ValueError(f"activation {self.kind} has no vector form")
        return self.row.rvv(v, lmul, vl, *self.params)

    def rvv_support(self, lmul: int) -> Dict[str, str]:
        """Static helpers (keyed for the emitter) the rvv form at `lmul` calls."""
        return self.row.rvv_support(lmul) if self.row.rvv_support else {}

    def apply_numpy(self, x):
        return self.row.numpy(x, *self.params)


def act_expr(act: Optional[Act], v: str) -> str:
    """`v` with `act` applied in C, or `v` unchanged when there is no activation."""
    return act.c_expr(v) if act is not None else v


def cuda_act_expr(act: Optional[Act], v: str) -> str:
    return act.cuda_expr(v) if act is not None else v


def act_rvv_support(act: Optional[Act], lmul: int) -> Dict[str, str]:
    """Helpers a kernel applying `act`'s rvv form at `lmul` must carry (merge after the header)."""
    return act.rvv_support(lmul) if act is not None and act.has_vector_form else {}


def has_vector_form(act: Optional[Act]) -> bool:
    """Whether a loop ending in `act` (or in none) can be written with RVV intrinsics."""
    return act is None or act.has_vector_form


# -- the table -------------------------------------------------------------------------------

def _vmath():
    """rvvkit.codegen.kernels.math.vmath, imported when a kernel asks (ops never imports codegen
    while modules load)."""
    from ..codegen.kernels.math import vmath
    return vmath


def _clip_bounds(node: Node, g: Graph) -> None:
    """Clip's bounds are attributes before opset 11 and optional inputs after; they are
    settled into attrs["bounds"] = (lo, hi)."""
    if "min" in node.attrs or "max" in node.attrs or len(node.inputs) == 1:
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
    else:
        lo_v = const_input(node, g, 1, "min")
        hi_v = const_input(node, g, 2, "max")
        lo = float(lo_v) if lo_v is not None else None
        hi = float(hi_v) if hi_v is not None else None
    # An absent bound is not infinite in onnxruntime: its Clip (attribute and input forms, and
    # the Conv+Clip fusion) defaults to numeric_limits<float>::lowest()/max(), so +-inf come
    # out as +-FLT_MAX (measured, onnxruntime 1.32); explicit +-inf bounds keep them.
    lo = -_FLT_MAX if lo is None else lo
    hi = _FLT_MAX if hi is None else hi
    # y = min(max(x, lo), hi): when lo > hi every value becomes hi, which is what (hi, hi) does
    # in every lowering (the fused epilogue tests `< lo` first).
    node.attrs["bounds"] = (min(float(lo), float(hi)), float(hi))


def _clip_act(node: Node) -> Act:
    lo, hi = node.attrs["bounds"]
    return Act("relu") if (lo == 0 and hi == float("inf")) else Act("clip", (lo, hi))


def _leaky_rvv(v, lmul, vl, alpha):
    # x < 0 ? a*x : x as a masked multiply (one compare, one multiply: what max(x, a*x) cost),
    # exact for every alpha: NaN fails the compare and stays, and a == 0 gives 0 * -inf = NaN
    # as onnxruntime does
    lt0 = f"__riscv_vmflt_vf_f32m{lmul}_b{32 // lmul}({v}, 0.0f, {vl})"   # false for NaN
    return f"{_v('vfmul_vf', lmul)}_mu({lt0}, {v}, {v}, {lit(alpha)}, {vl})"


_ROWS = (
    ActivationDef(
        "relu", ("Relu",),
        numpy=lambda x: np.maximum(x, 0),
        # NaN fails `< 0` and stays NaN, as in onnxruntime (still one maxps on x86)
        c=lambda v: f"({v} < 0.0f ? 0.0f : {v})",
        rvv=relu_rvv),
    ActivationDef(
        "clip", ("Clip",),
        numpy=lambda x, lo, hi: np.clip(x, lo, hi),
        # NaN fails both comparisons and stays NaN, as in onnxruntime
        c=lambda v, lo, hi: (f"({v} < {lit(lo)} ? {lit(lo)} : "
                             f"({v} > {lit(hi)} ? {lit(hi)} : {v}))"),
        rvv=lambda v, lmul, vl, lo, hi: _rvv().vclamp(lmul, v, lit(lo), lit(hi), vl),
        of_node=_clip_act, canonical=_clip_bounds),
    ActivationDef(
        "leaky_relu", ("LeakyRelu",),
        numpy=lambda x, alpha: np.where(x >= 0, x, x * alpha),
        c=lambda v, alpha: f"({v} >= 0.0f ? {v} : {v} * {lit(alpha)})",
        rvv=_leaky_rvv,
        of_node=lambda n: Act("leaky_relu", (float(n.attrs.get("alpha", 0.01)),))),
    ActivationDef(
        "sigmoid", ("Sigmoid",),
        numpy=lambda x: 1 / (1 + np.exp(-x)),
        c=lambda v: f"rvk_sigmoidf({v})",
        rvv=lambda v, lmul, vl: (
            f"{_v('vfrdiv_vf', lmul)}({_v('vfadd_vf', lmul)}(rvk_vexp_f32m{lmul}("
            f"{_v('vfmul_vf', lmul)}({v}, -1.0f, {vl}), {vl}), 1.0f, {vl}), 1.0f, {vl})"),
        rvv_support=lambda lmul: _vmath().exp_support(lmul)),
    ActivationDef(
        "tanh", ("Tanh",),
        numpy=np.tanh,
        c=lambda v: f"rvk_tanhf({v})",
        rvv=lambda v, lmul, vl: f"rvk_vtanh_f32m{lmul}({v}, {vl})",
        rvv_support=lambda lmul: _vmath().tanh_support(lmul)),
)

ACTIVATIONS: Dict[str, ActivationDef] = {}   # kind -> row
BY_OP: Dict[str, ActivationDef] = {}         # ONNX op type -> row


def act_of(node: Node) -> Optional[Act]:
    """The activation a node computes (None when its op is not an activation)."""
    row = BY_OP.get(node.op)
    if row is None:
        return None
    return row.of_node(node) if row.of_node else Act(row.kind)


def define(row: ActivationDef) -> None:
    """Add a row: its ONNX ops become operators (shape = input's, numpy evaluation); the C
    lowering (rvvkit.codegen.lower) attaches the unary kernel to every op in BY_OP."""
    ACTIVATIONS[row.kind] = row
    for op in row.onnx_ops:
        BY_OP[op] = row
        _register(op, row)


def _register(op: str, row: ActivationDef) -> None:
    def infer(node: Node, g: Graph):
        if row.canonical:
            row.canonical(node, g)
        return same_as_input(node, g)

    def evaluate(node: Node, xs):
        return [np.asarray(act_of(node).apply_numpy(xs[0])).astype(xs[0].dtype)]

    register(op, evaluate)(infer)


for _row in _ROWS:
    define(_row)
