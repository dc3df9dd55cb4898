"""`rvvkit compare`: the API (rows, reference, skipped and failed paths) and the command as a
user runs it (table, --json, --plot, exit codes), plus `rvvkit run --on cuda / cuda-emu`.

On machines without a GPU the cuda path must be a skipped row whose reason says so; where a GPU
is present it must match instead."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand
from rvvkit.measure.compare import compare, parse_paths
from rvvkit.errors import CompileError, ExecutionError, InputError
from rvvkit.runtime.cuda import cuda_available

node = helper.make_node
RVVKIT = [sys.executable, "-m", "rvvkit"]
HAS_GPU, NO_GPU_WHY = cuda_available()


def cli(*args, cwd=None, timeout=300):
    return subprocess.run(RVVKIT + [str(a) for a in args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def classifier(seed: int = 1):
    """conv → relu → pool → gemm → softmax; outputs probs and logits, both (1, 5)."""
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]),
             node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
             node("Softmax", ["logits"], ["probs"])]
    inits = {"w": rand(4, 3, 3, 3, seed=seed), "b": rand(4, seed=seed + 1),
             "fw": rand(5, 36, seed=seed + 2, scale=0.2), "fb": rand(5, seed=seed + 3)}
    return make_model(nodes, [("x", (1, 3, 7, 7))], ["probs", "logits"], inits, name="cls")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    (d / "cls.onnx").write_bytes(classifier().SerializeToString())
    (d / "other.onnx").write_bytes(classifier(seed=20).SerializeToString())
    rvvkit.build(classifier()).save(d / "cls.rvv")
    return d


def _row(result, path):
    rows = result["rows"] if isinstance(result, dict) else result.rows
    return next(r for r in rows if r["path"] == path)


def _check_cuda_row(row):
    if HAS_GPU:
        assert row["status"] == "ok", row
    else:
        assert row["status"] == "skipped", row
        assert "CUDA" in row["reason"] and "\n" not in row["reason"]


# ---------------------------------------------------------------------------------------------
# API

def test_api_host_matches_and_cuda_is_skipped_without_gpu():
    res = compare(classifier(), ["host", "cuda"], repeat=2, warmup=0)
    assert [r["path"] for r in res.rows] == ["host", "cuda"]
    assert res.reference.kind == "onnxruntime"
    host = _row(res, "host")
    assert host["status"] == "ok" and host["reason"] is None
    assert 0 <= host["max_abs_err"] < 1e-4 and 0 <= host["max_rel_err"] < 1e-3
    assert host["argmax"] == {"matched": 2, "rows": 2}  # probs and logits, one row each
    assert host["latency_ms"] > 0 and host["vs_reference"] > 0
    assert [o["name"] for o in host["outputs"]] == ["probs", "logits"]
    _check_cuda_row(_row(res, "cuda"))
    assert res.passed  # a skipped path alone does not fail the comparison


def test_reference_falls_back_to_onnx_evaluator(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails
    res = compare(classifier(), "host", repeat=1, warmup=0)
    assert res.reference.kind == "onnx"
    assert "ReferenceEvaluator" in res.reference.name
    assert "onnxruntime is not installed" in res.reference.note
    assert _row(res, "host")["status"] == "ok"
    assert "vs_reference" not in _row(res, "host")  # a pure-Python evaluator is no peer
    with pytest.raises(InputError, match="not installed"):
        compare(classifier(), "host", reference="onnxruntime")


def test_onnx_evaluator_reference_runs_an_opset_13_qdq_model():
    """onnxruntime's quantizer writes opset 13, where the reference evaluator has no
    DequantizeLinear: the reference is retried on the model converted to a newer opset."""
    x_scale, w_scale = np.float32(0.05), np.float32(0.02)
    w = np.round(rand(3, 4, seed=5) * 40).clip(-127, 127).astype(np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["y"])]
    inits = {"xs": np.array(x_scale), "xz": np.array(0, np.int8), "w": w,
             "ws": np.array(w_scale), "wz": np.array(0, np.int8)}
    model = make_model(nodes, [("x", (2, 3))], ["y"], inits, opset=13)
    res = compare(model, "host", reference="onnx", repeat=1, warmup=0)
    assert res.reference.kind == "onnx"
    assert _row(res, "host")["status"] == "ok" and res.passed


def test_artifact_without_model_uses_host_reference(files):
    res = compare(files / "cls.rvv", "host", repeat=1, warmup=0)
    assert res.reference.kind == "host" and "--model" in res.reference.note
    assert _row(res, "host")["max_abs_err"] == 0
    with_model = compare(files / "cls.rvv", "host", model=files / "cls.onnx", repeat=1)
    assert with_model.reference.kind == "onnxruntime"


def test_failed_paths_are_rows_not_exceptions(monkeypatch):
    import rvvkit.runtime as runtime
    real = runtime.open_session

    def fake(art, on="host", **kw):
        if on == "qemu":
            raise CompileError(["clang-16", "model.c"], 1, "model.c:7:1: error: bad thing\n")
        sess = real(art, on=on, **kw)
        if on == "cuda-emu":
            def crash(feeds):
                raise ExecutionError("kernel crashed")
            sess.run = crash
        return sess
    monkeypatch.setattr(runtime, "open_session", fake)
    said = []
    res = compare(classifier(), "host,qemu,cuda-emu", repeat=1, warmup=0, progress=said.append)
    qemu = _row(res, "qemu vlen=256")
    assert qemu["status"] == "failed" and "error: bad thing" in qemu["reason"]
    assert "command: clang-16 model.c" in qemu["detail"]
    emu = _row(res, "cuda-emu")
    assert emu["status"] == "failed" and emu["reason"] == "kernel crashed"
    assert _row(res, "host")["status"] == "ok"  # the paths after a failure still ran
    assert not res.passed
    assert "cuda-emu: failed (kernel crashed)" in said


def test_missing_qemu_is_skipped(monkeypatch):
    monkeypatch.setenv("RVVKIT_QEMU", "/nonexistent/qemu-riscv64")
    res = compare(classifier(), "host,qemu", vlens=[128], repeat=1, warmup=0)
    qemu = _row(res, "qemu vlen=128")
    assert qemu["status"] == "skipped" and "QEMU not found" in qemu["reason"]
    assert res.passed


def test_mismatch_names_the_output(files):
    res = compare(files / "cls.rvv", "host", model=files / "other.onnx", repeat=1)
    host = _row(res, "host")
    assert host["status"] == "mismatch"
    assert "logits: max abs error" in host["reason"] and "tolerance" in host["reason"]
    assert not res.passed


def test_host_session_contract(files):
    """measure() and describe(), which compare and bench use instead of asking which
    executor a session is."""
    with rvvkit.load(files / "cls.rvv", on="host") as sess:
        desc = sess.describe()
        assert desc["executor"] == desc["path"] == desc["label"] == "host"
        assert desc["vlen"] is None and not desc["emulated"] and desc["compiler"]
        lat = sess.measure({"x": rand(1, 3, 7, 7)}, repeat=3, warmup=1)
    assert lat["latency_stat"] == "median" and lat["runs"] == 3
    assert 0 < lat["min_ms"] <= lat["latency_ms"] <= lat["max_ms"]


def test_parse_paths_and_bad_inputs():
    assert [t.label for t in parse_paths("host,qemu,host", [128, 512])] == \
        ["host", "qemu vlen=128", "qemu vlen=512"]
    with pytest.raises(InputError, match="unknown path 'gpu'"):
        parse_paths(["host", "gpu"])
    with pytest.raises(InputError, match="missing"):
        compare(classifier(), "host", inputs={"y": rand(1, 3, 7, 7)})


# ---------------------------------------------------------------------------------------------
# The command

def test_cli_table_progress_and_exit_zero(files):
    proc = cli("compare", files / "cls.onnx", "--on", "host,cuda", "--repeat", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for head in ("path", "status", "max abs err", "max rel err", "argmax", "latency ms",
                 "vs reference", "dyn. instructions"):
        assert head in out
    assert "onnxruntime" in out and "\nhost " in out and "2/2" in out
    assert "rvvkit: host: ok" in proc.stderr
    if not HAS_GPU:
        assert "cuda: skipped: no CUDA device" in out
        assert "not a failure" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_json(files):
    proc = cli("compare", files / "cls.onnx", "--on", "host,cuda", "--repeat", "2", "--json")
    assert proc.returncode == 0, proc.stderr

    def strict(const):
        raise AssertionError(f"not JSON: {const}")
    doc = json.loads(proc.stdout, parse_constant=strict)
    assert doc["model"] == "cls" and doc["macs"] > 0 and doc["passed"] is True
    assert doc["reference"]["kind"] == "onnxruntime" and doc["reference"]["latency_ms"] > 0
    assert doc["tolerance"] == {"rtol": 1e-3, "atol": 1e-4, "rule": doc["tolerance"]["rule"]}
    host = _row(doc, "host")
    for key in ("status", "max_abs_err", "max_rel_err", "argmax", "latency_ms",
                "latency_stat", "vs_reference", "outputs"):
        assert key in host, key
    _check_cuda_row(_row(doc, "cuda"))


def test_cli_plot_writes_png(files, tmp_path):
    png = tmp_path / "compare.png"
    proc = cli("compare", files / "cls.onnx", "--on", "host,cuda,cuda-emu", "--repeat", "1",
               "--plot", png)
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert os.listdir(tmp_path) == ["compare.png"]  # no temp file left behind
    assert f"wrote {png}" in proc.stderr


def test_plot_without_matplotlib_is_a_clear_error(monkeypatch, tmp_path):
    from rvvkit.measure.plot import plot_comparison
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(rvvkit.RvvkitError, match="pip install matplotlib"):
        plot_comparison({}, str(tmp_path / "x.png"))


def test_cli_mismatch_exits_one(files):
    proc = cli("compare", files / "cls.rvv", "--model", files / "other.onnx", "--repeat", "1")
    assert proc.returncode == 1, proc.stderr
    assert "host: mismatch: " in proc.stdout and "FAILED: host mismatch" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--on", "host,gpu"], "unknown path 'gpu'"),
    (["--on", "host", "--vlen", "256"], "--vlen applies to qemu"),
    (["--on", "qemu", "--vlen", "100"], "VLEN 100"),
    (["--repeat", "0"], "expected an integer >= 1"),
])
def test_cli_usage_errors_exit_two(files, args, message):
    proc = cli("compare", files / "cls.onnx", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_cli_help_documents_metrics_and_exit_codes():
    proc = cli("compare", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "max(|ref|, 1e-6 * max|ref|)" in text
    assert "atol + rtol * max|ref|" in text
    assert "do not fail the command" in text and "2 for bad usage" in text


# ---------------------------------------------------------------------------------------------
# rvvkit run --on cuda / cuda-emu

def test_cli_run_on_cuda_emu_matches_host(files, tmp_path):
    np.savez(tmp_path / "in.npz", x=rand(1, 3, 7, 7, seed=5))
    outs = {}
    for on in ("host", "cuda-emu"):
        proc = cli("run", files / "cls.rvv", "--on", on, "--inputs", tmp_path / "in.npz",
                   "--output", tmp_path / f"{on}.npz")
        assert proc.returncode == 0, proc.stderr
        with np.load(tmp_path / f"{on}.npz") as data:
            outs[on] = {k: data[k] for k in data.files}
    assert "cuda-emu (" in proc.stderr  # the progress line names the device
    np.testing.assert_allclose(outs["cuda-emu"]["logits"], outs["host"]["logits"], rtol=1e-4,
                               atol=1e-5)


def test_cli_run_on_cuda(files):
    proc = cli("run", files / "cls.rvv", "--on", "cuda")
    if HAS_GPU:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == 1
        assert "no CUDA device" in proc.stderr and "Traceback" not in proc.stderr
