"""Operator cases: Gemm, MatMul, binary element-wise ops, Sum.

Each case is a tiny model, built once and run on every executor of the session (the `executor`
argument: host, QEMU at several VLENs, the CUDA emulator; tests/executors.py), and compared
with onnxruntime (single-threaded). Shapes are deliberately awkward: primes, 1x1 spatial,
non-square windows, batch 2, padding on one side only."""
import pytest
from onnx import helper

import rvvkit
from conftest import assert_matches, make_model, rand
from ops_support import plan_ops, positive

node = helper.make_node


# Gemm / MatMul

GEMM_CASES = [
    # id, M, K, N, attrs, C shape (None: no C), B constant, C constant
    ("basic_no_c", 3, 5, 4, {}, None, True, True),
    ("transA", 5, 7, 3, dict(transA=1), (3,), True, True),
    ("transB", 3, 7, 5, dict(transB=1), (5,), True, True),
    ("transA_transB", 4, 3, 6, dict(transA=1, transB=1), (4, 6), True, True),
    ("alpha_beta", 3, 5, 4, dict(alpha=0.5, beta=2.0), (3, 4), True, True),
    ("c_scalar", 3, 5, 4, {}, (), True, True),
    ("c_single_elem", 3, 5, 4, dict(beta=0.5), (1,), True, True),
    ("c_vector_n", 3, 5, 4, {}, (4,), True, True),
    ("c_column_m1", 3, 5, 4, {}, (3, 1), True, True),
    ("c_row_1n", 3, 5, 4, {}, (1, 4), True, True),
    ("c_full_mn", 3, 5, 4, {}, (3, 4), True, True),
    ("fc_m1_primes", 1, 13, 17, dict(transB=1), (17,), True, True),
    ("fc_batch2", 2, 17, 7, dict(transB=1), (7,), True, True),
    ("m1_c_1x1", 1, 5, 1, {}, (1, 1), True, True),
    ("dynamic_b", 3, 5, 4, {}, (4,), False, True),
    ("dynamic_b_transB", 3, 5, 4, dict(transB=1), (3, 4), False, True),
    ("dynamic_a_transA_dynamic_b", 3, 5, 4, dict(transA=1, alpha=2.0), None, False, True),
    ("dynamic_c_beta", 3, 5, 4, dict(beta=0.5), (3, 4), True, False),
    ("dynamic_c_row", 3, 5, 4, {}, (3, 1), True, False),
    ("dynamic_b_dynamic_c_vec", 3, 5, 4, dict(alpha=0.25, beta=3.0), (4,), False, False),
]


@pytest.mark.parametrize("M, K, N, attrs, c_shape, b_const, c_const",
                         [c[1:] for c in GEMM_CASES], ids=[c[0] for c in GEMM_CASES])
def test_gemm(M, K, N, attrs, c_shape, b_const, c_const, executor):
    a_shape = (K, M) if attrs.get("transA") else (M, K)
    b_shape = (N, K) if attrs.get("transB") else (K, N)
    inits, inputs, feeds = {}, [("a", a_shape)], {"a": rand(*a_shape, seed=1)}
    b = rand(*b_shape, seed=2)
    if b_const:
        inits["b"] = b
    else:
        inputs.append(("b", b_shape))
        feeds["b"] = b
    ins = ["a", "b"]
    if c_shape is not None:
        c = rand(*c_shape, seed=3)
        if c_const:
            inits["c"] = c
        else:
            inputs.append(("c", c_shape))
            feeds["c"] = c
        ins.append("c")
    m = make_model([node("Gemm", ins, ["y"], **attrs)], inputs, ["y"], inits)
    assert_matches(m, feeds, on=executor)


MATMUL_CASES = [
    # id, A shape, B shape, B constant
    ("2d", (3, 5), (5, 4), False),
    ("2d_const_b_primes", (7, 13), (13, 17), True),
    ("batched_3d", (2, 3, 5), (2, 5, 4), False),
    ("batched_const_b", (2, 3, 5), (2, 5, 4), True),
    ("bcast_b_2d_const", (2, 3, 5), (5, 4), True),
    ("bcast_b_2d_dynamic", (2, 3, 5), (5, 4), False),
    ("bcast_a_2d", (3, 5), (2, 5, 4), False),
    ("bcast_both_4d", (2, 1, 3, 5), (3, 5, 4), False),
    ("a_1d", (5,), (5, 4), True),
    ("b_1d", (3, 5), (5,), False),
    ("both_1d", (7,), (7,), False),
    ("a_1d_b_3d", (5,), (2, 5, 3), False),
    ("a_4d_b_1d", (2, 3, 4, 5), (5,), True),
    ("m1_row", (1, 13), (13, 7), True),
    # attention's shapes, both sides at run time, 12 x 32 tiles with 11 rows left over: P.V
    # over two k-blocks (x86 reads full 12-row panels of A in place, packs the last rows),
    # and in one k-block (full tiles stored straight into y)
    ("pv_k_blocks_a_in_place", (2, 47, 700), (2, 700, 64), False),
    ("pv_one_k_block_to_y", (2, 47, 64), (2, 64, 64), False),
]


