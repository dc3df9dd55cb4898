"""What the recurrent kernels' C and CUDA forms share: the ONNX activation functions of RNN,
GRU and LSTM as C expressions, the clip, the LSTM cell update and the state layout."""
from __future__ import annotations

from typing import Optional, Tuple

from ....ops.activations import Act
from ...cfmt import flt

# presence flags of the node's inputs come in this order (ONNX RNN/GRU/LSTM)
INPUTS = ("x", "w", "r", "b", "sl", "h0", "c0", "p")
# gate rows per hidden unit in W/R/B, ONNX order: LSTM i, o, f, c; GRU z, r, h; RNN i
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def act_c(act: Tuple[str, float, float], v: str) -> str:
    """C expression of a recurrent activation (name, alpha, beta) of expression `v`. Sigmoid
    and Tanh use the prelude's call-free rvk_sigmoidf/rvk_tanhf, so the gate loops vectorise."""
    name, al, be = act
    a, b = flt(al), flt(be)
    return {
        "Sigmoid": f"rvk_sigmoidf({v})",
        "Tanh": f"rvk_tanhf({v})",
        "Relu": Act("relu").c_expr(f"({v})"),
        "HardSigmoid": Act("hard_sigmoid", (al, be)).c_expr(f"({v})"),
        "LeakyRelu": f"(({v}) >= 0.0f ? ({v}) : {a} * ({v}))",
        "Affine": f"({a} * ({v}) + {b})",
        "ScaledTanh": f"({a} * rvk_tanhf({b} * ({v})))",
        "Elu": f"(({v}) >= 0.0f ? ({v}) : {a} * (rvk_expf({v}) - 1.0f))",
        "Softsign": f"(({v}) / (1.0f + fabsf({v})))",
        "Softplus": f"log1pf(expf({v}))",
        "ThresholdedRelu": f"(({v}) > {a} ? ({v}) : 0.0f)",
    }[name]


def clip_c(clip: Optional[float], v: str) -> str:
    if clip is None:
        return v
    return Act("clip", (-clip, clip)).c_expr(f"({v})")


def lstm_update(hid: int, acts, has_p: bool, clip: Optional[float]) -> str:
    """The LSTM cell once `gates` holds the pre-activations (x.W + h.R + biases; clipped
    already unless there are peepholes, whose products the clip must include)."""
    f, gg, hh = acts

    def pre(row: int, peep: int) -> str:
        g = f"gates[{row * hid} + j]" if row else "gates[j]"
        if not has_p:
            return g
        return clip_c(clip, f"pd[{peep * hid} + j] * c[j] + {g}" if peep else
                      f"pd[j] * c[j] + {g}")
    cg = clip_c(clip if has_p else None, f"gates[{3 * hid} + j]")
    return f"""for (long j = 0; j < {hid}; ++j) {{
    const float ig = {act_c(f, pre(0, 0))};
    const float fg = {act_c(f, pre(2, 2))};
    const float cg = {act_c(gg, cg)};
    c[j] = fg * c[j] + ig * cg;
    const float og = {act_c(f, pre(1, 1))};
    h[j] = og * {act_c(hh, "c[j]")};
}}"""


def state_index(layout: int, batch: int, ndirs: int, hid: int) -> str:
    """C expression: offset of (direction d, batch row bb) in the initial/final states."""
    return f"(d * {batch} + bb) * {hid}" if layout == 0 else f"(bb * {ndirs} + d) * {hid}"
