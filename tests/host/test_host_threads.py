"""The thread pool of the generated C (runtime_c/rvk_pool.h) as a host process sees it: workers
start only for work worth splitting, sleep between inferences, follow RVVKIT_NUM_THREADS and
set_threads, and never change a bit of the outputs. Each case runs in a child process, since
its threads and environment are what is measured."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand, run_ort

node = helper.make_node


def _conv_model(channels: int, size: int):
    """Conv 3x3 + Relu + Conv 1x1 + Softmax over channels: GEMM drivers and a split kernel."""
    c = channels
    inits = {"w1": rand(c, 3, 3, 3, seed=1, scale=0.2), "w2": rand(c, c, 1, 1, seed=2, scale=0.2)}
    nodes = [node("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1]), node("Relu", ["h"], ["r"]),
             node("Conv", ["r", "w2"], ["s"]), node("Softmax", ["s"], ["y"], axis=1)]
    return make_model(nodes, [("x", (1, 3, size, size))], ["y"], inits)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("threads")
    out = {}
    for name, (c, size) in {"tiny": (4, 6), "big": (64, 56)}.items():
        m = _conv_model(c, size)
        path = d / f"{name}.rvv"
        rvvkit.build(m).save(path)
        out[name] = (path, m)
    return out


CHILD = """
import json, os, sys, time
import numpy as np
import rvvkit
path, threads = sys.argv[1], json.loads(sys.argv[2])
tasks = lambda: len(os.listdir("/proc/self/task"))
with rvvkit.load(path, on="host", threads=threads) as sess:
    feeds = sess.random_feeds(0)
    before = tasks()
    out = sess.run(feeds)
    after = tasks()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    time.sleep(0.5)
    idle_cpu = time.process_time() - cpu0
    np.save(sys.argv[3], next(iter(out.values())))
print(json.dumps({"started": after - before, "idle_cpu": idle_cpu}))
"""


def _child(path, threads, out: Path, env=None):
    import os
    environ = {k: v for k, v in os.environ.items() if k not in ("RVVKIT_TASK_GRAIN",
                                                                "RVVKIT_NUM_THREADS")}
    environ.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), str(path),
                           json.dumps(threads), str(out)], capture_output=True, text=True,
                          env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out)


def test_workers_start_for_big_steps_and_sleep_between_runs(artifacts, tmp_path):
    path, model = artifacts["big"]
    info, y3 = _child(path, 3, tmp_path / "y3.npy")
    assert info["started"] == 2          # the caller is thread 0
    assert info["idle_cpu"] < 0.1, info  # asleep, not spinning, between inferences
    _, y1 = _child(path, 1, tmp_path / "y1.npy")
    assert np.array_equal(y1, y3)
    ref = run_ort(model, rvvkit.load(path).random_feeds(0))
    np.testing.assert_allclose(y3, next(iter(ref.values())), rtol=1e-3, atol=1e-5)


def test_small_steps_stay_on_the_callers_thread(artifacts, tmp_path):
    info, _ = _child(artifacts["tiny"][0], 3, tmp_path / "y.npy")
    assert info["started"] == 0


def test_thread_count_from_the_environment(artifacts, tmp_path):
    info, _ = _child(artifacts["big"][0], None, tmp_path / "y.npy", {"RVVKIT_NUM_THREADS": "4"})
    assert info["started"] == 3
    info, _ = _child(artifacts["big"][0], None, tmp_path / "y.npy", {"RVVKIT_NUM_THREADS": "1"})
    assert info["started"] == 0


def test_sessions_on_one_object_keep_their_own_counts(artifacts):
    path, _ = artifacts["big"]
    with rvvkit.load(path, threads=1) as one, rvvkit.load(path, threads=3) as three:
        feeds = one.random_feeds(0)
        a, b = one.run(feeds), three.run(feeds)
        assert one.describe()["threads"] == 1 and three.describe()["threads"] == 3
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_bad_thread_counts_are_refused(artifacts):
    from rvvkit.errors import InputError
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(InputError, match="threads must be a positive integer"):
            rvvkit.load(artifacts["tiny"][0], threads=bad)


def test_cli_threads_option(artifacts, tmp_path):
    path, _ = artifacts["big"]
    outs = []
    for n in ("1", "3"):
        out = tmp_path / f"y{n}.npz"
        proc = subprocess.run([sys.executable, "-m", "rvvkit", "run", str(path), "--threads", n,
                               "--output", str(out)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        outs.append(dict(np.load(out)))
    assert all(np.array_equal(outs[0][k], outs[1][k]) for k in outs[0])
    proc = subprocess.run([sys.executable, "-m", "rvvkit", "run", str(path), "--threads", "0"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--threads" in proc.stderr


def test_regions_smaller_than_the_pool_run_on_workers_alone(tmp_path):
    """Grain 1 on 6 threads: a 40 x 64 x 64 product splits into 4 row panels, fewer than the
    threads, so it runs on workers alone, turning over them (rvk_pool.h), and the 40-row
    softmax after it on all 6; the bits stay those of 1 thread."""
    model = make_model([node("MatMul", ["x", "w"], ["h"]), node("Softmax", ["h"], ["y"])],
                       [("x", (40, 64))], ["y"], {"w": rand(64, 64, seed=3, scale=0.2)})
    path = tmp_path / "mm.rvv"
    rvvkit.build(model).save(path)
    env = {"RVVKIT_TASK_GRAIN": "1"}
    info, y6 = _child(path, 6, tmp_path / "y6.npy", env)
    assert info["started"] == 5
    _, y1 = _child(path, 1, tmp_path / "y1.npy", env)
    assert np.array_equal(y1, y6)
    ref = run_ort(model, rvvkit.load(path).random_feeds(0))
    np.testing.assert_allclose(y6, next(iter(ref.values())), rtol=1e-3, atol=1e-5)
