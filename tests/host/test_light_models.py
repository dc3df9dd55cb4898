"""End to end on the nine real architectures shipped with the `onnx` wheel (rvvkit.zoo): each
model, with seeded random weights, is built by rvvkit, JIT-compiled and run on the host, and its
outputs are compared with onnxruntime (one thread) on the same model and inputs.

Slow (the whole file takes minutes, mostly C compilation), but not skipped: CI runs it.
Where a model ends in Softmax, its input (the logits) is compared too, as an extra graph
output: with random weights some softmaxes saturate to one-hot vectors (resnet50 and
shufflenet reach logits of ~1e5..1e6), and a one-hot output proves little beyond the argmax.
Logits that large carry float32 rounding on the scale of the largest one, so their absolute
tolerance grows with that scale (1e-5 of it; measured errors are ~5e-7 of it).

Memory is kept to one copy of a model's weights at a time where possible: the model is written
to a file that onnxruntime and rvvkit each read in turn, and every session is dropped before the
next one opens (VGG19 alone carries ~550 MB of weights)."""
from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from conftest import assert_npz_keeps_names, expose_logits
from rvvkit.zoo import LIGHT_MODELS, light_model, sample_inputs

RTOL, ATOL = 1e-3, 1e-4
LOGITS_SCALE_ATOL = 1e-5  # logits: atol = max(ATOL, this * max|logit|)
SEED = 0

pytestmark = pytest.mark.slow


def _reference(path: str, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # zfnet512 carries an unused initializer: keep the log quiet
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(names, feeds)))
    del sess
    return outs


def _rvvkit(path: str, feeds, on: str, check_artifact):
    import rvvkit
    art = rvvkit.build(path)
    check_artifact(art)
    if on == "host":   # 1, 2 and 3 threads, bit-identical (tests/executors.py)
        from executors import HOST
        return HOST.run(art, feeds)
    sess = rvvkit.load(art, on=on)
    del art
    with sess:
        return sess.run(feeds)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_matches_onnxruntime(name, tmp_path):
    check_light_model(name, tmp_path, "host")


def check_light_model(name: str, tmp_path, on: str, check_artifact=lambda art: None) -> None:
    """Build light model `name`, run it `on` an executor and compare with onnxruntime;
    `check_artifact` sees the artifact first (the CUDA tests compile its .cu with nvcc)."""
    import onnx
    model = light_model(name, SEED)
    feeds = sample_inputs(model, SEED)
    logits = expose_logits(model)
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    del model
    gc.collect()
    try:
        ref = _reference(path, feeds)
        gc.collect()
        ours = _rvvkit(path, feeds, on, check_artifact)
    finally:
        os.remove(path)  # VGG19's is 550 MB; pytest keeps tmp dirs of recent runs
        gc.collect()
    assert sorted(ours) == sorted(ref), (sorted(ours), sorted(ref))
    for out_name, want in ref.items():
        got = ours[out_name]
        assert got.shape == want.shape, f"{name}/{out_name}: shape {got.shape} != {want.shape}"
        assert np.isfinite(got).all(), f"{name}/{out_name}: non-finite values"
        atol = ATOL
        if out_name == logits:
            atol = max(ATOL, LOGITS_SCALE_ATOL * float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol,
                                   err_msg=f"{name} on {on}: output {out_name!r}")
        assert int(np.argmax(got)) == int(np.argmax(want)), \
            f"{name}/{out_name} on {on}: argmax {np.argmax(got)} != onnxruntime's " \
            f"{np.argmax(want)}"
    assert_npz_keeps_names(ours, tmp_path)
