"""`rvvkit doctor`'s CUDA section says what `--on cuda` and `--on cuda-emu` would use here."""
import os
import re
import subprocess
import sys

from cuda_support import GPU_OK, NVCC_OK


def doctor(**env):
    proc = subprocess.run([sys.executable, "-m", "rvvkit", "doctor"], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    section = text[text.index("\nCUDA\n") + 1:].split("\n\n")[0]
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1)
                for line in section.splitlines()[1:])


def test_doctor_reports_nvcc_gpu_and_executors():
    rows = doctor()
    if NVCC_OK:
        assert "release" in rows["nvcc"], rows
    if GPU_OK:
        assert rows["--on cuda"] == "ready", rows
    else:
        assert rows["GPU"].startswith("no CUDA device"), rows
        assert "unavailable: no CUDA device" in rows["--on cuda"], rows
    assert rows["--on cuda-emu"].startswith("ready"), rows


def test_doctor_names_a_missing_nvcc():
    rows = doctor(RVVKIT_NVCC="/nonexistent/nvcc")
    assert rows["nvcc"].startswith("not found") and "RVVKIT_NVCC" in rows["nvcc"], rows
    assert rows["--on cuda"].startswith("unavailable"), rows
