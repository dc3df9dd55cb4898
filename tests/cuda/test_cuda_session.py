"""The CUDA executor end to end: on the CPU emulator everywhere (numerics against onnxruntime,
the session's contract, its errors), on a GPU where there is one (skipped with "no CUDA
device" otherwise)."""
from __future__ import annotations

import numpy as np
import pytest

import rvvkit
from conftest import run_ort
from cuda_support import (GPU_OK, assert_close, convnet, feeds_for, hand_source, needs_gpu,
                          needs_nvcc, relu_model, two_input_model, with_cu)
from rvvkit.measure.bench import bench
from rvvkit.errors import ArtifactError, ExecutionError, ExecutorUnavailable, InputError
from rvvkit.runtime import EXECUTORS, open_session
from rvvkit.runtime.cuda import CudaSession, cuda_available

pytestmark = pytest.mark.cuda
MODELS = {"convnet": convnet, "two_inputs": two_input_model, "relu": relu_model}


@pytest.fixture(scope="module")
def arts():
    return {name: (make(), rvvkit.build(make())) for name, make in MODELS.items()}


@pytest.fixture(scope="module")
def emu(arts):
    with CudaSession(arts["convnet"][1], emulate=True) as sess:
        yield sess


# -- numerics on the CPU emulator --------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MODELS))
def test_emulated_matches_onnxruntime(arts, name):
    model, art = arts[name]
    feeds = feeds_for(model, seed=3)
    with rvvkit.load(art, on="cuda-emu") as sess:
        assert sess.executor == "cuda-emu" and sess.emulate
        ours = sess.run(feeds)
        again = sess.run(feeds)  # buffers reused: same answer
    assert_close(ours, run_ort(model, feeds), label=f"cuda-emu {name}")
    for k in ours:
        np.testing.assert_array_equal(ours[k], again[k])


def test_emulated_from_a_saved_artifact(arts, tmp_path):
    model, art = arts["two_inputs"]
    path = tmp_path / "m.rvv"
    art.save(path)
    feeds = feeds_for(model)
    with open_session(path, on="cuda-emu") as sess:
        assert_close(sess.run(feeds), run_ort(model, feeds), label="saved")


def test_registered_executors():
    assert "cuda" in EXECUTORS and "cuda-emu" in EXECUTORS


# -- the session's contract --------------------------------------------------------------------

def test_timed_run_profile_latency(emu, arts):
    model, _ = arts["convnet"]
    feeds = feeds_for(model)
    plain = emu.run(feeds)
    timed = emu.run(feeds, timed=True)
    assert len(emu.last_seconds) == len(emu.steps) and all(s >= 0 for s in emu.last_seconds)
    for k in plain:
        np.testing.assert_array_equal(plain[k], timed[k])
    rows = emu.profile(feeds, repeat=2)
    assert [r["step"] for r in rows] == list(range(len(emu.steps)))
    assert {"kernel", "node", "op", "macs", "seconds"} <= set(rows[0])
    lat = emu.measure(feeds, repeat=3, warmup=1)
    assert lat["latency_ms"] > 0 and lat["runs"] == 3 and lat["latency_stat"] == "median"
    desc = emu.describe()
    assert desc["executor"] == desc["path"] == "cuda-emu" and desc["device"] in desc["label"]
    assert desc["vlen"] is None and not desc["counts_instructions"]
    row = bench(emu, feeds, repeat=2, warmup=1)
    assert row["executor"] == "cuda-emu" and row["latency_ms"] > 0


def test_input_errors(emu, arts):
    model, _ = arts["convnet"]
    good = feeds_for(model)
    with pytest.raises(InputError, match=r"shape \[1, 3, 12, 11\], expected \[1, 3, 12, 12\]"):
        emu.run({"x": np.zeros((1, 3, 12, 11), np.float32)})
    with pytest.raises(InputError, match="float32"):
        emu.run({"x": good["x"].astype(np.float64)})
    with pytest.raises(InputError, match="missing"):
        emu.run({})


