"""The stored model suite: 24 current architectures exported from PyTorch (torchvision, timm,
transformers, RNN keyword spotters, YOLO- and DETR-style detectors) by both ONNX exporters
(TorchScript-based at opset 17, dynamo at opset 20), each with
onnxruntime's outputs on seeded inputs (tests/models/generate.py made them; manifest.json
lists every model's parameters, size, operators and any exporter that failed).

Every stored model is built by rvvkit and run on the host, each output compared with the stored
onnxruntime output: rtol 1e-3, atol max(1e-4, 1e-5 * max|ref|) (float32 rounding of large
logits is on the scale of the largest one), and max|diff| / max|ref| < 1e-3. SAMPLED models
also run on QEMU (VLEN 128 and 512, poisoned tails) and the CUDA emulator (and a GPU where
there is one): tests/executors.py SAMPLE less the host.

A model that rvvkit cannot build yet is listed in KNOWN_UNSUPPORTED with the exact set of
operator types its build error names; its test asserts that error, so the list cannot go stale:
once an operator lands, the test fails until the model moves to the passing set. To recompute
the list (prints a dict to paste over KNOWN_UNSUPPORTED; takes a few minutes):

    python3 tests/models/test_models.py --refresh
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Dict, Set

import numpy as np
import pytest

if __name__ == "__main__":   # run as a script (--refresh): tests/ holds executors.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import assert_npz_keeps_names  # noqa: E402
from executors import HOST  # noqa: E402
from executors import params as executor_params  # noqa: E402
from executors import sample as executor_sample  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = sorted(p.stem for p in HERE.glob("*.onnx"))
MANIFEST = json.loads((HERE / "manifest.json").read_text())

RTOL, ATOL = 1e-3, 1e-4
SCALE_ATOL = 1e-5     # atol = max(ATOL, SCALE_ATOL * max|ref|)
MAX_REL = 1e-3        # max|diff| / max|ref|

# model -> the operator types rvvkit's build error names (recompute: see the docstring).
KNOWN_UNSUPPORTED: Dict[str, Set[str]] = {}

# model -> why: builds but does not match yet (strict xfail: fixing it fails the test).
KNOWN_WRONG: Dict[str, str] = {
}

# One transformer, one detector, one RNN and two convnets (one per exporter) on every executor.
SAMPLED = ("bert_legacy", "yolo_dynamo", "lstm_kws_legacy", "mobilenet_v3_small_dynamo",
           "efficientnet_b0_legacy")

pytestmark = pytest.mark.slow


def stored(name: str):
    """(path of the .onnx, inputs, reference outputs) of a stored model."""
    data = np.load(HERE / f"{name}.npz")
    feeds = {k[3:]: data[k] for k in data.files if k.startswith("in.")}
    ref = {k[4:]: data[k] for k in data.files if k.startswith("out.")}
    return str(HERE / f"{name}.onnx"), feeds, ref


def reported_ops(exc: Exception) -> Set[str]:
    """The operator types a build error names: UnsupportedOperator's list, else the
    "<Op> node '<name>'" prefixes of its lines."""
    ops = {t for t, _ in getattr(exc, "ops", [])}
    ops |= set(re.findall(r"^\s*(\w+) node '", str(exc), re.M))
    return ops or {f"? {str(exc).splitlines()[0]}"}


def compare(ours: Dict[str, np.ndarray], ref: Dict[str, np.ndarray], label: str) -> None:
    assert sorted(ours) == sorted(ref), (label, sorted(ours), sorted(ref))
    for name, want in ref.items():
        got = ours[name]
        where = f"{label}: output {name!r}"
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=where)
            continue
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=max(ATOL, SCALE_ATOL * scale),
                                   err_msg=where)
        if scale > 0:
            rel = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
            assert rel < MAX_REL, f"{where}: max|diff| / max|ref| = {rel:.2e}"


def _xfail_wrong(name: str):
    if name in KNOWN_WRONG:
        return pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_WRONG[name], strict=True))
    return name


def test_suite_is_complete():
    """Every manifest entry with a successful export has its files, and nothing is stale."""
    exported = {f"{m}_{e}" for m, ent in MANIFEST.items()
                for e, rec in ent["exporters"].items() if "error" not in rec}
    assert exported == set(MODELS)
    assert len(MANIFEST) >= 20
    assert set(KNOWN_UNSUPPORTED) <= set(MODELS) and set(KNOWN_WRONG) <= set(MODELS)
    assert all(s in MODELS for s in SAMPLED)


@pytest.mark.parametrize("name", [_xfail_wrong(m) for m in MODELS])
def test_model_on_host(name, tmp_path):
    import rvvkit
    path, feeds, ref = stored(name)
    if name in KNOWN_UNSUPPORTED:
        with pytest.raises(rvvkit.ModelError) as info:
            rvvkit.build(path)
        assert reported_ops(info.value) == KNOWN_UNSUPPORTED[name], str(info.value)
        return
    # the host executor runs 1, 2 and 3 threads and insists on the same bits
    outs = HOST.run(rvvkit.build(path), feeds)
    compare(outs, ref, "host")
    assert_npz_keeps_names(outs, tmp_path)


@pytest.mark.parametrize("target", executor_params([e for e in executor_sample()
                                                      if e.id != "host"]))
@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_model_on_targets(name, target):
    """QEMU (VLEN 128 and 512, poisoned tails) and the CUDA emulator/GPU; the host runs every
    model in test_model_on_host."""
    if name in KNOWN_UNSUPPORTED or name in KNOWN_WRONG:
        pytest.skip(f"{name} does not build/match yet (see test_model_on_host)")
    import rvvkit
    path, feeds, ref = stored(name)
    compare(target.run(rvvkit.build(path), feeds), ref, target.id)


def refresh(names=MODELS) -> Dict[str, Set[str]]:
    """Builds every stored model; the op types of those that fail to build."""
    import rvvkit
    out = {}
    for name in names:
        try:
            rvvkit.build(str(HERE / f"{name}.onnx"), cuda=False)
        except rvvkit.ModelError as exc:
            out[name] = reported_ops(exc)
        print(f"{name}: {sorted(out.get(name, [])) or 'builds'}", file=sys.stderr, flush=True)
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--refresh"]:
        sys.exit(__doc__)
    found = refresh()
    print("KNOWN_UNSUPPORTED: Dict[str, Set[str]] = {")
    for name, ops in found.items():
        print(f"    {name!r}: {{{', '.join(repr(o) for o in sorted(ops))}}},")
    print("}")
