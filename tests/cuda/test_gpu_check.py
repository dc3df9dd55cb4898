"""scripts/gpu_check.sh, the GPU check in one command: without a GPU it stops at once and says
why; with GPU_CHECK_EMULATE=1 its stages run small on the CPU emulator and report as on a GPU."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cuda_support import GPU_OK

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"

pytestmark = pytest.mark.cuda


def run(out: Path, *stages: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(out), *stages], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, **env))


@pytest.mark.skipif(GPU_OK, reason="this machine has a CUDA device")
def test_without_a_gpu_it_stops_at_once_saying_why(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpu_check: nothing to check here: no CUDA device")


def test_an_unknown_stage_is_refused(tmp_path):
    proc = run(tmp_path, "bench", GPU_CHECK_EMULATE="1")
    assert proc.returncode == 2 and "unknown stage 'bench'" in proc.stderr


def test_stages_run_and_report_on_the_emulator(tmp_path):
    proc = run(tmp_path, "bench_gpu", "cuda_objects", GPU_CHECK_EMULATE="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("gpu_check: all stages passed")
    table = (tmp_path / "bench_gpu.md").read_text()
    assert "stored:lstm_kws_legacy" in table and "1 of 1 models ran" in table
    assert "4 of 4 objects held and matched" in (tmp_path / "cuda_objects.txt").read_text()
    assert not (tmp_path / "gpu_tests.txt").exists()   # a stage not asked for does not run
