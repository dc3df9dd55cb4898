"""The operator table: per op, its semantics (output shapes with attribute canonicalisation, a
numpy evaluation used for constant folding) and its C lowering, which rvvkit.codegen.lower
attaches with `lowering` (ops never imports codegen, and never emits source).

Op names are ONNX op types (domain ai.onnx); rvvkit's internal ops carry a qualified name
"rvvkit.<Name>" that no model op can take."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import dtypes as dtype_table
from ..errors import ModelError
from ..ir import Graph, Node, Shape

# infer(node, graph) -> [(shape, dtype)] per output; may canonicalise node.attrs in place (so
# evaluation and lowering never re-derive them). The model's opset is graph.opset.
InferFn = Callable[[Node, Graph], List[Tuple[Shape, np.dtype]]]
# evaluate(node, arrays) -> arrays (all inputs constant).
EvalFn = Callable[[Node, Sequence[Optional[np.ndarray]]], List[np.ndarray]]
# lower(node, graph) -> rvvkit.codegen.kernel.Lowered: the node's C kernel.
LowerFn = Callable[[Node, Graph], Any]

INTERNAL_DOMAIN = "rvvkit"


@dataclass
class OpDef:
    op: str
    infer: InferFn
    evaluate: Optional[EvalFn] = None
    # evaluate() reads only its inputs' shapes and dtypes (Shape): it folds even when the
    # inputs are run-time tensors, since their shapes are static.
    shape_only: bool = False
    # the inputs whose values evaluate() reads when not all of them are needed (CastLike reads
    # input 0's values and only input 1's dtype): it folds once these are constants
    value_inputs: Optional[Tuple[int, ...]] = None
    # its kernel can apply an activation in its epilogue (passes/fuse.py fuses one into it)
    act_epilogue: bool = False
    # why no kernel is ever needed (folded at build time, rewritten by a pass); "" = lowered
    without_kernel: str = ""
    # element types (rvvkit.dtypes names) its kernel takes on every tensor bound to it; ops
    # whose kernel is specialised per dtype list them all ("any": every dtype in the table)
    dtypes: Tuple[str, ...] = ("float32",)
    lower: Optional[LowerFn] = None   # set by rvvkit.codegen.lower
    # source(node, inputs) -> what its folded output keeps as Tensor.qsource (DequantizeLinear:
    # the integer form, which passes/quant.py runs integer kernels on)
    source: Optional[EvalFn] = None
    # what its kernel's run-time check found when it fails (errors name the step and add this)
    data_error: str = ""
    # its kernel updates its first input's buffer, which its one output then names: the
    # planner binds no output buffer (a key/value cache kept as session state)
    in_place: bool = False

    @property
    def kernel_dtypes(self) -> Tuple[str, ...]:
        """The element types its kernel takes, "any" spelled out as those kernels compute on:
        never one outside rvvkit's dtype table (bfloat16, int16, ...), which no kernel has a C
        type for, nor float16/float64, which only Cast converts (frontend/stored_floats.py)."""
        return dtype_table.COMPUTED if "any" in self.dtypes else self.dtypes

    def takes(self, dtype) -> bool:
        return dtype_table.supported(dtype) and np.dtype(dtype).name in self.kernel_dtypes

    @property
    def domain(self) -> str:
        return self.op.rpartition(".")[0]

    @property
    def internal(self) -> bool:
        return self.domain == INTERNAL_DOMAIN


REGISTRY: Dict[str, OpDef] = {}
F32 = np.dtype(np.float32)
FOLD_ONLY = "supported only on build-time constants"
ANY = ("any",)   # OpDef.dtypes of ops whose kernel is specialised on any dtype


def register(op: str, evaluate: Optional[EvalFn] = None, shape_only: bool = False, *,
             act_epilogue: bool = False, without_kernel: str = "",
             dtypes: Tuple[str, ...] = ("float32",),
             value_inputs: Optional[Tuple[int, ...]] = None,
             source: Optional[EvalFn] = None, data_error: str = "",
             in_place: bool = False):
    def deco(infer: InferFn) -> InferFn:
        REGISTRY[op] = OpDef(op, infer, evaluate, shape_only, value_inputs, act_epilogue,
                             without_kernel, tuple(dtypes), source=source,
                             data_error=data_error, in_place=in_place)
        return infer
    return deco


def lowering(*ops: str):
    """Attach the decorated C lowering to each op's entry (which must exist: a lowering
    without semantics fails at import)."""
    def deco(fn: LowerFn) -> LowerFn:
        for op in ops:
            REGISTRY[op].lower = fn
        return fn
    return deco


def same_as_input(node: Node, g: Graph):
    t = g.t(node.inputs[0])
    return [(t.shape, t.dtype)]


def bad(node: Node, why: str) -> ModelError:
    return ModelError(f"{node.op} node {node.name!r}: {why}")


def in_shape(node: Node, g: Graph, i: int) -> Shape:
    return g.t(node.inputs[i]).shape


def opt_input(node: Node, i: int) -> str:
    return node.inputs[i] if len(node.inputs) > i else ""


def const_input(node: Node, g: Graph, i: int, what: str) -> Optional[np.ndarray]:
    """The value of optional input i, which rvvkit needs at build time (shapes, axes)."""
    name = opt_input(node, i)
    if not name:
        return None
    if not g.is_const(name):
        raise bad(node, f"{what} (input {i}, {name!r}) must be a build-time constant; "
                        "rvvkit compiles static shapes")
    return g.const(name)


def norm_axis(node: Node, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise bad(node, f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def broadcast_shapes(node: Node, shapes: Sequence[Shape]) -> Shape:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise bad(node, f"shapes {list(shapes)} do not broadcast") from None
