"""The nine light architectures (rvvkit.zoo) on the CUDA path: every model's CUDA source is
compiled by nvcc with warnings as errors, and run and compared with onnxruntime exactly as the
host light-model test does: on the GPU where there is one, and for the smaller models under
the CPU emulator everywhere (the emulator runs a few hundred MMAC/s: SqueezeNet takes ~6 s)."""
from __future__ import annotations

import os
import sys

import pytest

from cuda_support import GPU_OK, GPU_WHY, NVCC_OK, nvcc_compiles_artifact
from executors import ci_share
from rvvkit.zoo import LIGHT_MODELS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "host"))
from test_light_models import check_light_model  # noqa: E402

EMULATED = ("squeezenet", "shufflenet")    # small enough for the CPU emulator in CI

pytestmark = [pytest.mark.slow, pytest.mark.cuda]


# Without a GPU these are strict nvcc compiles alone: CI's matrix compiles half of the models
# (a stable hash), scripts/nightly.sh all of them (tests/executors.py ci_share).
COMPILED = [m for m in LIGHT_MODELS if m not in EMULATED and (GPU_OK or ci_share(m, 2))]


@pytest.mark.parametrize("name", COMPILED)
def test_light_model_cuda_source_compiles(name, tmp_path):
    if GPU_OK:
        check_light_model(name, tmp_path, "cuda", nvcc_compiles_artifact)
        return
    if not NVCC_OK:
        pytest.skip("nvcc not found")
    import rvvkit
    from rvvkit.zoo import light_model
    nvcc_compiles_artifact(rvvkit.build(light_model(name, 0)))


@pytest.mark.parametrize("name", EMULATED)
def test_light_model_emulated_cuda_matches_onnxruntime(name, tmp_path):
    check_light_model(name, tmp_path, "cuda-emu", nvcc_compiles_artifact)


@pytest.mark.skipif(not GPU_OK, reason=GPU_WHY)
@pytest.mark.parametrize("name", EMULATED)
def test_light_model_gpu_matches_onnxruntime(name, tmp_path):
    check_light_model(name, tmp_path, "cuda", nvcc_compiles_artifact)
