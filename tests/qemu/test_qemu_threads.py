"""Threads under QEMU: stored models (a transformer, a detector, a mobile convnet) give the same
bits on 1, 2 and 3 guest threads (odd counts catch partition bugs), through the runner's
--threads, with poisoned vector tails; and the guest really runs that many threads (per-thread
counts of rvvkit's plugin)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rvvkit
from rvvkit.runtime.qemu import QemuSession
from qemu_support import RV_COMPILER, needs_qemu

pytestmark = [pytest.mark.qemu, needs_qemu]

MODELS = Path(__file__).resolve().parents[1] / "models"


def _stored(name: str):
    data = np.load(MODELS / f"{name}.npz")
    feeds = {k[3:]: data[k] for k in data.files if k.startswith("in.")}
    ref = {k[4:]: data[k] for k in data.files if k.startswith("out.")}
    return str(MODELS / f"{name}.onnx"), feeds, ref


@pytest.mark.parametrize("name", ["bert_legacy", "yolo_dynamo", "mobilenet_v3_small_dynamo"])
def test_outputs_are_bit_identical_for_every_thread_count(name):
    path, feeds, ref = _stored(name)
    art = rvvkit.build(path)
    with QemuSession(art, vlen=128, tail_ones=True, compiler=RV_COMPILER) as sess:
        runs = {}
        for n in (1, 2, 3):
            sess.set_threads(n)
            runs[n] = sess.run(feeds)
    for n in (2, 3):
        for out, want in runs[1].items():
            assert np.array_equal(runs[n][out], want, equal_nan=True), f"{name} {out}: {n} threads"
    for out, want in ref.items():   # and right: the stored onnxruntime outputs
        got = runs[3][out]
        scale = max(1e-4, 1e-5 * float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=scale, err_msg=f"{name} {out}")


def test_the_guest_runs_the_threads_asked_for():
    path, feeds, _ = _stored("bert_legacy")
    art = rvvkit.build(path)
    with QemuSession(art, vlen=256, compiler=RV_COMPILER) as sess:
        for n in (1, 3):
            sess.set_threads(n)
            per = sess.instruction_counts(feeds)["per_thread"]
            busy = [p for p in per if p["lmul_weighted_vector_ops"] > 0]
            assert len(busy) == n, (n, per)
