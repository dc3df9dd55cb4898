"""Shared fixtures and helpers: the SSH boards, a reference run on onnxruntime to compare
rvvkit's executors against, and (re-exported from model_building.py) tiny ONNX models built
in code.

Every test session compiles into its own temporary cache (RVVKIT_CACHE_DIR), so the suite never
reads or writes the user's cache; with pytest-xdist each worker gets its own. It also sets
RVVKIT_TASK_GRAIN=1, so that even tiny kernels split across threads."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, Mapping, Sequence, Tuple

import numpy as np
import pytest

from executors import HOST, Executor
from executors import keeps as executor_keeps
from executors import params as executor_params
from executors import sample as executor_sample
from model_building import conv_ref, make_model, onnx_inputs, rand  # noqa: F401  (re-exported)
from rvvkit.zoo import expose_logits  # noqa: F401  (re-exported)

# The SSH boards are session fixtures, so they are defined here and nowhere else: a fixture
# imported into several test modules is a separate fixture in each, and each copy started its
# own servers and pointed RVVKIT_SSH_CONFIG at its own files while the others' tests still ran.
sys.path.insert(0, str(Path(__file__).resolve().parent / "ssh"))
from debian_board_support import debian_board  # noqa: E402,F401  (fixture)
from sftpless_support import sftpless  # noqa: E402,F401  (fixture)
from ssh_support import ssh_world  # noqa: E402,F401  (fixture)

RTOL, ATOL = 1e-3, 1e-4


@pytest.fixture(scope="session", autouse=True)
def _private_rvvkit_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("RVVKIT_CACHE_DIR", str(tmp_path_factory.mktemp("rvvkit-cache")))
    mp.delenv("RVVKIT_NO_CACHE", raising=False)
    # Split every kernel that can be split, however small, so the thread counts the executors
    # run (tests/executors.py) exercise the partitions.
    mp.setenv("RVVKIT_TASK_GRAIN", "1")
    yield
    mp.undo()


# Variables that change what the JIT builds: the JIT tests start from none of them.
JIT_ENV = ("RVVKIT_NO_CACHE", "RVVKIT_CFLAGS", "RVVKIT_COMPILER", "TVM_RVV_COMPILER",
           "RVVKIT_NVCC", "RVVKIT_NVCC_FLAGS")


@pytest.fixture
def private_jit_cache(tmp_path, monkeypatch):
    """An empty cache of the test's own and a JIT environment without user settings."""
    for var in JIT_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RVVKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def compile_counter(monkeypatch):
    """The argv of every real compiler run during the test."""
    from rvvkit.jit import build
    calls = []
    real = build.run_compiler

    def counting(cmd, cwd, timeout):
        calls.append(list(cmd))
        return real(cmd, cwd, timeout)
    monkeypatch.setattr(build, "run_compiler", counting)
    return calls


# ---------------------------------------------------------------------------------------------
# Running

def run_ort(model, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
    from rvvkit.measure.reference import ort_session
    sess = ort_session(model)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds))))


def _executors(on) -> Sequence:
    """`on` as a list of executors: one Executor (tests/executors.py) or several."""
    return list(on) if isinstance(on, (list, tuple)) else [on]


def run_rvvkit_all(model, feeds: Mapping[str, np.ndarray], artifact=None, on=HOST,
                   **build_kwargs) -> Dict[str, Dict[str, np.ndarray]]:
    """Build `model` once (unless `artifact` is given) and run it on each executor of `on`
    (an Executor or a list; the host by default): {executor id: outputs}."""
    import rvvkit
    art = artifact if artifact is not None else rvvkit.build(model, **build_kwargs)
    return {ex.id: ex.run(art, feeds) for ex in _executors(on)}


def run_rvvkit(model, feeds: Mapping[str, np.ndarray], artifact=None, on=HOST,
               **build_kwargs) -> Dict[str, np.ndarray]:
    """Outputs of the (first) executor of `on`, the host by default."""
    return next(iter(run_rvvkit_all(model, feeds, artifact, on, **build_kwargs).values()))


