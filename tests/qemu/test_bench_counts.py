"""`rvvkit bench --on qemu`: exact per-inference instruction counts that prove the vector build
runs vector instructions and the scalar GCC 12 build none, and that fall as VLEN grows; the
LMUL-weighted vector count of generated code is exact (no vtype the plugin cannot read); the
JSON row's per-thread counts, critical path and K1 cycle model."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest

import rvvkit
from rvvkit.runtime.qemu import QemuSession
from qemu_support import CLANG, GCC_CXX, needs_both_compilers, needs_qemu, small_model

pytestmark = pytest.mark.qemu


@pytest.fixture(scope="module")
def artifact_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "small.rvv"
    rvvkit.build(small_model()).save(path)
    return path


def _measure(path, compiler, vlen, threads, what):
    """what(session, feeds of ones) in a QEMU session on `threads` threads."""
    with QemuSession(path, compiler=compiler, vlen=vlen) as sess:
        sess.set_threads(threads)
        return what(sess, {n: np.ones(s, "float32") for n, s in sess.inputs})


def _counts(path, compiler, vlen, threads=1):
    return _measure(path, compiler, vlen, threads, lambda sess, feeds: (
        sess.instruction_counts(feeds), int(sess.artifact.meta["macs"])))


@needs_both_compilers
def test_vector_build_executes_vector_instructions_and_gcc12_none(artifact_path):
    rvv, _ = _counts(artifact_path, CLANG, 256)
    scalar, _ = _counts(artifact_path, GCC_CXX, 256)
    assert rvv["vector_insns"] > 0 and rvv["vsetvl"] > 0
    assert scalar["vector_insns"] == 0
    assert scalar["lmul_weighted_vector_ops"] == scalar["vector_insns_unknown_lmul"] == 0
    assert rvv["insns"] < scalar["insns"]


@needs_qemu
def test_counts_are_exact_and_fall_as_vlen_grows(artifact_path):
    first, macs = _counts(artifact_path, CLANG, 128)
    again, _ = _counts(artifact_path, CLANG, 128)
    assert first == again  # exact and repeatable: the figure CI can compare
    wide, _ = _counts(artifact_path, CLANG, 512)
    assert wide["insns"] < first["insns"]
    assert 0 < first["insns"] < 50 * macs + 10**6  # the inference alone, not start-up
    for c in (first, wide):
        # generated code sets vtype with vsetvli only: every weight is known, none below 1
        assert c["vector_insns_unknown_lmul"] == 0, c
        assert c["lmul_weighted_vector_ops"] >= c["vector_insns"] > 0, c


@needs_qemu
def test_threaded_counts_split_the_vector_work_the_same_way_every_run(artifact_path):
    """Task t runs on thread t: each thread's vector work is exact run after run."""
    one, _ = _counts(artifact_path, CLANG, 128)
    runs = [_counts(artifact_path, CLANG, 128, threads=3)[0] for _ in range(2)]
    per = [[t["lmul_weighted_vector_ops"] for t in r["per_thread"]] for r in runs]
    assert per[0] == per[1] and len(per[0]) == 3 and min(per[0]) > 0, per
    # the same work, divided: a few more set-ups where parts meet
    assert one["lmul_weighted_vector_ops"] <= sum(per[0]) <= 1.02 * one["lmul_weighted_vector_ops"]


# Where threads hand work over: how often a thread finds a lock taken or must sleep depends on
# timing, so these functions' counts may differ run to run (PLT stubs and libc's unnamed code are
# "file:?"); nothing else may.
_HAND_OVER = re.compile(r"(__?)?(pthread|lll)_|rvk_parallel|rvk_pool_|.*:\?$")


