"""Pattern fusion: the decomposed forms exporters write for SiLU, GELU, HardSwish,
HardSigmoid, LayerNorm and RMSNorm become one node each, so a modern model runs one kernel
(or none: an activation then folds into its producer's epilogue, passes/fuse.py) instead of a
chain of tiny passes.

A match is anchored at the pattern's last node and walks back through producers. Products
are read as a whole: a chain of Mul (and Div by a constant) with single-use intermediates is
a coefficient times a list of factors, so every order exporters write (0.5 before or after,
Div by sqrt(2) or Mul by 1/sqrt(2), x*x*x or Pow) is one case. A match is rewritten only when
every matched intermediate is read by matched nodes alone and is not a graph output, the
constants agree within RTOL and the result keeps the input's shape and dtype."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np

from ..errors import ModelError
from ..ir import Graph, Node
from ..ops import REGISTRY
from .layernorm import match_layernorm, match_rmsnorm
from .view import View

RTOL = 1e-4
SILU = "rvvkit.Silu"


def close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * abs(b)


def _one_of(factors: List[str], want: int) -> List[Tuple[str, List[str]]]:
    """(x, the other factors) for each distinct factor x of a product of `want` factors."""
    if len(factors) != want:
        return []
    out = []
    for i, x in enumerate(factors):
        if x not in factors[:i]:
            out.append((x, factors[:i] + factors[i + 1:]))
    return out


# -- the activations -------------------------------------------------------------------------

def _silu(v: View, anchor: Node):
    """x * Sigmoid(x) -> rvvkit.Silu; x * Sigmoid(alpha * x) -> Swish(alpha) (QuickGELU)."""
    if anchor.op != "Mul":
        return None
    nodes: List[Node] = []
    coef, fs = v.product(anchor.outputs[0], nodes, root=True)
    if not close(coef, 1.0):
        return None
    for x, (s,) in _one_of(fs, 2):
        sig = v.node(s, "Sigmoid")
        if sig is None or not v.single(s):
            continue
        inner = [sig]
        alpha, arg = v.product(sig.inputs[0], inner)
        if arg == [x] and close(alpha, 1.0):
            return SILU, [x], {}, nodes + inner
        if arg == [x] and alpha > 0:
            return "Swish", [x], {"alpha": alpha}, nodes + inner
    return None


def _relu6_shift(v: View, name: str, nodes: List[Node]) -> Optional[str]:
    """x when `name` = Clip(x + 3, 0, 6) with single-use intermediates (added to `nodes`)."""
    clip = v.node(name, "Clip")
    if clip is None or not v.single(name):
        return None
    lo, hi = clip.attrs.get("bounds", (None, None))
    inner: List[Node] = []
    x, three = v.plus_const(clip.inputs[0], inner)
    if x is None or not close(three, 3.0) or lo != 0.0 or hi is None or not close(hi, 6.0):
        return None
    nodes.extend([clip] + inner)
    return x


def _hard_swish(v: View, anchor: Node):
    """x * HardSigmoid(x; 1/6, 1/2) and x * Clip(x + 3, 0, 6) / 6 -> HardSwish; a lone
    Clip(x + 3, 0, 6) / 6 -> HardSigmoid(1/6, 1/2)."""
    if anchor.op not in ("Mul", "Div"):
        return None
    nodes: List[Node] = []
    coef, fs = v.product(anchor.outputs[0], nodes, root=True)
    if len(fs) == 1 and close(coef, 1 / 6):
        x = _relu6_shift(v, fs[0], nodes)
        if x is not None:
            return "HardSigmoid", [x], {"alpha": 1 / 6, "beta": 0.5}, nodes
    for x, (h,) in _one_of(fs, 2):
        hs = v.node(h, "HardSigmoid")
        if (hs is not None and hs.inputs[0] == x and v.single(h) and close(coef, 1.0)
                and close(float(hs.attrs.get("alpha", 0.2)), 1 / 6)
                and close(float(hs.attrs.get("beta", 0.5)), 0.5)):
            return "HardSwish", [x], {}, nodes + [hs]
        found: List[Node] = []
        if close(coef, 1 / 6) and _relu6_shift(v, h, found) == x:
            return "HardSwish", [x], {}, nodes + found
    return None


def _gelu(v: View, anchor: Node):
    """0.5 * x * (1 + Erf(x / sqrt(2))) and 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x +
    0.044715 * x^3))), each factor in any order."""
    if anchor.op not in ("Mul", "Div"):
        return None
    nodes: List[Node] = []
    coef, fs = v.product(anchor.outputs[0], nodes, root=True)
    if not close(coef, 0.5):
        return None
    for x, (t,) in _one_of(fs, 2):
        tail: List[Node] = []
        u, one = v.plus_const(t, tail)
        f = v.node(u, "Erf", "Tanh") if u is not None and close(one, 1.0) else None
        if f is None or not v.single(u):
            continue
        tail.append(f)
        c, arg = v.product(f.inputs[0], tail)
        if f.op == "Erf" and arg == [x] and close(c, math.sqrt(0.5)):
            return "Gelu", [x], {"approximate": "none"}, nodes + tail
        if f.op == "Tanh" and len(arg) == 1 and close(c, math.sqrt(2 / math.pi)):
            if _x_plus_cube(v, arg[0], x, tail):
                return "Gelu", [x], {"approximate": "tanh"}, nodes + tail
    return None


def _x_plus_cube(v: View, name: str, x: str, nodes: List[Node]) -> bool:
    """`name` = x + 0.044715 * x^3 (x*x*x or Pow(x, 3))."""
    add = v.node(name, "Add", "Sum")
    if add is None or len(add.inputs) != 2 or not v.single(name) or x not in add.inputs:
        return False
    w = add.inputs[1] if add.inputs[0] == x else add.inputs[0]
    found: List[Node] = [add]
    c, fs = v.product(w, found)
    if fs != [x, x, x] and len(fs) == 1:
        p = v.node(fs[0], "Pow")
        if p is not None and v.single(fs[0]) and p.inputs[0] == x and v.scalar(p.inputs[1]) == 3:
            found.append(p)
            fs = [x, x, x]
    if fs == [x, x, x] and close(c, 0.044715):
        nodes.extend(found)
        return True
    return False


# -- the rewrite -----------------------------------------------------------------------------

MATCHERS = (_gelu, _hard_swish, _silu, match_layernorm, match_rmsnorm)


def _fits(v: View, anchor: Node, op: str, inputs: List[str], nodes: List[Node]) -> bool:
    x, y = v.g.t(inputs[0]), v.g.t(anchor.outputs[0])
    return (op in REGISTRY and len(anchor.outputs) == 1 and not v.g.is_const(inputs[0])
            and x.shape == y.shape and x.dtype == y.dtype == np.float32
            and v.private(anchor, nodes))


def _rewrite(g: Graph, anchor: Node, op: str, inputs: List[str], attrs: dict,
             nodes: List[Node]) -> bool:
    """Put one `op` node where `anchor` was; it computes anchor's output from `inputs` and
    lists every other matched node (graph order) in `fused`. False (graph untouched) when
    the op's own shape inference does not give the anchor's output."""
    ids = {id(n) for n in nodes}
    new = Node(op, anchor.name, list(inputs), [anchor.outputs[0]], dict(attrs))
    for n in g.nodes:   # what a matched node had absorbed comes along
        if id(n) in ids:
            new.fused.extend(([] if n is anchor else [(n.op, n.name)]) + n.fused)
    out = g.t(anchor.outputs[0])
    try:   # also canonicalises the new node's attributes
        (shape, dtype), *_ = REGISTRY[op].infer(new, g)
    except (ModelError, IndexError, KeyError, TypeError, ValueError):
        return False
    if tuple(shape) != out.shape or np.dtype(dtype) != out.dtype:
        return False
    g.nodes[g.nodes.index(anchor)] = new
    g.remove_nodes([n for n in nodes if n is not anchor])
    return True


def fuse_patterns(g: Graph) -> Graph:
    """Rewrite every match, trying anchors from the graph's end so a longer pattern is seen
    before a shorter one inside it."""
    gone: set = set()
    v = View(g)
    for anchor in reversed(list(g.nodes)):
        if id(anchor) in gone or anchor.act is not None or anchor.residual:
            continue
        for match in MATCHERS:
            found = match(v, anchor)
            if found is None:
                continue
            op, inputs, attrs, nodes = found
            nodes = list({id(n): n for n in nodes}.values())   # Mul(d, d) is one node
            if not _fits(v, anchor, op, inputs, nodes) or \
                    not _rewrite(g, anchor, op, inputs, attrs, nodes):
                continue
            gone.update(id(n) for n in nodes)
            v = View(g)
            break
    return g
