"""Element-wise activations that can be fused into the epilogue of a producing kernel."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from .cfmt import flt


@dataclass(frozen=True)
class Act:
    """An activation `kind` with its float parameters.

    kinds: relu, clip (lo, hi), leaky_relu (alpha), sigmoid, tanh.
    """
    kind: str
    params: Tuple[float, ...] = ()

    def c_expr(self, v: str) -> str:
        """C expression applying the activation to the expression `v` (evaluated once or more;
        callers pass a plain variable)."""
        k = self.kind
        if k == "relu":
            return f"({v} > 0.0f ? {v} : 0.0f)"
        if k == "clip":
            lo, hi = self.params
            return f"({v} < {flt(lo)} ? {flt(lo)} : ({v} > {flt(hi)} ? {flt(hi)} : {v}))"
        if k == "leaky_relu":
            (alpha,) = self.params
            return f"({v} >= 0.0f ? {v} : {v} * {flt(alpha)})"
        if k == "sigmoid":
            return f"(1.0f / (1.0f + expf(-({v}))))"
        if k == "tanh":
            return f"tanhf({v})"
        raise ValueError(f"unknown activation {k}")

    def apply_numpy(self, x):
        import numpy as np
        k = self.kind
        if k == "relu":
            return np.maximum(x, 0)
        if k == "clip":
            return np.clip(x, *self.params)
        if k == "leaky_relu":
            return np.where(x >= 0, x, x * self.params[0])
        if k == "sigmoid":
            return 1 / (1 + np.exp(-x))
        if k == "tanh":
            return np.tanh(x)
        raise ValueError(k)


def act_expr(act, v: str) -> str:
    """`v` with `act` applied, or `v` unchanged when there is no activation."""
    return act.c_expr(v) if act is not None else v
