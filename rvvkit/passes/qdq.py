"""QDQ models to QOperator form: the DequantizeLinear -> op -> QuantizeLinear groups that
onnxruntime's CPU provider fuses into integer kernels are rewritten into the same QLinear*
nodes, so rvvkit computes (and rounds) what onnxruntime computes:

    DQ(x), DQ(w) -> Conv [-> Relu] -> Q        QLinearConv (Relu narrows the saturation)
    DQ(a), DQ(b) -> MatMul / Gemm [-> Q]       QLinearMatMul / QGemm (no Q: float output)
    DQ(a), DQ(b) -> Add / Mul -> Q             com.microsoft.QLinearAdd / QLinearMul
    DQ(a), DQ(b) or a float -> Sum / Add [-> Relu] -> Q
                                               rvvkit.QDQAdd: onnxruntime keeps these in float;
                                               the same float operations in one pass
    DQ(x) -> Sigmoid / LeakyRelu / AveragePool / GlobalAveragePool / Softmax -> Q
                                               com.microsoft.QLinear<op>
    DQ(x)... -> Concat -> Q                    com.microsoft.QLinearConcat
    DQ(x) -> MaxPool / Reshape / Transpose / nearest Resize / ... -> Q, same scale and zero point
                                               the op on the integers (exactly equal)

Weights are constants by now: DequantizeLinear of a constant folds to float32 at build time but
keeps its integer source (Tensor.qsource), which is what is read here. A group matches only
when its intermediates have no other reader and every scale and zero point is per-tensor on
the activation side; anything else keeps running as float with Q/DQ executed as ops."""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..ir import Graph, Node
from ..ops import REGISTRY
from ..ops.quant.island import QDQ_ADD

DQ, Q = "DequantizeLinear", "QuantizeLinear"
UNARY = {"Sigmoid": "com.microsoft.QLinearSigmoid",
         "LeakyRelu": "com.microsoft.QLinearLeakyRelu",
         "AveragePool": "com.microsoft.QLinearAveragePool",
         "GlobalAveragePool": "com.microsoft.QLinearGlobalAveragePool",
         "Softmax": "com.microsoft.QLinearSoftmax"}
BINARY = {"Add": "com.microsoft.QLinearAdd", "Mul": "com.microsoft.QLinearMul"}
DROP = ("MaxPool", "GlobalMaxPool", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze",
        "Resize", "Upsample")   # Resize/Upsample: nearest only (copies; the others interpolate)

# A quantized operand: (integer tensor name, scale name, zero-point name)
QOperand = Tuple[str, str, str]


class _Ctx:
    def __init__(self, g: Graph):
        self.g = g
        self.prod = g.producers()
        self.cons = g.consumers()

    def sole(self, name: str) -> Optional[Node]:
        users = self.cons.get(name, [])
        return users[0] if len(users) == 1 and name not in self.g.outputs else None

    def per_tensor(self, name: str) -> bool:
        return not name or (self.g.is_const(name) and self.g.t(name).size == 1)

    def dq_input(self, name: str) -> Optional[QOperand]:
        """The quantized source of float tensor `name`: a run-time DequantizeLinear (per-tensor)
        or a constant folded from one."""
        g = self.g
        t = g.t(name)
        if t.qsource is not None:
            q, scale, zp, _ = t.qsource
            return (self._const(name + "/q", q), self._const(name + "/scale", scale),
                    self._const(name + "/zp", zp))
        p = self.prod.get(name)
        if p is None or p.op != DQ or g.is_const(p.inputs[0]):
            return None
        zp = p.inputs[2] if len(p.inputs) > 2 else ""
        if not (self.per_tensor(p.inputs[1]) and self.per_tensor(zp)):
            return None
        if g.t(p.inputs[0]).dtype.name not in ("int8", "uint8"):
            return None
        return p.inputs[0], p.inputs[1], zp or self._zero(p.inputs[0])

    def _const(self, base: str, value) -> str:
        return self.g.add_const(self.g.fresh_name(base), np.asarray(value)).name

    def _zero(self, like: str) -> str:
        return self._const(like + "/zp0", np.zeros((), self.g.t(like).dtype))

    def is_q(self, q: Node) -> bool:
        """A QuantizeLinear with a per-tensor scale and zero point."""
        return (q.op == Q and len(q.inputs) >= 3 and bool(q.inputs[2])
                and self.per_tensor(q.inputs[1]) and self.per_tensor(q.inputs[2]))

    def q_output(self, name: str) -> Optional[Node]:
        """The per-tensor QuantizeLinear that alone reads `name`."""
        q = self.sole(name)
        return q if q is not None and self.is_q(q) else None


