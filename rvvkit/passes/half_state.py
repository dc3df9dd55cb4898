"""float16 key/value caches kept as float32 session state. The frontend
(frontend/stored_floats.py) meets a float16 past input with a Cast to float32 and produces a float16 present output by a
Cast from float32; a cache that becomes session state (passes/kv_cache.py) leaves the graph's
inputs and outputs, so no one sees its type: it is kept in float32, what the kernels compute
on, and neither Cast runs. `unwrap` takes the Casts off the float16 inputs and outputs that
meet a cache op, so that kv_cache sees past/present as the model draws them; `rewrap` puts
them back on those that did not become state, whose float16 type the caller still sees. A
decoder's other float16 outputs (its logits) come out float32 (`float_outputs`): the
generation loop on every executor reads float32 rows, and a decoder's interface is rvvkit's
own already (its caches left it)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Tuple

import numpy as np

from ..ir import Graph, Node, Tensor

HALF = np.dtype(np.float16)


@dataclass
class Unwrapped:
    # (float16 name, float32 name, the Cast between them, the float16 tensor)
    inputs: List[Tuple[str, str, Node, Tensor]] = field(default_factory=list)
    outputs: List[Tuple[str, str, Node, Tensor]] = field(default_factory=list)


def _rename(g: Graph, old: str, new: str, graph_io: bool = True) -> None:
    """Tensor `old` is called `new` wherever a node (and, with `graph_io`, the graph's
    inputs and outputs) names it."""
    for n in g.nodes:
        n.inputs = [new if i == old else i for i in n.inputs]
        n.outputs = [new if o == old else o for o in n.outputs]
    if graph_io:
        g.inputs = [new if i == old else i for i in g.inputs]
        g.outputs = [new if o == old else o for o in g.outputs]


def _readers(g: Graph, name: str) -> List[Node]:
    return [n for n in g.nodes if name in n.inputs]


def _as_float(g: Graph, name: str) -> Tensor:
    """Retype `name` to float32 (under its own name); returns its float16 tensor."""
    half = g.t(name)
    g.tensors[name] = Tensor(name, half.shape, np.dtype(np.float32))
    return half


# where a cache meets the op that appends to it: (op, past input positions, present outputs);
# a growing cache (Concat, Attention) becomes state only in a bounded build
GQA = "com.microsoft.GroupQueryAttention"
CACHE_OPS = {GQA: ((3, 4), (1, 2)), "Attention": ((4, 5), (1, 2)), "Concat": ((0,), (0,))}


def _cache_sides(g: Graph, bounded: bool):
    """(names read as a past cache, names written as a present cache) by the cache ops."""
    past, present = set(), set()
    for n in g.nodes:
        if n.op in CACHE_OPS and (bounded or n.op == GQA):
            ins, outs = CACHE_OPS[n.op]
            past.update(n.inputs[i] for i in ins if i < len(n.inputs) and n.inputs[i])
            present.update(n.outputs[o] for o in outs if o < len(n.outputs) and n.outputs[o])
    return past, present


def unwrap(g: Graph, bounded: bool) -> Unwrapped:
    """float16 graph inputs read only by a Cast into a past cache, and float16 graph outputs
    made by a Cast of a present cache, become the Cast's float32 side under their own names
    (undone by `rewrap` for those that do not become state)."""
    done = Unwrapped()
    past, present = _cache_sides(g, bounded)
    for name in list(g.inputs):
        readers = _readers(g, name)
        if g.t(name).dtype != HALF or len(readers) != 1 or readers[0].op != "Cast" or \
                readers[0].outputs[0] not in past or name in g.outputs or \
                readers[0].outputs[0] in g.outputs:
            continue
        cast = readers[0]
        g.nodes.remove(cast)
        _rename(g, cast.outputs[0], name)
        done.inputs.append((name, cast.outputs[0], cast, _as_float(g, name)))
    producers = g.producers()
    for name in list(g.outputs):
        cast = producers.get(name)
        if cast is not None and cast.op == "Cast" and cast.inputs[0] in present:
            _unwrap_output(g, name, cast, done)
    return done


def float_outputs(g: Graph) -> None:
    """A decoder's float16 outputs (its logits) come out as float32 (see above)."""
    producers = g.producers()
    for name in list(g.outputs):
        cast = producers.get(name)
        if cast is not None and cast.op == "Cast":
            _unwrap_output(g, name, cast, Unwrapped())


def _unwrap_output(g: Graph, name: str, cast: Node, done: Unwrapped) -> None:
    if g.t(name).dtype != HALF or g.outputs.count(name) != 1 or name in g.inputs or \
            cast.inputs[0] in g.inputs or g.t(cast.inputs[0]).dtype != np.float32:
        return
    readers = _readers(g, name)    # what read the float16 value then reads float32
    if any(r.op != "Cast" or g.t(r.outputs[0]).dtype != np.float32 for r in readers):
        return
    for r in readers:
        g.nodes.remove(r)
        _rename(g, r.outputs[0], name)
    g.nodes.remove(cast)
    wide = cast.inputs[0]
    _rename(g, wide, name)
    done.outputs.append((name, wide, cast, _as_float(g, name)))


def rewrap(g: Graph, done: Unwrapped) -> None:
    """Put back the Casts of the inputs and outputs that are still the graph's."""
    for (name, wide, cast, half), first in [(d, True) for d in done.inputs] + \
            [(d, False) for d in done.outputs]:
        if name in (g.inputs if first else g.outputs):
            g.tensors[wide] = Tensor(wide, half.shape, np.dtype(np.float32))
            _rename(g, name, wide, graph_io=False)
            g.tensors[name] = half
            if first:
                g.nodes.insert(0, cast)
            else:
                g.nodes.append(cast)
