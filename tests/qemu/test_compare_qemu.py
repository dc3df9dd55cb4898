"""`rvvkit compare --on host,qemu`: the RVV build under QEMU matches onnxruntime at each VLEN,
and its rows carry the instruction count of one inference."""
import json
import subprocess
import sys

import pytest

from qemu_support import RV_COMPILER, needs_qemu, small_model
from rvvkit.measure.compare import compare

pytestmark = [pytest.mark.qemu, needs_qemu]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("compare_qemu") / "small.onnx"
    path.write_bytes(small_model().SerializeToString())
    return path


def test_compare_host_and_qemu_with_instruction_counts(model_path):
    res = compare(model_path, "host,qemu", vlens=[128, 256], repeat=2, warmup=1,
                  options={"qemu": {"compiler": RV_COMPILER}})
    assert [r["path"] for r in res.rows] == ["host", "qemu vlen=128", "qemu vlen=256"]
    assert res.passed, [(r["path"], r["reason"]) for r in res.rows]
    for row in res.rows[1:]:
        assert row["status"] == "ok" and row["vlen"] in (128, 256)
        assert row["argmax"] == {"matched": 3, "rows": 3}  # probs, logits, gap (N, C, 1, 1)
        assert row["max_abs_err"] < 1e-3
        assert row["dynamic_instructions"] > 0 and row["latency_ms"] > 0
        assert row["latency_stat"] == "mean"  # the runner's clock under QEMU
    assert "dynamic_instructions" not in res.rows[0]


def test_cli_compare_qemu_json_and_table(model_path):
    base = [sys.executable, "-m", "rvvkit", "compare", str(model_path), "--on", "host,qemu",
            "--vlen", "256", "--repeat", "1", "--compiler", f"qemu={RV_COMPILER}"]
    proc = subprocess.run(base + ["--json"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert rows[1]["path"] == "qemu vlen=256" and rows[1]["dynamic_instructions"] > 0
    assert "qemu vlen=256: running (1 timed runs, counting instructions)" in proc.stderr
    table = subprocess.run(base + ["--no-count"], capture_output=True, text=True, timeout=600)
    assert table.returncode == 0, table.stderr
    line = next(ln for ln in table.stdout.splitlines() if ln.startswith("qemu vlen=256"))
    assert " ok " in line and "(mean)" in line
    assert "emulation speed" in table.stdout
