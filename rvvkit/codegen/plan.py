"""Graph → kernel plan: lower every node, de-duplicate kernels, lay out the weights blob and
plan the arena. The plan is everything the C emitter and the artifact meta need."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import dtypes
from ..errors import ModelError
from ..ir import Graph
from ..ops.registry import REGISTRY
from .memory import ALIGN, Interval, align, lower_bound, plan as plan_arena
from .cfmt import unique_idents
from .kernel import Kernel
from .kernels.gemm.rvv_lmul import fixed_vlen
from .precision import fixed_precision
from .lower.core import check_lowerable, is_alias, kernel_inputs, lower


@dataclass
class Arg:
    kind: str        # "input" | "output" | "weights" | "arena"
    index: int = 0   # graph input/output index
    offset: int = 0  # 4-byte words into weights or arena
    weight: str = ""  # weights: key of the entry (initializer name, `name@node` if transformed)
    symbol: str = ""  # weights: the C constant holding `offset` (an initializer name, C-safe)
    dtype: str = "float32"  # element type of the kernel parameter it binds to

    def c(self) -> str:
        """The C expression passed for it: graph I/O arrive as void pointers, and typed
        tensors in the float-word weights/arena buffers are reached through a cast."""
        ct = dtypes.TABLE[self.dtype].ctype
        if self.kind == "input":
            return f"(const {ct} *)in[{self.index}]"
        if self.kind == "output":
            return f"({ct} *)out[{self.index}]"
        base = f"w + {self.symbol or self.offset}" if self.kind == "weights" \
            else f"a + {self.offset}"
        if self.dtype == "float32":
            return base
        return f"(const {ct} *)({base})" if self.kind == "weights" else f"({ct} *)({base})"

    def to_json(self) -> Dict:
        out = {"kind": self.kind, "index": self.index, "offset": self.offset,
               "dtype": self.dtype}
        if self.kind == "weights":
            out["name"] = self.weight
        return out


@dataclass
class Step:
    kernel: str
    node: str
    op: str
    args: List[Arg]
    workspace: Optional[Arg] = None
    macs: int = 0
    fused: List[Tuple[str, str]] = field(default_factory=list)  # (op, name) folded into it
    status: bool = False   # its kernel returns a status (checks run-time indices)

    def describe(self) -> str:
        """"Conv conv2 + Add add1 + LeakyRelu lrelu1": the node and every node fused into it."""
        return " + ".join(f"{op} {name}" for op, name in [(self.op, self.node)] + self.fused)


@dataclass
class Plan:
    name: str
    kernels: List[Tuple[str, Kernel]]
    steps: List[Step]
    weights: np.ndarray
    arena_floats: int
    lower_bound_floats: int
    inputs: List[Tuple[str, Tuple[int, ...], str]]    # (name, shape, dtype name)
    outputs: List[Tuple[str, Tuple[int, ...], str]]
    weight_index: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    # buffers that persist between runs (graph.state): (tensor, present name, arena offset in
    # words, shape, dtype name)
    state: List[Tuple[str, str, int, Tuple[int, ...], str]] = field(default_factory=list)
    # what a second plan of the same artifact extends (build_plan's `base`): the weights
    # collector and the kernels by their key
    shared: Optional[Tuple["_Weights", Dict[Tuple, Tuple[str, Kernel]]]] = \
        field(default=None, repr=False)
    chunk: int = 0   # a decoder's prefill plan: the prompt tokens it takes per call

    @property
    def macs(self) -> int:
        return sum(s.macs for s in self.steps)


class _Weights:
    """Collects constant arrays into one blob of 4-byte words, each entry 64-byte aligned;
    float32 entries are stored as float32, others as their raw bytes (dtypes.as_words).
    Entries of identical bytes are stored once (a tied embedding and LM head, quantized alike
    and laid out for the same kernel family, are one 4-bit table)."""

    def __init__(self):
        self.chunks: List[np.ndarray] = []
        self.size = 0
        self.index: Dict[str, Tuple[int, int]] = {}
        self.by_content: Dict[Tuple[int, str], Tuple[int, int]] = {}

    def add(self, key: str, data: np.ndarray, dtype: str = "float32") -> int:
        """Store `data` for a kernel parameter of element type `dtype` (folding may leave
        float64 arrays behind float32 tensors: they are stored as the kernel reads them)."""
        if key in self.index:
            return self.index[key][0]
        data = np.asarray(data)
        if dtype == "float64":
            data = data.astype(np.float64)
        elif data.dtype == np.float64 or not dtypes.supported(data.dtype):
            data = data.astype(np.float32)
        data = dtypes.as_words(data)
        # by their bytes (a float compare would miss equal NaN patterns); hashed in place
        digest = (int(data.size), hashlib.sha256(np.ascontiguousarray(data)).hexdigest())
        if digest in self.by_content:
            self.index[key] = self.by_content[digest]
            return self.index[key][0]
        off = self.size
        self.chunks.append(data)
        pad = align(data.size) - data.size
        if pad:
            self.chunks.append(np.zeros(pad, np.float32))
        self.size += data.size + pad
        self.index[key] = self.by_content[digest] = (off, int(data.size))
        return off

    def blob(self) -> np.ndarray:
        return np.concatenate(self.chunks) if self.chunks else np.zeros(ALIGN, np.float32)


def _materialise_const_outputs(g: Graph) -> None:
    """A graph output known at build time still needs a kernel that writes it."""
    from ..ir import Node
    for name in list(g.outputs):
        t = g.t(name)
        if t.is_const:
            src = g.add_const(g.fresh_name(name + "/value"), t.data).name
            t.data = None
            g.nodes.append(Node("Identity", name + "/materialise", [src], [name]))
        elif name in g.inputs:
            raise ModelError(f"graph output {name!r} is a graph input; nothing to compute")


def _concat_views(g: Graph) -> Dict[str, Tuple[str, int]]:
    """Concats whose inputs can be written in place: each input becomes a slice of the
    output buffer (tensor -> (concat output, float offset)), and the Concat needs no kernel.

    Only concats along an axis with nothing but size-1 axes before it qualify (every input is
    then one contiguous slice). An input must be computed by a kernel into the arena (not a
    graph input, output or constant) and belong to one concat only; it may have other readers,
    since nothing writes it after its producer. DenseNet's chains of growing concats thereby
    become one buffer that every layer writes its slice of."""
    producers = g.producers()
    views: Dict[str, Tuple[str, int]] = {}
    for n in g.nodes:
        if n.op != "Concat" or n.outputs[0] in g.outputs:
            continue
        esize = dtypes.of(g.t(n.outputs[0]).dtype).size
        if any(g.t(i).size * esize % 4 for i in n.inputs):
            continue  # offsets are in 4-byte words: every slice must be whole words
        axis = n.attrs["axis"]
        if math.prod(g.t(n.outputs[0]).shape[:axis]) != 1 or len(set(n.inputs)) != len(n.inputs):
            continue
        ok = all(i in producers and not is_alias(producers[i], g) and i not in views
                 and i not in g.outputs for i in n.inputs)
        if not ok:
            continue
        off = 0
        for i in n.inputs:
            views[i] = (n.outputs[0], off)
            off += g.t(i).size * esize // 4
    return views


def build_plan(g: Graph, vlen: Optional[int] = None, base: Optional[Plan] = None,
               scope: str = "", precision: Optional[str] = None) -> Plan:
    """The kernel plan of `g`; with `vlen`, RVV micro-kernels are emitted for that VLEN only.
    With `base`, a second plan in the same translation unit (a decoder's prefill plan): it
    extends base's weights blob (entries of identical bytes stored once), reuses its
    identical kernels, names new ones apart, and finds the session's state at base's offsets.
    `scope` prefixes its weight keys, since a node of the same name may carry other data.
    `precision` (codegen/precision.py) selects the kernels' float16 forms (None: fp32)."""
    with fixed_vlen(vlen), fixed_precision(precision):
        return _build_plan(g, base, scope)


def _pinned_state(g: Graph, base: Optional[Plan]) -> Dict[str, int]:
    """The arena offsets of g's state in `base`, which must hold the same buffers."""
    if base is None:
        return {}
    have = {name: (off, tuple(shape), dt) for name, _, off, shape, dt in base.state}
    want = {name: (tuple(g.t(name).shape), g.t(name).dtype.name) for name, _ in g.state}
    if set(have) != set(want) or any(have[n][1:] != want[n] for n in want):
        raise ModelError(f"the second plan's session state {sorted(want)} is not the first "
                         f"plan's {sorted(have)}: the two cannot share one cache")
    return {name: have[name][0] for name in want}


def _build_plan(g: Graph, base: Optional[Plan], scope: str) -> Plan:
    _materialise_const_outputs(g)
    check_lowerable(g)
    root: Dict[str, str] = {}  # alias tensor -> tensor owning the buffer
    views = _concat_views(g)
    weights, kernels = base.shared if base else (_Weights(), {})
    pinned = _pinned_state(g, base)
    used: Dict[str, Tuple[str, Kernel]] = {}
    raw_steps: List[Tuple[str, Kernel, List[str], object]] = []
    for n in g.nodes:
        if is_alias(n, g):
            src = n.inputs[0]
            root[n.outputs[0]] = root.get(src, src)
            continue
        if n.op == "Concat" and n.inputs[0] in views:
            continue  # its inputs were written in place
        low = lower(n, g)
        # every declared output is bound: an output the kernel does not write is an error
        # here, never a buffer left unwritten. An in-place kernel's output names the buffer
        # of its first input, which it updates.
        in_place = REGISTRY[n.op].in_place
        names = [root.get(i, i) for i in kernel_inputs(n)] + \
            ([] if in_place else [o for o in n.outputs if o])
        if in_place:
            root[n.outputs[0]] = names[0]
        names, transforms, extra = low.bind(names)
        if len(names) != len(low.kernel.params):
            raise ModelError(f"{n.op} node {n.name!r}: its kernel takes {len(low.kernel.params)}"
                             f" tensors but the node binds {len(names)} (inputs "
                             f"{kernel_inputs(n)}, outputs {[o for o in n.outputs if o]}); "
                             "optional outputs of this op are not supported")
        for idx, name in enumerate(names):
            if g.is_const(name):
                key = scope + (name if idx not in transforms else
                               f"{name}@{n.name}" + (f"#{idx}" if idx in extra else ""))
                data = transforms[idx](g.const(name)) if idx in transforms else g.const(name)
                weights.add(key, data, low.kernel.params[idx].dtype)
                names[idx] = "\0w:" + key
        k = low.kernel
        if k.key() not in kernels:
            kernels[k.key()] = (f"k{len(kernels)}_{k.hint}", k)
        used.setdefault(kernels[k.key()][0], kernels[k.key()])
        raw_steps.append((kernels[k.key()][0], k, names, n))
    # transformed copies are keyed `name@node` (see above): named after the initializer. A
    # second plan's keys come after the first's, whose names therefore stay as they were.
    symbols = unique_idents({k: k.split("@")[0] + ("_packed" if "@" in k else "")
                             for k in weights.index}, "W_")
    steps, arena, bound, offsets = _assign(g, raw_steps, weights, views, symbols, pinned)
    def io(name):
        return (name, g.t(name).shape, g.t(name).dtype.name)
    state = [(name, present, offsets[name], g.t(name).shape, g.t(name).dtype.name)
             for name, present in g.state]
    return Plan(g.name, list(used.values()), steps, weights.blob(), arena, bound,
                [io(i) for i in g.inputs], [io(o) for o in g.outputs], weights.index, state,
                (weights, kernels))


def _resolve(name: str, views: Dict[str, Tuple[str, int]]) -> Tuple[str, int]:
    """The buffer-owning tensor of `name` and the offset of `name` inside it."""
    off = 0
    while name in views:
        name, extra = views[name]
        off += extra
    return name, off


def _assign(g: Graph, raw_steps, weights: _Weights, views, symbols: Dict[str, str],
            pinned: Dict[str, int]):
    first: Dict[str, int] = {}
    last: Dict[str, int] = {}
    for s, (_, k, names, _) in enumerate(raw_steps):
        for name in names:
            owner = _resolve(name, views)[0]
            first.setdefault(owner, s)
            last[owner] = s
    for name, _ in g.state:   # lives across runs: no other tensor may ever share its words
        first[name], last[name] = 0, max(len(raw_steps) - 1, 0)
    intervals = [Interval(nm, dtypes.words(g.t(nm).size, g.t(nm).dtype), first[nm], last[nm])
                 for nm in first
                 if not nm.startswith("\0w:") and nm not in g.inputs and nm not in g.outputs]
    intervals += [Interval(f"\0ws{s}", k.workspace, s, s)
                  for s, (_, k, _, _) in enumerate(raw_steps) if k.workspace]
    offsets, total = plan_arena(intervals, pinned)

    def arg(name: str, dtype: str) -> Arg:
        if name.startswith("\0w:"):
            key = name[3:]
            return Arg("weights", offset=weights.index[key][0], weight=key, symbol=symbols[key],
                       dtype=dtype)
        owner, sub = _resolve(name, views)
        if owner in g.inputs:
            return Arg("input", index=g.inputs.index(owner), dtype=dtype)
        if owner in g.outputs:
            return Arg("output", index=g.outputs.index(owner), dtype=dtype)
        return Arg("arena", offset=offsets[owner] + sub, dtype=dtype)

    steps = []
    for s, (kname, k, names, node) in enumerate(raw_steps):
        ws = Arg("arena", offset=offsets[f"\0ws{s}"]) if k.workspace else None
        args = [arg(nm, p.dtype) for nm, p in zip(names, k.params)]
        steps.append(Step(kname, node.name, node.op, args, ws, k.macs,
                          [tuple(f) for f in node.fused], k.status))
    return steps, max(total, ALIGN), lower_bound(intervals), offsets


def tensor_bytes(shape, dtype="float32") -> int:
    return dtypes.of(dtype).size * math.prod(shape)
