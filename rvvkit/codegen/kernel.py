"""The contract between operator lowerings and the C emitter.

A lowering turns one graph node into a `Kernel`: a C function body specialised on the node's
static shapes. The emitter names kernels, emits identical ones once, and calls them from the
plan entry point with pointers into the weights blob, the arena or the graph's I/O buffers.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np


@dataclass(frozen=True)
class Param:
    """One float-pointer parameter. `const` params are read-only inputs, others outputs."""
    name: str
    const: bool = True

    def decl(self) -> str:
        q = "const float *__restrict " if self.const else "float *__restrict "
        return q + self.name


@dataclass
class Kernel:
    """A specialised kernel.

    hint:      short name fragment ("conv2d", "relu") used to build the C function name.
    params:    float-pointer parameters in call order: the node's inputs then outputs, in the
               order the lowering documents (lowerings list them; the emitter binds them).
    body:      C statements forming the function body. Shapes are literal constants. The body may
               use `ws` (float scratch of `workspace` floats) when workspace > 0.
    workspace: floats of scratch needed; the memory planner gives each call its own region.
    support:   complete C definitions (static helpers) the body calls, keyed by a unique name;
               the emitter writes each key once per translation unit.
    macs:      multiply-accumulates performed (for reports and MACs/instruction figures).
    spec:      what the kernel computes, independent of the C body: {"op": ..., shapes and
               attributes, layouts of transformed weights}. Other dialects (CUDA) generate
               their own body from it, bound to the same parameters and weights blob.
    """
    hint: str
    params: Tuple[Param, ...]
    body: str
    workspace: int = 0
    support: Dict[str, str] = field(default_factory=dict)
    macs: int = 0
    spec: Dict[str, Any] = field(default_factory=dict)

    def signature(self, name: str) -> str:
        ps = [p.decl() for p in self.params]
        if self.workspace:
            ps.append("float *__restrict ws")
        return f"RVK_API void {name}({', '.join(ps) or 'void'})"

    def key(self) -> Tuple:
        """Identity for de-duplication: two kernels with the same key are the same function."""
        return (tuple(self.params), self.body, self.workspace)


# A lowering may ask for a constant input to be stored transformed (for example a weight matrix
# pre-packed for the GEMM micro-kernel): it maps input index -> function(ndarray) -> ndarray.
WeightTransforms = Dict[int, Callable[[np.ndarray], np.ndarray]]


@dataclass
class Lowered:
    """What a lowering returns: the kernel, and transforms of constant inputs (if any)."""
    kernel: Kernel
    transforms: Optional[WeightTransforms] = None


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def specified(op: str):
    """Decorates a lowering so its kernel's `spec` records the op and the call's arguments
    (entries the lowering set itself, such as weight layouts, are kept)."""
    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            low = fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            given = {k: _plain(v) for k, v in bound.arguments.items()}
            if "op" in given:              # nary's ONNX op type
                given["operator"] = given.pop("op")
            low.kernel.spec = {**given, **low.kernel.spec, "op": op}
            return low
        return wrapper
    return deco
