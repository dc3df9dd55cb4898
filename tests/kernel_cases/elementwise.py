"""Element-wise and layout cases (n-ary with broadcasting, unary activations, the internal
per-channel affine, copy; Transpose, Concat): the union of what the RVV and CUDA kernel tests
ran. Every case is cheap to run; the CUDA tests, whose build time grows with the number of
kernels, take the *_EMU subsets: the CUDA cases (the end of each table) and a few borders of the
others."""
from __future__ import annotations

import math

import numpy as np

from rvvkit.codegen.kernels.math import elementwise as ew
from rvvkit.codegen.kernels.movement import layout
from rvvkit.ops.activations import Act
from kernel_cases.case import (CLIP, LEAKY, LEAKY2, RELU, RELU_INF, SIGMOID, TANH, Case,
                               act_name, act_ref, dims, table)

NUMPY_OPS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
             "Sum": np.add}


def normal(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def nary(op, shapes, act=None) -> Case:
    """`op` folded over inputs broadcast together; divisors are kept away from zero."""
    out = np.broadcast_shapes(*shapes)

    def make(rng):
        xs = [normal(rng, s) for s in shapes]
        if op == "Div":
            xs[1:] = [np.abs(x) + np.float32(0.5) for x in xs[1:]]
        ref = xs[0].astype(np.float64)
        for x in xs[1:]:
            ref = NUMPY_OPS[op](ref, x)
        return xs, act_ref(act, ref)

    return Case(f"{op}-{'-'.join(dims(s) for s in shapes)}{act_name(act)}",
                lambda: ew.nary(op, shapes, out, act), make, cost=math.prod(out))


def unary(act, shape) -> Case:
    def make(rng):
        x = normal(rng, shape)
        return [x], act_ref(act, x.astype(np.float64))

    return Case(f"unary-{dims(shape)}{act_name(act)}", lambda: ew.unary(act, shape), make,
                cost=math.prod(shape))


def affine(shape, act=None) -> Case:
    """x * s[c] + t[c] over channel axis 1 (the internal ChannelAffine)."""
    def make(rng):
        x, s, t = normal(rng, shape), normal(rng, shape[1]), normal(rng, shape[1])
        bs = (1, shape[1]) + (1,) * (len(shape) - 2)
        ref = x.astype(np.float64) * s.reshape(bs) + t.reshape(bs)
        return [x, s, t], act_ref(act, ref)

    return Case(f"affine-{dims(shape)}{act_name(act)}", lambda: ew.channel_affine(shape, act),
                make, cost=math.prod(shape))


def copy(n) -> Case:
    def make(rng):
        x = normal(rng, n)
        return [x], x

    return Case(f"copy-{n}", lambda: ew.copy(n), make, cost=n)


def transpose(shape, perm) -> Case:
    def make(rng):
        x = normal(rng, shape)
        return [x], np.transpose(x, perm)

    return Case(f"transpose-{dims(shape)}-{dims(perm)}", lambda: layout.transpose(shape, perm),
                make, cost=math.prod(shape))


def concat(shapes, axis) -> Case:
    def make(rng):
        xs = [normal(rng, s) for s in shapes]
        return xs, np.concatenate(xs, axis)

    return Case(f"concat-{'-'.join(dims(s) for s in shapes)}-axis{axis}",
                lambda: layout.concat(shapes, axis), make,
                cost=sum(math.prod(s) for s in shapes))


NARY = table(200, [
    nary("Add", [(2, 3, 5, 7), (3, 1, 1)], RELU), nary("Sub", [(1,), (4, 37)]),
    nary("Div", [(4, 37), (1,)]), nary("Div", [(1,), (2, 67)], CLIP),
    nary("Mul", [(3, 1, 5), (1, 4, 1)], LEAKY), nary("Sum", [(2, 50), (2, 50), (1, 50)]),
    nary("Sub", [(6, 129), (6, 129)], LEAKY2), nary("Add", [(5, 1), (5, 300)], SIGMOID),
    nary("Mul", [(1000,), (1000,)]), nary("Add", [(1, 1), (1, 1)], RELU),
    nary("Add", [(2, 3, 4), (3, 1)], RELU), nary("Sub", [(5, 1, 3), (1, 4, 1)]),
    nary("Mul", [(1, 3, 1, 5), (1,)], CLIP), nary("Div", [(2, 3, 5, 7), (2, 3, 5, 7)], SIGMOID),
    nary("Sum", [(3, 1, 5), (4, 5), (3, 4, 5)], LEAKY), nary("Add", [(1, 1), (1,)], TANH),
    nary("Mul", [(2, 1, 3, 1), (1, 5, 1, 7)]), nary("Sub", [(7,), (3, 1), (2, 1, 1)]),
])
UNARY = table(300, [unary(act, shape) for act, shape in [
    (RELU, (3, 77)), (CLIP, (1000,)), (LEAKY, (5, 7)), (LEAKY2, (65,)), (TANH, (33,)),
    (SIGMOID, (9, 9)), (RELU_INF, (100,))]] + [
    unary(act, (3, 7, 5)) for act in (RELU, CLIP, LEAKY, SIGMOID, TANH)] + [
    # vector exp helpers (codegen/kernels/math/vmath.py) at awkward lengths, large magnitudes
    unary(act, shape) for act, shape in [
        (Act("exp"), (71,)), (Act("elu", (0.7,)), (3, 41)), (Act("mish"), (130,)),
        (Act("selu", (1.5, 2.0)), (17,)), (Act("softsign"), (19,)), (Act("softplus"), (45,))]])
AFFINE = table(400, [affine(shape, act) for shape, act in [
    ((2, 5, 7, 9), RELU), ((1, 16, 1), None), ((1, 3, 33, 33), CLIP), ((2, 4, 5), SIGMOID),
    ((2, 3, 5, 7), LEAKY), ((3, 4), None), ((1, 5, 1, 3), RELU)]])
COPY = table(480, [copy(n) for n in (333, 1, 1000)])
TRANSPOSE = table(450, [transpose(shape, perm) for shape, perm in [
    ((1, 4, 6, 7, 7), (0, 2, 1, 3, 4)), ((2, 3, 5), (0, 2, 1)), ((3, 70), (1, 0)),
    ((2, 3, 4, 5), (0, 2, 3, 1)), ((5, 1, 7), (1, 0, 2)), ((2, 3, 4), (2, 0, 1)),
    ((3, 5, 7, 2), (0, 2, 3, 1)), ((1, 3, 1, 5), (2, 0, 3, 1)), ((4, 6), (1, 0)),
    ((2, 3), (0, 1))]])
CONCAT = table(470, [concat(shapes, axis) for shapes, axis in [
    ([(2, 3, 5), (2, 4, 5)], 1), ([(1, 7), (1, 70), (1, 1)], 1),
    ([(2, 3, 5), (2, 1, 5), (2, 4, 5)], 1), ([(1, 3), (4, 3)], 0), ([(3, 2, 2), (3, 2, 5)], 2),
    ([(2, 0, 3), (2, 2, 3)], 1)]])

# scalar numerator, 129 columns (vector tails), fused LeakyRelu with slope > 1
NARY_EMU = NARY[10:] + (NARY[3], NARY[6])
# LeakyRelu with slope > 1, Clip with an infinite bound
UNARY_EMU = UNARY[7:] + (UNARY[3], UNARY[6])
# a 3-D input with one position, 33x33 planes
AFFINE_EMU = AFFINE[4:] + (AFFINE[1], AFFINE[2])
# a 5-D permutation
TRANSPOSE_EMU = TRANSPOSE[5:] + (TRANSPOSE[0],)

__all__ = ["NARY_EMU", "UNARY_EMU", "AFFINE_EMU", "TRANSPOSE_EMU", "NARY", "UNARY", "AFFINE", "COPY", "TRANSPOSE", "CONCAT", "nary", "unary",
           "affine", "copy", "transpose", "concat"]