@pytest.mark.parametrize("a_shape, b_shape, b_const", [c[1:] for c in MATMUL_CASES],
                         ids=[c[0] for c in MATMUL_CASES])
def test_matmul(a_shape, b_shape, b_const, executor):
    b = rand(*b_shape, seed=2)
    inputs, feeds, inits = [("a", a_shape)], {"a": rand(*a_shape, seed=1)}, {}
    if b_const:
        inits["b"] = b
    else:
        inputs.append(("b", b_shape))
        feeds["b"] = b
    m = make_model([node("MatMul", ["a", "b"], ["y"])], inputs, ["y"], inits)
    assert_matches(m, feeds, on=executor)


# ---------------------------------------------------------------------------------------------
# Binary element-wise ops

BINARY_CASES = [
    # id, A shape, B shape, which operand is a constant ("" / "a" / "b")
    ("same_shape", (2, 3, 4), (2, 3, 4), ""),
    ("bcast_b_last_axis", (2, 3, 4), (4,), ""),
    ("bcast_a_last_axis", (4,), (2, 3, 4), ""),
    ("bcast_both_ways", (3, 1), (1, 4), ""),
    ("bcast_both_ways_3d", (2, 1, 5), (3, 1), ""),
    ("bcast_scalar_input", (2, 3, 5), (), ""),
    ("const_scalar", (2, 3, 5, 5), (), "b"),
    ("const_scalar_first", (), (2, 3, 5, 5), "a"),
    ("const_per_channel", (2, 3, 5, 5), (3, 1, 1), "b"),
    ("const_per_channel_first", (1, 3, 1, 1), (2, 3, 5, 5), "a"),
    ("const_per_channel_rank2", (2, 6), (6,), "b"),
    ("const_last_axis", (1, 3, 5, 7), (7,), "b"),
    ("const_full", (2, 3, 4), (2, 3, 4), "b"),
    ("const_full_first", (2, 3, 4), (2, 3, 4), "a"),
    ("const_bcast_output_grows", (3, 5), (2, 1, 1), "b"),
    ("spatial_1x1", (1, 17, 1, 1), (1, 17, 1, 1), ""),
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("a_shape, b_shape, const", [c[1:] for c in BINARY_CASES],
                         ids=[c[0] for c in BINARY_CASES])
def test_binary(op, a_shape, b_shape, const, executor):
    gen = positive if op == "Div" else rand
    a, b = gen(*a_shape, seed=1), gen(*b_shape, seed=2)
    inputs, feeds, inits = [], {}, {}
    for name, arr, shape in (("a", a, a_shape), ("b", b, b_shape)):
        if const == name:
            inits[name] = arr
        else:
            inputs.append((name, shape))
            feeds[name] = arr
    m = make_model([node(op, ["a", "b"], ["y"])], inputs, ["y"], inits)
    assert_matches(m, feeds, on=executor)


def test_per_channel_constants_become_one_affine(executor):
    """x*s + t - u / v with per-channel constants: one ChannelAffine step, same numbers."""
    inits = {"s": rand(1, 5, 1, 1, seed=1), "t": rand(5, 1, 1, seed=2),
             "u": rand(5, 1, 1, seed=3), "v": positive(1, 5, 1, 1, seed=4)}
    nodes = [node("Mul", ["x", "s"], ["m"]), node("Add", ["t", "m"], ["a"]),
             node("Sub", ["a", "u"], ["d"]), node("Div", ["d", "v"], ["y"])]
    m = make_model(nodes, [("x", (2, 5, 3, 7))], ["y"], inits)
    art = rvvkit.build(m)
    assert plan_ops(art) == ["rvvkit.ChannelAffine"]
    assert_matches(m, {"x": rand(2, 5, 3, 7)}, artifact=art, on=executor)


SUM_CASES = [
    ("one_input", [(2, 3, 4)]),
    ("two_same", [(2, 3, 4), (2, 3, 4)]),
    ("two_bcast", [(2, 3, 4), (3, 1)]),
    ("three_same", [(1, 5, 7), (1, 5, 7), (1, 5, 7)]),
    ("three_bcast", [(2, 3, 4), (3, 1), (4,)]),
]


@pytest.mark.parametrize("shapes", [c[1] for c in SUM_CASES], ids=[c[0] for c in SUM_CASES])
def test_sum(shapes, executor):
    names = [f"x{i}" for i in range(len(shapes))]
    m = make_model([node("Sum", names, ["y"])], list(zip(names, shapes)), ["y"])
    feeds = {n: rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes))}
    assert_matches(m, feeds, on=executor)


def test_sum_with_constant_operand(executor):
    m = make_model([node("Sum", ["x", "c", "z"], ["y"])], [("x", (2, 3, 4)), ("z", (4,))],
                   ["y"], {"c": rand(3, 4, seed=5)})
    assert_matches(m, {"x": rand(2, 3, 4), "z": rand(4, seed=1)}, on=executor)


# ---------------------------------------------------------------------------------------------