@needs_qemu
def test_threaded_runs_differ_only_in_hand_overs(artifact_path):
    """Every kernel's instructions are exact at 3 threads, run after run; only the pool's and
    libc's lock and wake-up code varies (a tiny model's total by 5-7 %)."""
    a, b = (_measure(artifact_path, CLANG, 128, 3,
                     lambda sess, feeds: sess.instruction_profile(feeds)) for _ in range(2))
    differ = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
    assert all(_HAND_OVER.match(f) for f in differ), differ
    kernels = [f for f in a if not _HAND_OVER.match(f) and a[f]["vector_insns"] > 0]
    assert len(kernels) >= 5, sorted(a)
    assert any(f.startswith("rvk_pool_") for f in a), sorted(a)   # the pool ran and was named


@needs_qemu
def test_cli_bench_json(artifact_path):
    proc = subprocess.run([sys.executable, "-m", "rvvkit", "bench", str(artifact_path),
                           "--on", "host,qemu", "--vlen", "128,256", "--repeat", "2",
                           "--compiler", CLANG, "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["executor"], r.get("vlen")) for r in rows] == \
        [("host", None), ("qemu", 128), ("qemu", 256)]
    for r in rows[1:]:
        assert r["dynamic_instructions"] > r["vector_instructions"] > 0
        assert r["lmul_weighted_vector_ops"] >= r["vector_instructions"]
        assert r["vector_instructions_unknown_lmul"] == 0
        assert r["macs_per_instruction"] == pytest.approx(r["macs"] / r["dynamic_instructions"])
        # per thread (vCPU): one inference's instructions add up to the total; the critical
        # path is the largest thread's scalar + LMUL-weighted vector count
        threads = r["per_thread_instructions"]
        assert threads and sum(threads) == r["dynamic_instructions"], r
        weighted = (r["dynamic_instructions"] - r["vector_instructions"]
                    + r["lmul_weighted_vector_ops"])
        assert weighted / len(threads) <= r["critical_path_instructions"] <= weighted, r
        assert r["cycle_model"].startswith("k1 (VLEN 256")
    # the K1 model (VLEN 256, the X60's 128-bit datapath, 1.6 GHz: toolchain/boards/k1.toml)
    # applies to the VLEN 256 run only; there a vector instruction costs twice its LMUL, so
    # the slowest thread's cycles lie between its weighted count and twice that, and below
    # every thread's scalar instructions plus twice their vector work
    assert rows[1]["modelled_cycles"] is rows[1]["modelled_ms"] is None
    k1 = rows[2]
    every = k1["dynamic_instructions"] - k1["vector_instructions"] + \
        2 * k1["lmul_weighted_vector_ops"]
    crit = k1["critical_path_instructions"]
    assert crit < k1["modelled_cycles"] <= min(2 * crit, every), k1
    assert k1["modelled_ms"] == pytest.approx(k1["modelled_cycles"] / 1.6e6)
    assert rows[2]["dynamic_instructions"] < rows[1]["dynamic_instructions"]
    assert "per_thread_instructions" not in rows[0]  # host: no counts
    assert rows[0]["latency_ms"] > 0


@needs_qemu
def test_cli_bench_classes_adds_the_class_model(artifact_path):
    """`--classes` at the K1's VLEN: the counts by class, and the K1 class model's time from
    them (docs/cost-model.md), at least the busiest pipe's share of the classes' cycles."""
    proc = subprocess.run([sys.executable, "-m", "rvvkit", "bench", str(artifact_path),
                           "--on", "qemu", "--board", "k1", "--threads", "1", "--repeat", "1",
                           "--classes", "--compiler", CLANG, "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)[0]
    assert row["vlen"] == 256 and row["class_model"].startswith("k1 (SpacemiT X60")
    assert row["class_model_cycles"] > 0 and row["class_model_ms"] == pytest.approx(
        row["class_model_cycles"] / 1.6e6, rel=1e-3)
    # two instructions issue per cycle at most: the model is never below half the count
    assert row["class_model_cycles"] >= row["dynamic_instructions"] / 2
    assert sum(n for per in row["instruction_classes"].values() for n in per.values()) == \
        row["dynamic_instructions"]
