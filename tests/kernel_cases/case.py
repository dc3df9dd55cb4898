"""What a kernel-test case is, and how a table of them is numbered."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from rvvkit.ops.activations import Act

RELU, CLIP = Act("relu"), Act("clip", (-0.5, 0.75))
LEAKY, LEAKY2 = Act("leaky_relu", (0.1,)), Act("leaky_relu", (1.5,))
SIGMOID, TANH = Act("sigmoid"), Act("tanh")
RELU_INF = Act("clip", (0.0, float("inf")))     # a Clip with no upper bound


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel call: `lower()` gives the C lowering (`Lowered`), `data()` its inputs in
    ONNX layout (float32) and the float64 reference output.

    make(rng, **opts) draws the data; opts are per-test-family input conventions (see the
    family modules, e.g. conv's `weights`). `params` are the attributes a test may inspect."""
    id: str
    lower: Callable[[], Any]
    make: Callable[..., Tuple[List[np.ndarray], np.ndarray]]
    params: Dict[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    cost: int = 0             # multiply-adds or elements touched: what the subsets sort on

    def data(self, seed: int = None, **opts) -> Tuple[List[np.ndarray], np.ndarray]:
        rng = np.random.default_rng(self.seed if seed is None else seed)
        return self.make(rng, **opts)


def table(seed0: int, cases: Sequence[Case]) -> Tuple[Case, ...]:
    """The cases numbered: case i draws its data with seed seed0 + i; ids must be unique."""
    out = tuple(dataclasses.replace(c, seed=seed0 + i) for i, c in enumerate(cases))
    ids = [c.id for c in out]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate case ids: {sorted(dup)}"
    return out


def act_ref(act, y):
    return y if act is None else act.apply_numpy(y)


def act_name(act) -> str:
    if act is None:
        return ""
    return "-" + "_".join([act.kind] + [f"{p:g}" for p in act.params or ()])


def dims(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"