def test_no_cuda_section_asks_for_a_rebuild():
    art = rvvkit.build(relu_model(), cuda=False)
    with pytest.raises(ArtifactError, match="rebuild") as info:
        CudaSession(art, emulate=True)
    assert info.value.section == ".rvvkit.cu"


def test_closed_session_refuses_to_run(arts):
    model, art = arts["relu"]
    sess = CudaSession(art, emulate=True)
    sess.close()
    sess.close()  # idempotent
    with pytest.raises(ExecutionError, match="closed"):
        sess.run(feeds_for(model))


# -- error paths, through a hand-written translation unit --------------------------------------

def test_hand_written_unit_runs(arts):
    model, art = arts["relu"]
    feeds = feeds_for(model)
    with CudaSession(with_cu(art, hand_source(art)), emulate=True) as sess:
        assert sess.device_name == "hand-written device"
        np.testing.assert_array_equal(sess.run(feeds)["y"], np.maximum(feeds["x"], 0))


def test_abi_mismatch(arts):
    art = arts["relu"][1]
    with pytest.raises(ExecutionError, match="ABI 999"):
        CudaSession(with_cu(art, hand_source(art, abi=999)), emulate=True)


def test_no_device_reported_by_the_object(arts):
    art = arts["relu"][1]
    with pytest.raises(ExecutorUnavailable) as info:
        CudaSession(with_cu(art, hand_source(art, devices=0)), emulate=True)
    assert str(info.value).startswith("no CUDA device")


def test_cuda_error_codes_become_execution_errors(arts):
    model, art = arts["relu"]
    with CudaSession(with_cu(art, hand_source(art, run_rc=2)), emulate=True) as sess:
        with pytest.raises(ExecutionError, match=r"rvvkit_run failed .*CUDA error 2 \(out of "
                                                 r"memory"):
            sess.run(feeds_for(model))


# -- a real GPU --------------------------------------------------------------------------------

@pytest.mark.skipif(GPU_OK, reason="this machine has a CUDA device")
def test_without_a_gpu_the_cuda_executor_says_so(arts):
    ok, why = cuda_available()
    assert not ok and why.startswith("no CUDA device")
    with pytest.raises(ExecutorUnavailable) as info:
        rvvkit.load(arts["relu"][1], on="cuda")
    assert str(info.value).startswith("no CUDA device")


@needs_nvcc
@needs_gpu
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gpu_matches_onnxruntime_and_emulator(arts, name):
    model, art = arts[name]
    feeds = feeds_for(model, seed=7)
    with rvvkit.load(art, on="cuda") as sess:
        assert sess.executor == "cuda" and sess.lib.rvvkit_cuda_emulated() == 0
        ours = sess.run(feeds, timed=True)
        assert len(sess.last_seconds) == len(sess.steps)
    assert_close(ours, run_ort(model, feeds), label=f"cuda {name}")
    with rvvkit.load(art, on="cuda-emu") as sess:
        assert_close(ours, sess.run(feeds), label=f"cuda vs cuda-emu {name}")


@needs_nvcc
@needs_gpu
def test_gpu_profile_latency_and_errors(arts):
    model, art = arts["convnet"]
    feeds = feeds_for(model)
    with rvvkit.load(art, on="cuda") as sess:
        assert sess.device_name
        rows = sess.profile(feeds, repeat=3)
        assert len(rows) == len(sess.steps) and all(r["seconds"] > 0 for r in rows)
        assert sess.measure(feeds, repeat=5, warmup=2)["latency_ms"] > 0
        with pytest.raises(InputError):
            sess.run({"x": np.zeros((1, 3, 12, 11), np.float32)})
    with pytest.raises(ExecutionError, match="ABI 999"):
        CudaSession(with_cu(arts["relu"][1], hand_source(arts["relu"][1], abi=999)))
