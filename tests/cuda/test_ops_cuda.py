"""Every operator test of tests/host/test_ops.py again on the CUDA path: the artifact's CUDA
source is compiled by nvcc with warnings as errors (what a GPU machine would load), and run
under the CPU emulator (rvk_cuda_emu.h) so its numerics are compared with onnxruntime exactly
as on the host, on machines without a GPU too. Where a GPU is present, the cases run on it as
well."""
import os
import sys

import pytest

import conftest
import rvvkit
from cuda_support import GPU_OK, nvcc_compiles_artifact

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "host"))
from test_ops import *  # noqa: E402,F401,F403  (collects every operator test here too)

CUDA_EXECUTORS = [("cuda-emu", {})] + ([("cuda", {})] if GPU_OK else [])

pytestmark = [pytest.mark.cuda]


@pytest.fixture(autouse=True)
def _run_on_cuda(monkeypatch):
    monkeypatch.setattr(conftest, "EXECUTORS", CUDA_EXECUTORS)
    assert assert_matches.__globals__ is vars(conftest)  # noqa: F405
    build = rvvkit.build

    def build_and_nvcc(model, **kwargs):
        art = build(model, **kwargs)
        nvcc_compiles_artifact(art)
        return art
    monkeypatch.setattr(rvvkit, "build", build_and_nvcc)
