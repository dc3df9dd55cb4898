"""The contract between operator lowerings and the C emitter.

A lowering turns one graph node into a `Kernel`: a C function body specialised on the node's
static shapes. The emitter names kernels, emits identical ones once, and calls them from the
plan entry point with pointers into the weights blob, the arena or the graph's I/O buffers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from .. import dtypes
from .parallel import Split


@dataclass(frozen=True)
class Param:
    """One pointer parameter. `const` params are read-only inputs, others outputs; `dtype` is
    the element type's name in rvvkit.dtypes (float32 unless the kernel computes on others)."""
    name: str
    const: bool = True
    dtype: str = "float32"

    @property
    def ctype(self) -> str:
        return dtypes.TABLE[self.dtype].ctype

    def decl(self) -> str:
        q = f"const {self.ctype} *__restrict " if self.const else f"{self.ctype} *__restrict "
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
    status:    the kernel checks its run-time data (indices) and returns int: 0, or non-zero
               when the data is out of range (the step then fails and names its node).
    split:     the body runs parts rvk_lo <= u < rvk_hi of split.units independent parts, which
               the emitter spreads over threads (codegen/parallel.py); None: one thread.
    prologue:  C statements a thread runs once before the parts it takes of a split kernel (the
               workspace's setup that every part relies on and no part undoes, e.g. padding
               cleared once); run before the body wherever the kernel runs whole. It may read
               the kernel's parameters by name.
    prologue_shared: the parts only read what the prologue wrote in the workspace, so one
               run of it can serve all parts (the CUDA form runs it once, not per thread).
    spec:      what the kernel computes, independent of the C body: {"op": ..., shapes and
               attributes, layouts of transformed weights}, built by `make_spec` with exactly
               the keys SPEC_KEYS declares for the kind. Other dialects (CUDA) generate their
               own body from it, bound to the same parameters and weights blob.
    """
    hint: str
    params: Tuple[Param, ...]
    body: str
    workspace: int = 0
    support: Dict[str, str] = field(default_factory=dict)
    macs: int = 0
    spec: Dict[str, Any] = field(default_factory=dict)
    status: bool = False
    split: Optional[Split] = None
    prologue: str = ""
    prologue_shared: bool = False

    def signature(self, name: str) -> str:
        ps = [p.decl() for p in self.params]
        if self.workspace:
            ps.append("float *__restrict ws")
        ret = "int" if self.status else "void"
        return f"RVK_API {ret} {name}({', '.join(ps) or 'void'})"

    def key(self) -> Tuple:
        """Identity for de-duplication: two kernels with the same key are the same function."""
        return (tuple(self.params), self.prologue, self.prologue_shared, self.body,
                self.workspace, self.status, self.split)


# A lowering may ask for a constant input to be stored transformed (for example a weight matrix
# pre-packed for the GEMM micro-kernel): it maps input index -> function(ndarray) -> ndarray.
WeightTransforms = Dict[int, Callable[[np.ndarray], np.ndarray]]


@dataclass
class Lowered:
    """What a lowering returns: the kernel, and transforms of constant inputs (if any).

    extra_weights: further stored forms of a constant input, each (position, input index,
    transform): the kernel takes `transform(input)` as one more const parameter at `position`
    of its parameter list (later parameters move up one). Used by a kernel that carries two
    layouts of its weights and picks one per target at compile time."""
    kernel: Kernel
    transforms: Optional[WeightTransforms] = None
    extra_weights: Tuple[Tuple[int, int, Callable[[np.ndarray], np.ndarray]], ...] = ()

    def bind(self, values: List[Any]) -> Tuple[List[Any], WeightTransforms, Set[int]]:
        """The kernel's arguments from the node's (inputs, then outputs): `values` with the
        extra stored forms inserted, the transforms by parameter position, and the positions of
        the extra forms."""
        transforms = dict(self.transforms or {})
        extra: Set[int] = set()
        for pos, src, fn in self.extra_weights:
            values = list(values[:pos]) + [values[src]] + list(values[pos:])
            transforms = {(i + 1 if i >= pos else i): f for i, f in transforms.items()}
            extra = {i + 1 if i >= pos else i for i in extra} | {pos}
            transforms[pos] = fn
        return list(values), transforms, extra


# What each kernel kind's spec holds (see Kernel.spec). Lowerings build their spec with
# `make_spec`, which insists on exactly these keys; the CUDA generators read only these keys
# (tests/unit/codegen/test_kernel_specs.py checks both), so a renamed lowering parameter cannot
# silently change what another dialect sees.
SPEC_KEYS: Dict[str, Tuple[str, ...]] = {
    "conv": ("x_shape", "w_shape", "y_shape", "group", "strides", "pads", "dilations",
             "bias", "residual", "act", "w_panel", "half_rows"),
    "gemm": ("M", "N", "K", "b_const", "c_mode", "alpha", "beta", "act", "b_panel"),
    "matmul": ("a_shape", "b_shape", "y_shape", "b_const", "b_panel", "b_batch_floats"),
    "nary": ("operator", "in_shapes", "out_shape", "act"),
    "unary": ("act", "shape"),
    "affine": ("shape", "act"),
    "copy": ("n_elems", "dtype"),
    "transpose": ("in_shape", "perm"),
    "concat": ("in_shapes", "axis"),
    "pool": ("kind", "x_shape", "y_shape", "kernel", "strides", "pads", "dilations",
             "count_include_pad"),
    "global_pool": ("kind", "x_shape"),
    "lrn": ("x_shape", "size", "alpha", "beta", "bias"),
    "softmax": ("shape", "axis", "coerce", "log"),
}


def declare_spec(kind: str, keys: Tuple[str, ...]) -> None:
    """Declare the spec keys of a kernel kind defined outside this file (each family module
    declares its own kinds at import)."""
    if SPEC_KEYS.get(kind, keys) != keys:
        raise ValueError(f"kernel kind {kind!r} declared twice with different keys")
    SPEC_KEYS[kind] = tuple(keys)


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_plain(x) for x in v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def make_spec(op: str, **fields: Any) -> Dict[str, Any]:
    """The spec of a kernel of kind `op`: {"op": op} and exactly the keys SPEC_KEYS[op] declares
    (sequences as tuples, numpy scalars as Python numbers); any other set of keys is an error."""
    declared = SPEC_KEYS[op]
    if set(fields) != set(declared):
        missing = sorted(set(declared) - set(fields))
        extra = sorted(set(fields) - set(declared))
        raise TypeError(f"spec of {op!r}: missing {missing}, undeclared {extra}")
    return {"op": op, **{k: _plain(fields[k]) for k in declared}}