def _relu_then_q(c: _Ctx, name: str) -> Tuple[Optional[Node], Optional[Node]]:
    n = c.sole(name)
    if n is not None and n.op == "Relu":
        return n, c.q_output(n.outputs[0])
    return None, c.q_output(name)


def _replace(c: _Ctx, n: Node, op: str, inputs: List[str], outputs: List[str],
             dead: List[Node], attrs=None) -> Node:
    new = Node(op, n.name, inputs, outputs, dict(n.attrs if attrs is None else attrs))
    new.fused = [(n.op, n.name)] + [(d.op, d.name) for d in dead]
    i = c.g.nodes.index(n)
    c.g.nodes[i] = new
    c.g.remove_nodes(dead)
    REGISTRY[op].infer(new, c.g)
    return new


def _conv(c: _Ctx, n: Node) -> bool:
    x = c.dq_input(n.inputs[0])
    w = c.dq_input(n.inputs[1])
    b = n.inputs[2] if len(n.inputs) > 2 else ""
    if x is None or w is None or not c.g.is_const(w[0]):
        return False
    bq = c.g.t(b).qsource if b else None
    if b and (bq is None or bq[0].dtype != np.int32):
        return False
    relu, q = _relu_then_q(c, n.outputs[0])
    if q is None:
        return False
    inputs = [*x, *w, q.inputs[1], q.inputs[2]] + ([c._const(b + "/q", bq[0])] if b else [])
    new = _replace(c, n, "QLinearConv", inputs, [q.outputs[0]], [d for d in (relu, q) if d])
    if relu is not None:
        new.attrs["relu"] = 1
    return True


def _matmul(c: _Ctx, n: Node) -> bool:
    a, b = c.dq_input(n.inputs[0]), c.dq_input(n.inputs[1])
    if a is None or b is None:
        return False
    gemm = n.op == "Gemm"
    cname = n.inputs[2] if gemm and len(n.inputs) > 2 else ""
    cq = c.g.t(cname).qsource if cname else None
    if gemm and (n.attrs.get("transA", 0) or (cname and (cq is None or cq[0].dtype != np.int32)
                                             or float(n.attrs.get("beta", 1.0)) != 1.0)):
        return False
    if gemm and not c.g.is_const(b[0]):
        return False
    q = c.q_output(n.outputs[0])
    tail = [q.inputs[1], q.inputs[2]] if q else []
    outs = [q.outputs[0]] if q else list(n.outputs)
    if gemm:
        bias = [c._const(cname + "/q", cq[0])] if cname else ([""] if q else [])
        _replace(c, n, "com.microsoft.QGemm", [*a, *b, *bias, *tail], outs, [q] if q else [])
    elif q is not None:
        _replace(c, n, "QLinearMatMul", [*a, *b, *tail], outs, [q])
    else:
        _replace(c, n, "com.microsoft.QGemm", [*a, *b], outs, [])   # MatMulIntegerToFloat
    return True


def _unary(c: _Ctx, n: Node) -> bool:
    op = UNARY[n.op]
    x = c.dq_input(n.inputs[0])
    q = c.q_output(n.outputs[0])
    if op not in REGISTRY or x is None or q is None or c.g.is_const(x[0]):
        return False
    new = _replace(c, n, op, [*x, q.inputs[1], q.inputs[2]], [q.outputs[0]], [q],
                   _unary_attrs(c.g, n))
    return new is not None


def _unary_attrs(g: Graph, n: Node):
    """The contrib op's attributes: QLinearSoftmax names the opset whose Softmax it follows."""
    if n.op == "Softmax":
        return {"axis": n.attrs["axis"], "opset": g.opset or 13}
    return None