def run_both(model, feeds: Mapping[str, np.ndarray], artifact=None, **build_kwargs
             ) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    """(rvvkit host outputs, onnxruntime outputs), both keyed by graph output name."""
    ours = run_rvvkit(model, feeds, artifact, **build_kwargs)
    ref = run_ort(model, feeds)
    return ours, ref


def assert_matches(model, feeds: Mapping[str, np.ndarray], rtol: float = RTOL,
                   atol: float = ATOL, artifact=None, on=HOST,
                   **build_kwargs) -> Dict[str, np.ndarray]:
    """Build + run with rvvkit on each executor of `on` (the host by default; one build for
    all) and with onnxruntime; every output must agree. Returns the first executor's outputs."""
    runs = run_rvvkit_all(model, feeds, artifact, on, **build_kwargs)
    ref = run_ort(model, feeds)
    for label, ours in runs.items():
        assert sorted(ours) == sorted(ref), (label, sorted(ours), sorted(ref))
        for name, want in ref.items():
            got = ours[name]
            assert got.shape == want.shape, f"{label} {name}: shape {got.shape} != {want.shape}"
            assert got.dtype == want.dtype, f"{label} {name}: dtype {got.dtype} != {want.dtype}"
            if want.dtype.kind in "biu":   # integers and bools: exact
                np.testing.assert_array_equal(got, want, err_msg=f"{label}: output {name!r}")
                continue
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                       err_msg=f"{label}: output {name!r}")
    return next(iter(runs.values()))


# ---------------------------------------------------------------------------------------------
# Executors by parameter

@pytest.hookimpl(trylast=True)  # after the parametrize marks: the executor's id comes last
def pytest_generate_tests(metafunc):
    """A test taking `executor` runs on every executor of this session (tests/executors.py);
    one taking `op_executor` on the sample (CI: the host and one of the others, rotated), one
    taking `sample_executor` on the whole sample (the decoders' generation, whose every form
    is checked on every kind of target)."""
    if "executor" in metafunc.fixturenames:
        metafunc.parametrize("executor", executor_params())
    for name in ("op_executor", "sample_executor"):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, executor_params(executor_sample()))


def pytest_collection_modifyitems(config, items):
    """CI's executor matrix: each case on one of the rotating executors of its parameter
    (tests/executors.py ROTATIONS; RVVKIT_TEST_MATRIX=full runs them all)."""
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        kept = all(executor_keeps(item.nodeid, params[p], p)
                   for p in ("executor", "target", "op_executor")
                   if isinstance(params.get(p), Executor))
        (keep if kept else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def bn_params(c, seed=3):
    """BatchNormalization parameters for `c` channels: scale s, bias bb, mean, var > 0."""
    rng = np.random.default_rng(seed)
    return {"s": rng.standard_normal(c).astype(np.float32),
            "bb": rng.standard_normal(c).astype(np.float32),
            "mean": rng.standard_normal(c).astype(np.float32),
            "var": (0.5 + rng.random(c)).astype(np.float32)}


__all__ = ["make_model", "rand", "conv_ref", "expose_logits", "run_both", "run_ort", "run_rvvkit",
           "run_rvvkit_all", "assert_matches", "HOST", "onnx_inputs", "RTOL", "ATOL", "bn_params"]


def assert_npz_keeps_names(outs: Mapping[str, np.ndarray], tmp_path) -> None:
    """What `rvvkit run --output` writes (rvvkit.cli.npz.save_npz) is read back by plain
    numpy under every output's own name, without a line saying a name was escaped."""
    from rvvkit.cli.npz import save_npz
    said: list = []
    path = tmp_path / "outputs.npz"
    save_npz(str(path), outs, warn=said.append)
    assert said == [], said
    with np.load(path) as plain:
        assert plain.files == list(outs)
        for name, value in outs.items():
            np.testing.assert_array_equal(plain[name], value, err_msg=name)
    path.unlink()
