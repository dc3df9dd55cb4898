"""Static memory planning: buffers that are live at the same time never share memory, every
buffer is aligned, and the arena is never smaller than the peak of live memory."""
import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import assert_matches, make_model, rand
from rvvkit.codegen.memory import ALIGN, Interval, align, lower_bound, plan

node = helper.make_node


def random_intervals(rng, n, steps, max_size):
    out = []
    for i in range(n):
        first = int(rng.integers(0, steps))
        last = min(steps - 1, first + int(rng.geometric(0.3)) - 1)  # mostly short lifetimes
        out.append(Interval(f"t{i}", int(rng.integers(1, max_size)), first, last))
    return out


def check_plan(intervals):
    offsets, total = plan(intervals)
    assert set(offsets) == {iv.key for iv in intervals}
    for iv in intervals:
        off = offsets[iv.key]
        assert off >= 0 and off % ALIGN == 0, (iv, off)
        assert off + align(iv.size) <= total
    for i, a in enumerate(intervals):
        for b in intervals[i + 1:]:
            if a.first <= b.last and b.first <= a.last:  # live at the same time
                oa, ob = offsets[a.key], offsets[b.key]
                assert oa + a.size <= ob or ob + b.size <= oa, (a, oa, b, ob)
    assert total >= lower_bound(intervals)
    return offsets, total


@pytest.mark.parametrize("seed", range(40))
def test_random_intervals_never_overlap(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    check_plan(random_intervals(rng, n, steps=int(rng.integers(1, 30)),
                                max_size=int(rng.choice([5, 100, 5000]))))


def test_lower_bound_is_peak_of_live_aligned_sizes():
    ivs = [Interval("a", 10, 0, 1), Interval("b", 20, 1, 2), Interval("c", 33, 2, 3),
           Interval("d", 1, 3, 3)]
    # step 1: a + b = 16 + 32; step 2: b + c = 32 + 48; step 3: c + d = 48 + 16
    assert lower_bound(ivs) == 80
    offsets, total = check_plan(ivs)
    assert total == 80  # a chain is packed optimally


def test_disjoint_lifetimes_share_memory():
    ivs = [Interval(f"t{i}", 100, i, i) for i in range(10)]
    offsets, total = check_plan(ivs)
    assert set(offsets.values()) == {0}
    assert total == align(100) == lower_bound(ivs)


def test_all_live_at_once_is_the_sum():
    ivs = [Interval(f"t{i}", s, 0, 5) for i, s in enumerate([1, 17, 64, 3])]
    _, total = check_plan(ivs)
    assert total == sum(align(iv.size) for iv in ivs) == lower_bound(ivs)


def test_empty_and_degenerate():
    assert plan([]) == ({}, 0)
    assert lower_bound([]) == 0
    offsets, total = check_plan([Interval("z", 0, 0, 0), Interval("one", 1, 0, 0)])
    assert total == ALIGN


def test_align():
    assert [align(n) for n in (0, 1, ALIGN, ALIGN + 1)] == [0, ALIGN, ALIGN, 2 * ALIGN]


# ---------------------------------------------------------------------------------------------
# On real artifacts

def chain_model(depth=6, shape=(1, 4, 8, 8)):
    acts = ["Relu", "Sigmoid", "Tanh"]
    nodes, prev = [], "x"
    for i in range(depth):
        out = "y" if i == depth - 1 else f"t{i}"
        nodes.append(node(acts[i % 3], [prev], [out]))
        prev = out
    return make_model(nodes, [("x", shape)], ["y"])


def test_artifact_arena_at_least_lower_bound_and_reuses_memory():
    m = chain_model()
    art = rvvkit.build(m)
    mem = art.meta["memory"]
    assert mem["arena_bytes"] >= mem["lower_bound_bytes"] > 0
    one = 4 * 4 * 8 * 8
    # five intermediates, but never more than two live at once: ping-pong between two buffers
    assert mem["lower_bound_bytes"] == 2 * one
    assert mem["arena_bytes"] == 2 * one
    offsets = {a["offset"] for s in art.meta["plan"] for a in s["args"] if a["kind"] == "arena"}
    assert len(offsets) == 2 and all(o % ALIGN == 0 for o in offsets)
    assert_matches(m, {"x": rand(1, 4, 8, 8)}, artifact=art)


def test_artifact_with_workspace_and_branches():
    nodes = [node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             node("LRN", ["c1"], ["l"], size=3),
             node("Conv", ["l", "w2"], ["c2"]),
             node("MaxPool", ["c1"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             node("Add", ["c2", "p"], ["s"]),
             node("Softmax", ["s"], ["y"], axis=1)]
    inits = {"w1": rand(4, 3, 3, 3, seed=1), "w2": rand(4, 4, 1, 1, seed=2)}
    m = make_model(nodes, [("x", (1, 3, 9, 9))], ["y"], inits)
    art = rvvkit.build(m)
    mem = art.meta["memory"]
    assert mem["arena_bytes"] >= mem["lower_bound_bytes"] > 0
    assert mem["arena_bytes"] % (4 * ALIGN) == 0
    assert_matches(m, {"x": rand(1, 3, 9, 9)}, artifact=art)


def test_fixed_intervals_keep_their_offsets_and_others_avoid_them():
    """A second plan of one artifact finds the session's caches where the first put them
    (codegen/plan.py's base): those intervals are fixed, the rest placed around them."""
    cache = Interval("cache", 40, 0, 9)
    ivs = [cache, Interval("big", 100, 2, 3), Interval("small", 8, 0, 9)]
    offsets, total = plan(ivs, fixed={"cache": 3 * ALIGN})
    assert offsets["cache"] == 3 * ALIGN
    spans = {iv.key: (offsets[iv.key], offsets[iv.key] + align(iv.size)) for iv in ivs}
    for a in ivs:
        for b in ivs:
            if a.key < b.key:
                (a0, a1), (b0, b1) = spans[a.key], spans[b.key]
                assert a1 <= b0 or b1 <= a0, (a.key, b.key)
    assert total >= max(end for _, end in spans.values())
