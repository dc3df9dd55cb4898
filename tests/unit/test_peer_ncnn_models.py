"""benchmarks/peer_ncnn_models.py: the models both engines count and the runner's input file
(the ncnn side itself needs the peer build, which is a benchmark tool, never a test's)."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import peer_ncnn_models as M  # noqa: E402
from encoder import bert_encoder  # noqa: E402
from peer_ncnn_build import PeerError  # noqa: E402


def test_encoder_with_constant_mask_computes_the_same():
    model, feeds = M.encoder_model()
    assert [i.name for i in model.graph.input] == ["x"]
    full, full_feeds = bert_encoder()
    (want,) = M.ort_outputs(full, full_feeds).values()
    (got,) = M.ort_outputs(model, feeds).values()
    np.testing.assert_array_equal(got, want)


def test_runner_input_shape_drops_the_batch(tmp_path):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
    assert M.write_input({"x": x}, tmp_path / "a.raw") == (2, 3, 4)
    np.testing.assert_array_equal(np.fromfile(tmp_path / "a.raw", np.float32), x.ravel())
    assert M.write_input({"x": x.reshape(1, 6, 4)}, tmp_path / "b.raw") == (6, 4)
    with pytest.raises(PeerError, match="one"):
        M.write_input({"x": x.reshape(2, 12)}, tmp_path / "c.raw")


def test_check_refuses_a_mismatch_and_skips_top1_for_an_encoder():
    ref = np.linspace(-1, 1, 64, dtype=np.float32)
    ok = M.check("enc", [ref + 1e-5], [ref], 1e-3, True, top1=False)
    assert set(ok) == {"max_diff_of_range", "agrees"} and ok["agrees"]
    assert not M.check("enc", [ref + 0.1], [ref], 1e-3, False, top1=False)["agrees"]
    with pytest.raises(PeerError, match="does not match"):
        M.check("enc", [ref + 0.1], [ref], 1e-3, True, top1=False)
    swapped = ref.copy()
    swapped[[0, -1]] = swapped[[-1, 0]]
    with pytest.raises(PeerError, match="top-1"):
        M.check("cls", [swapped], [ref], 10.0, True, top1=True)


def test_mobilenet_v2_has_the_published_shape_and_runs_like_onnxruntime():
    """benchmarks/mobilenet.py: the full-size model has MobileNetV2's 3.5 M parameters (BN
    folded into the convs' biases) and 17 depthwise convs; a narrow, small instance of the
    same builder computes on rvvkit's host path what onnxruntime computes."""
    import onnx
    from mobilenet import mobilenet_v2
    from rvvkit.runtime.host import HostSession
    import rvvkit
    model, feeds = mobilenet_v2()
    onnx.checker.check_model(model)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer if len(t.dims))
    assert 3.45e6 < params < 3.55e6, params
    dw = [n for n in model.graph.node if n.op_type == "Conv"
          and next(a.i for a in n.attribute if a.name == "group") > 1]
    assert len(dw) == 17 and feeds["x"].shape == (1, 3, 224, 224)
    small, small_feeds = mobilenet_v2(width=0.35, size=64, classes=10)
    (want,) = M.ort_outputs(small, small_feeds).values()
    with HostSession(rvvkit.build(small)) as s:
        (got,) = s.run(small_feeds).values()
    assert want.shape == (1, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
