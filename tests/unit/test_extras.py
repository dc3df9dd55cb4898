"""The runtime installs without the `build` (onnx) and `ssh` (paramiko) extras: `import rvvkit`,
loading and running an artifact on this host, `rvvkit run` and `rvvkit inspect` work with both
made unimportable, and `rvvkit build` / `--on ssh://` say in one line which extra to install.
Each case runs in a subprocess whose meta path refuses onnx and paramiko (as if absent)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand, run_ort

REPO = Path(__file__).resolve().parents[2]
# Put before the code under test: a finder that makes onnx and paramiko (and their submodules)
# unimportable, exactly as when the wheel is installed without its extras.
PRELUDE = """
import sys
class _Absent:
    BLOCKED = ("onnx", "paramiko")
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
"""


def _python(code: str, tmp: Path) -> subprocess.CompletedProcess:
    # No SSH config or boards file of the user's: nothing else can make an ssh:// run differ.
    env = {"RVVKIT_SSH_CONFIG": str(tmp / "absent_ssh_config"),
           "RVVKIT_BOARDS": str(tmp / "absent_boards.toml"), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", PRELUDE + code], cwd=tmp, capture_output=True,
                          text=True, timeout=240, env={**os.environ, **env})


def _cli(args, tmp: Path) -> subprocess.CompletedProcess:
    return _python(f"from rvvkit.cli import main\nsys.exit(main({list(map(str, args))!r}))", tmp)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("extras")
    node = helper.make_node
    model = make_model([node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                        node("Relu", ["c"], ["r"]), node("GlobalAveragePool", ["r"], ["y"])],
                       [("x", (1, 3, 8, 8))], ["y"],
                       {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2)}, name="extras")
    feeds = {"x": rand(1, 3, 8, 8, seed=3)}
    rvvkit.build(model).save(str(tmp / "m.rvv"))
    (tmp / "m.onnx").write_bytes(model.SerializeToString())
    np.savez(tmp / "in.npz", **feeds)
    np.savez(tmp / "ref.npz", **run_ort(model, feeds))
    return tmp


def test_import_load_and_run_without_onnx_or_paramiko(model_files):
    res = _python("""
import json, numpy as np, rvvkit
with rvvkit.load("m.rvv", on="host") as sess:
    out = sess.run(dict(np.load("in.npz")))
np.savez("got.npz", **out)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("onnx", "paramiko"))))
""", model_files)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[-1]) == []
    got, ref = np.load(model_files / "got.npz"), np.load(model_files / "ref.npz")
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-3, atol=1e-4)


def test_cli_run_and_inspect_without_onnx_or_paramiko(model_files):
    res = _cli(["run", "m.rvv", "--inputs", "in.npz", "--output", "cli.npz"], model_files)
    assert res.returncode == 0, res.stderr
    got, ref = np.load(model_files / "cli.npz"), np.load(model_files / "ref.npz")
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-3, atol=1e-4)
    res = _cli(["inspect", "m.rvv", "--json"], model_files)
    assert res.returncode == 0, res.stderr
    assert "extras" in res.stdout


def _one_error_line(res: subprocess.CompletedProcess) -> str:
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def test_build_without_onnx_names_the_build_extra(model_files):
    line = _one_error_line(_cli(["build", "m.onnx", "-o", "x.rvv"], model_files))
    assert "onnx" in line and "pip install 'rvvkit[build]'" in line
    assert not (model_files / "x.rvv").exists()
    res = _python("""
import rvvkit
try:
    rvvkit.build("m.onnx")
except rvvkit.RvvkitError as exc:
    print(exc)
""", model_files)
    assert "rvvkit[build]" in res.stdout, res.stderr


def test_ssh_without_paramiko_names_the_ssh_extra(model_files):
    line = _one_error_line(_cli(["run", "m.rvv", "--inputs", "in.npz", "--output", "o.npz",
                                 "--on", "ssh://some-board"], model_files))
    assert "paramiko" in line and "pip install 'rvvkit[ssh]'" in line
    line = _one_error_line(_cli(["doctor", "--on", "ssh://some-board"], model_files))
    assert "rvvkit[ssh]" in line