def _binary(c: _Ctx, n: Node) -> bool:
    op = BINARY[n.op]
    a, b = c.dq_input(n.inputs[0]), c.dq_input(n.inputs[1])
    q = c.q_output(n.outputs[0])
    if op not in REGISTRY or a is None or b is None or q is None:
        return False
    _replace(c, n, op, [*a, *b, q.inputs[1], q.inputs[2]], [q.outputs[0]], [q])
    return True


def _join_operand(c: _Ctx, name: str) -> Optional[List[str]]:
    """An operand of a float join: its quantized source, or the float tensor with no scale."""
    x = c.dq_input(name)
    if x is not None and not c.g.is_const(x[0]):
        return list(x)
    if c.g.is_const(name) or c.g.t(name).dtype != np.float32:
        return None
    return [name, "", ""]


def _island(c: _Ctx, n: Node) -> bool:
    """A join that stays float in onnxruntime (Sum, or Add not followed directly by its Q), of
    two same-shaped operands, one at least quantized, [-> Relu] -> Q: one pass, which also
    writes the float value when something else reads it (resnet50's float residual stream)."""
    if n.op == "Add" and _binary(c, n):
        return True
    if len(n.inputs) != 2:
        return False
    a, b = _join_operand(c, n.inputs[0]), _join_operand(c, n.inputs[1])
    if a is None or b is None or not (a[1] or b[1]):
        return False
    shape = c.g.t(n.outputs[0]).shape
    if c.g.t(a[0]).shape != shape or c.g.t(b[0]).shape != shape:
        return False
    relu = c.sole(n.outputs[0])
    relu = relu if relu is not None and relu.op == "Relu" else None
    value = relu.outputs[0] if relu is not None else n.outputs[0]
    readers = c.cons.get(value, [])
    q = next((r for r in readers if r.inputs[0] == value and c.is_q(r)), None)
    if q is None:
        return False
    keep = len(readers) > 1 or value in c.g.outputs
    _replace(c, n, QDQ_ADD, [*a, *b, q.inputs[1], q.inputs[2]],
             [q.outputs[0]] + ([value] if keep else []), [d for d in (relu, q) if d],
             {"relu": int(relu is not None)})
    return True


def _concat(c: _Ctx, n: Node) -> bool:
    op = "com.microsoft.QLinearConcat"
    xs = [c.dq_input(i) for i in n.inputs]
    q = c.q_output(n.outputs[0])
    if op not in REGISTRY or q is None or any(x is None for x in xs):
        return False
    flat = [name for x in xs for name in x]
    _replace(c, n, op, [q.inputs[1], q.inputs[2], *flat], [q.outputs[0]], [q])
    return True


def _same_params(c: _Ctx, x: QOperand, q: Node) -> bool:
    g = c.g
    return (np.array_equal(g.const(x[1]), g.const(q.inputs[1]))
            and np.array_equal(g.const(x[2]), g.const(q.inputs[2]))
            and g.t(x[2]).dtype == g.t(q.inputs[2]).dtype)


def _drop(c: _Ctx, n: Node) -> bool:
    if n.op not in REGISTRY or not REGISTRY[n.op].takes(np.int8):
        return False
    if n.op in ("Resize", "Upsample") and n.attrs.get("mode", "nearest") != "nearest":
        return False
    x = c.dq_input(n.inputs[0])
    q = c.q_output(n.outputs[0])
    if x is None or q is None or c.g.is_const(x[0]) or not _same_params(c, x, q):
        return False
    _replace(c, n, n.op, [x[0], *n.inputs[1:]], [q.outputs[0]], [q])
    return True


def _rule(op: str):
    if op == "Conv":
        return _conv
    if op in ("MatMul", "Gemm"):
        return _matmul
    if op in UNARY:
        return _unary
    if op in ("Add", "Sum"):
        return _island
    if op in BINARY:
        return _binary
    if op == "Concat":
        return _concat
    if op in DROP:
        return _drop
    return None


def fold_qdq(g: Graph) -> int:
    """Rewrite every fusable group; returns how many."""
    done = 0
    changed = True
    while changed:
        changed = False
        c = _Ctx(g)
        for n in list(g.nodes):
            rule = _rule(n.op)
            if rule is not None and n.act is None and rule(c, n):
                done += 1
                changed = True
                break
    return done
