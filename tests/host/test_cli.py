"""The `rvvkit` command, run as a subprocess the way a user runs it: exit codes, what it prints,
what it writes, and how it fails."""
import json
import os
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

from conftest import make_model, rand, run_ort
from rvvkit.artifact import Artifact

node = helper.make_node
RVVKIT = [sys.executable, "-m", "rvvkit"]


def cli(*args, cwd=None, env=None, timeout=300):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(RVVKIT + [str(a) for a in args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def tiny_model():
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv1"),
             node("Relu", ["c"], ["r"], name="relu1"),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             node("Flatten", ["p"], ["f"], name="flat"),
             node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1, name="fc"),
             node("Softmax", ["logits"], ["probs"], name="softmax")]
    inits = {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2),
             "fw": rand(5, 4 * 3 * 3, seed=3), "fb": rand(5, seed=4)}
    return make_model(nodes, [("x", (1, 3, 7, 7))], ["probs", "logits"], inits, name="tiny")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def model(workdir):
    m = tiny_model()
    path = workdir / "tiny.onnx"
    path.write_bytes(m.SerializeToString())
    return m, path


@pytest.fixture(scope="module")
def artifact(workdir, model):
    out = workdir / "tiny.rvv"
    proc = cli("build", model[1], "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def inputs_npz(workdir):
    path = workdir / "in.npz"
    np.savez(path, x=rand(1, 3, 7, 7, seed=9))
    return path


# ---------------------------------------------------------------------------------------------
# build / inspect

def test_build_writes_artifact(artifact):
    assert artifact.is_file() and artifact.stat().st_size > 0
    art = Artifact.load(artifact)
    assert [o["name"] for o in art.meta["outputs"]] == ["probs", "logits"]


def test_build_default_output_name_and_progress(model, tmp_path):
    proc = cli("build", model[1], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "tiny.rvv").is_file()
    assert "wrote tiny.rvv" in proc.stderr and "arena" in proc.stderr
    quiet = cli("build", model[1], "-q", "-o", tmp_path / "q.rvv")
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_inspect(artifact):
    proc = cli("inspect", artifact)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for word in ("sections:", ".rvvkit.meta", ".rvvkit.c", ".rvvkit.weights", "inputs:",
                 "outputs:", "1x3x7x7", "probs", "logits", "kernels:", "arena", "lower bound"):
        assert word in out, word


def test_inspect_json(artifact):
    proc = cli("inspect", artifact, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["memory"]["arena_bytes"] >= doc["memory"]["lower_bound_bytes"] > 0
    assert [i["name"] for i in doc["inputs"]] == ["x"]
    assert {s["name"] for s in doc["sections"]} >= {".rvvkit.meta", ".rvvkit.c",
                                                    ".rvvkit.weights"}
    assert [s["op"] for s in doc["plan"]][-1] == "Softmax"


def test_inspect_source(artifact):
    proc = cli("inspect", artifact, "--source")
    assert proc.returncode == 0, proc.stderr
    assert "rvvkit_run" in proc.stdout and "#include" in proc.stdout


def test_inspect_cuda_source(artifact):
    proc = cli("inspect", artifact, "--cuda-source")
    assert proc.returncode == 0, proc.stderr
    assert "__global__" in proc.stdout and "rvvkit_cuda_alloc" in proc.stdout
    doc = json.loads(cli("inspect", artifact, "--json").stdout)
    assert ".rvvkit.cu" in {s["name"] for s in doc["sections"]}
    assert doc["cuda"] == {"available": True}


# ---------------------------------------------------------------------------------------------
# run

def test_run_writes_outputs_matching_onnxruntime(artifact, model, inputs_npz, tmp_path):
    out = tmp_path / "out.npz"
    proc = cli("run", artifact, "--inputs", inputs_npz, "--output", out)
    assert proc.returncode == 0, proc.stderr
    with np.load(out) as got:
        assert sorted(got.files) == ["logits", "probs"]
        ref = run_ort(model[0], {"x": rand(1, 3, 7, 7, seed=9)})
        for name in ("probs", "logits"):
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-3, atol=1e-4)
    assert not [p for p in tmp_path.iterdir() if "tmp" in p.name]  # no temp leftovers


def test_run_with_random_inputs_prints_summary(artifact):
    proc = cli("run", artifact, "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    assert "probs" in proc.stdout and "argmax" in proc.stdout
    assert "random" in proc.stderr


def test_run_profile_prints_per_step_table(artifact, inputs_npz):
    proc = cli("run", artifact, "--inputs", inputs_npz, "--profile", "--repeat", "3")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "per-step time" in out
    header = next(line for line in out.splitlines() if line.split()[:4] == ["step", "op",
                                                                              "node", "kernel"])
    assert "ms" in header and "share" in header
    steps = Artifact.load(artifact).meta["plan"]
    for s in steps:
        assert s["op"] in out and s["kernel"] in out


def test_run_no_cache(artifact, inputs_npz):
    proc = cli("run", artifact, "--inputs", inputs_npz, "--no-cache")
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------------------------
# errors

def test_corrupt_weights_named(artifact, tmp_path):
    art = Artifact.load(artifact)
    sec = next(s for s in art.sections() if s["name"] == ".rvvkit.weights")
    data = bytearray(artifact.read_bytes())
    data[sec["offset"] + sec["size"] // 2] ^= 0x5A
    bad = tmp_path / "bad.rvv"
    bad.write_bytes(bytes(data))
    proc = cli("run", bad, "--output", tmp_path / "o.npz")
    assert proc.returncode == 1
    assert ".rvvkit.weights" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o.npz").exists()
    proc = cli("inspect", bad)
    assert proc.returncode == 1 and ".rvvkit.weights" in proc.stderr


def test_not_an_artifact(tmp_path):
    junk = tmp_path / "junk.rvv"
    junk.write_bytes(b"hello world" * 10)
    proc = cli("inspect", junk)
    assert proc.returncode == 1 and "not an rvvkit artifact" in proc.stderr


def test_wrong_input_shape_leaves_no_output(artifact, tmp_path):
    bad_in = tmp_path / "bad_in.npz"
    np.savez(bad_in, x=rand(1, 3, 8, 7))
    out = tmp_path / "never.npz"
    proc = cli("run", artifact, "--inputs", bad_in, "--output", out)
    assert proc.returncode == 1
    assert "'x'" in proc.stderr and "[1, 3, 8, 7]" in proc.stderr and "[1, 3, 7, 7]" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
    assert not list(tmp_path.glob("never*"))


def test_wrong_input_name(artifact, tmp_path):
    bad_in = tmp_path / "named.npz"
    np.savez(bad_in, data=rand(1, 3, 7, 7))
    proc = cli("run", artifact, "--inputs", bad_in)
    assert proc.returncode == 1 and "missing ['x']" in proc.stderr and "data" in proc.stderr


def test_unreadable_inputs_file(artifact, tmp_path):
    bad_in = tmp_path / "garbage.npz"
    bad_in.write_bytes(b"not a zip")
    proc = cli("run", artifact, "--inputs", bad_in)
    assert proc.returncode == 1 and "garbage.npz" in proc.stderr


def test_unsupported_operator_model(tmp_path):
    """Every unsupported node is named in one error (ops rvvkit does not support yet: AffineGrid
    and Col2Im, on independent branches)."""
    nodes = [node("Relu", ["x"], ["a"], name="ok"),
             node("AffineGrid", ["theta", "size"], ["g"], name="the_grid_node"),
             node("Col2Im", ["a", "shape", "block"], ["y"], name="the_col2im_node")]
    path = tmp_path / "bad.onnx"
    model = make_model(nodes, [("x", (1, 4, 4)), ("theta", (1, 2, 3))], ["g", "y"],
                       {"shape": np.array([2, 2], np.int64), "block": np.array([1, 1], np.int64),
                        "size": np.array([1, 1, 2, 2], np.int64)}, opset=20)
    path.write_bytes(model.SerializeToString())
    proc = cli("build", path, "-o", tmp_path / "bad.rvv")
    assert proc.returncode == 1
    for name in ("AffineGrid", "the_grid_node", "Col2Im", "the_col2im_node"):
        assert name in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "bad.rvv").exists()


# Output names as users meet them: PyTorch's legacy and dynamo exporters, the ONNX zoo, names
# np.savez would take as its own keywords, and names unsafe as archive paths.
SAFE_NAMES = ["/layer1/conv/Conv_output_0", "linear_1", "gpu_0/softmax_1", "allow_pickle",
              "file", "a%2Fb"]
UNSAFE_NAMES = {"../../x": "%2E%2E/%2E%2E/x", "evil\x1b[31m": "evil%1B[31m",
                "win\\dir": "win%5Cdir"}


def test_outputs_keep_their_names_in_the_npz(tmp_path):
    """`np.load(out)[name]` works for every safe graph output name; an unsafe one is stored
    under its escape, with one stderr line naming both, and rvvkit reads it back as named."""
    names = SAFE_NAMES + list(UNSAFE_NAMES)
    ops = ["Relu", "Neg", "Abs", "Sigmoid", "Exp", "Tanh", "Floor", "Ceil", "Identity"]
    nodes = [node(op, ["/input/x"], [n]) for op, n in zip(ops, names)]
    model = make_model(nodes, [("/input/x", (2, 3))], names)
    path = tmp_path / "names.onnx"
    path.write_bytes(model.SerializeToString())
    assert cli("build", path, "-o", tmp_path / "names.rvv").returncode == 0
    x = rand(2, 3, seed=3)
    np.savez(tmp_path / "in.npz", **{"/input/x": x})
    proc = cli("run", tmp_path / "names.rvv", "--inputs", tmp_path / "in.npz", "--output",
               tmp_path / "out.npz")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr and "evil\\x1b[31m" in proc.stderr
    ref = run_ort(model, {"/input/x": x})
    with np.load(tmp_path / "out.npz") as plain:
        assert sorted(plain.files) == sorted(SAFE_NAMES + list(UNSAFE_NAMES.values()))
        for k in SAFE_NAMES:
            np.testing.assert_allclose(plain[k], ref[k], rtol=1e-6, atol=1e-7)
    for name, key in UNSAFE_NAMES.items():
        said = [ln for ln in proc.stderr.splitlines() if repr(key) in ln]
        assert len(said) == 1 and "unsafe" in said[0], proc.stderr
    from rvvkit.cli.npz import load_npz
    assert list(load_npz(str(tmp_path / "out.npz"))) == names
    assert not (tmp_path.parent / "x.npy").exists()
    proc = cli("run", tmp_path / "names.rvv", "--inputs", tmp_path / "in.npz")
    assert proc.returncode == 0 and "\x1b" not in proc.stdout


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04garbage", b"\x93NUMPY\x01\x00"])
def test_bad_inputs_file_is_one_line(artifact, tmp_path, content):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    proc = cli("run", artifact, "--inputs", bad)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("rvvkit: error:")]
    assert len(errors) == 1 and "bad.npz" in errors[0] and errors[0] == proc.stderr.splitlines()[-1]


def test_missing_model_file(tmp_path):
    proc = cli("build", tmp_path / "absent.onnx")
    assert proc.returncode == 1 and "absent.onnx" in proc.stderr and "not found" in proc.stderr


def test_build_for_one_vlen(model, inputs_npz, tmp_path):
    """--vlen keeps one RVV micro-kernel variant: a smaller source, recorded in the meta, and
    (on this host, the portable path) the same outputs."""
    fitted, generic = tmp_path / "v256.rvv", tmp_path / "any.rvv"
    assert cli("build", model[1], "--vlen", "256", "-q", "-o", fitted).returncode == 0
    assert cli("build", model[1], "-q", "-o", generic).returncode == 0
    a, b = Artifact.load(fitted), Artifact.load(generic)
    assert a.meta["target_vlen"] == 256 and b.meta["target_vlen"] is None
    assert len(a.c_source.splitlines()) < len(b.c_source.splitlines())
    outs = []
    for art in (fitted, generic):
        out = tmp_path / (art.stem + ".npz")
        assert cli("run", art, "--inputs", inputs_npz, "--output", out).returncode == 0
        with np.load(out) as data:
            outs.append({k: data[k] for k in data.files})
    for name in outs[0]:
        np.testing.assert_array_equal(outs[0][name], outs[1][name])


def test_bad_input_shape_option(model, tmp_path):
    proc = cli("build", model[1], "--input-shape", "x:1,3", "-o", tmp_path / "a.rvv")
    assert proc.returncode == 2 and "--input-shape" in proc.stderr
    assert "NAME=D0,D1" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "{art}", "--on", "gpu"], "unknown executor 'gpu'"),
    (["run", "{art}", "--vlen", "256"], "--vlen applies to --on qemu"),
    (["run", "{art}", "--on", "qemu", "--vlen", "300"], "VLEN 300"),
    (["run", "{art}", "--profile", "--repeat", "0"], "expected an integer >= 1"),
    (["bench", "{art}", "--on", "host,gpu"], "unknown executor 'gpu'"),
    (["bench", "{art}", "--vlen", "128"], "--vlen applies to qemu"),
    (["bench", "{art}", "--on", "qemu", "--vlen", "wide"], "VLEN 'wide'"),
    (["bench", "{art}", "--repeat", "0"], "expected an integer >= 1"),
    (["bench", "{art}", "--warmup", "-1"], "expected an integer >= 0"),
    (["compare", "{art}", "--input-shape", "x"], "--input-shape"),
    (["doctor", "--on", "host"], "takes a board"),
    (["build", "{model}", "--vlen", "100"], "VLEN 100"),
])
def test_misused_options_exit_two_in_every_command(artifact, model, args, message):
    """Bad usage is exit status 2 whichever command it is, with the reason and no traceback."""
    proc = cli(*[a.format(art=artifact, model=model[1]) for a in args])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "usage:" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["run", "{art}", "--profile", "--repeat", "1"],
                                  ["inspect", "{art}", "--source"], ["--help"]])
def test_closed_pipe_exits_141_quietly(artifact, args):
    """`rvvkit ... | head`: the reader goes away before (or while) the command writes; the
    command ends as one killed by SIGPIPE does (141), with no traceback and no 'Exception
    ignored' from the exit flush. (A reader gone while a run is under way: test_signals.py.)"""
    for _ in range(3):
        proc = subprocess.Popen(RVVKIT + [a.format(art=artifact) for a in args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()  # the reader is gone from the start: every write hits EPIPE
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=300) == 141, err
        assert "Traceback" not in err and "Exception ignored" not in err
        assert "BrokenPipe" not in err


def test_help_version_and_usage_errors():
    assert cli("--help").returncode == 0
    for sub in ("build", "inspect", "run"):
        proc = cli(sub, "--help")
        assert proc.returncode == 0 and "usage:" in proc.stdout
    version = cli("--version")
    assert version.returncode == 0 and "rvvkit" in version.stdout
    unknown = cli("frobnicate")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
    assert cli().returncode == 2
    assert cli("run").returncode == 2  # missing artifact argument


@pytest.mark.skipif(shutil.which("rvvkit") is None, reason="console script not installed")
def test_console_script(artifact):
    proc = subprocess.run(["rvvkit", "inspect", str(artifact), "--json"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and json.loads(proc.stdout)["model"] == "tiny"


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs cc to answer the compiler probe")
def test_compile_error_reports_command_and_stderr(artifact, inputs_npz, tmp_path):
    """A compiler that identifies itself but rejects the source: exit 1, and the message has
    the command that was run and what the compiler said."""
    fake = tmp_path / "broken-cc"
    fake.write_text('#!/bin/sh\n'
                    'case "$1" in --version|-dumpmachine) exec cc "$1";; esac\n'
                    'echo "broken-cc: simulated internal error in $*" >&2\n'
                    'exit 3\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "o.npz"
    proc = cli("run", artifact, "--inputs", inputs_npz, "--output", out,
               env={"RVVKIT_COMPILER": str(fake)})
    assert proc.returncode == 1
    err = proc.stderr
    assert "compilation failed" in err and "exit code 3" in err
    assert str(fake) in err and "model.c" in err  # the command
    assert "broken-cc: simulated internal error" in err  # the compiler's stderr
    assert "Traceback" not in err
    assert not out.exists()


def test_unusable_compiler(artifact):
    proc = cli("run", artifact, env={"RVVKIT_COMPILER": "/nonexistent/cc"})
    assert proc.returncode == 1 and "/nonexistent/cc" in proc.stderr


def test_ops_lists_the_operator_table():
    from rvvkit.ops.catalog import catalog
    r = cli("ops", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert rows == catalog() and len(rows) > 30
    by_op = {row["op"]: row for row in rows}
    assert by_op["Conv"]["runs"] == "kernel" and "float32" in by_op["Conv"]["dtypes"]
    assert by_op["Shape"]["runs"] == "folded at build time"
    assert not any(op.startswith("rvvkit.") for op in by_op)
    r = cli("ops", "relu")
    assert r.returncode == 0 and "Relu" in r.stdout and "Conv" not in r.stdout
    r = cli("ops", "--markdown")
    assert r.stdout.startswith("| operator |") and "| Conv | kernel |" in r.stdout


def test_run_with_integer_inputs(tmp_path):
    """int64 and bool inputs from an .npz reach the kernels and come back exact."""
    from onnx import TensorProto
    x = helper.make_tensor_value_info("ids", TensorProto.INT64, (2, 3))
    m = helper.make_tensor_value_info("mask", TensorProto.BOOL, (2, 3))
    y = helper.make_tensor_value_info("y", TensorProto.INT64, (2, 3))
    z = helper.make_tensor_value_info("z", TensorProto.BOOL, (2, 3))
    model = make_model([helper.make_node("Identity", ["ids"], ["y"]),
                        helper.make_node("Identity", ["mask"], ["z"])], [x, m], [y, z])
    path = tmp_path / "ids.onnx"
    path.write_bytes(model.SerializeToString())
    assert cli("build", path, "-o", tmp_path / "ids.rvv").returncode == 0
    ids = np.arange(6, dtype=np.int64).reshape(2, 3) - 2 ** 40
    mask = np.array([[1, 0, 1], [0, 0, 1]], bool)
    np.savez(tmp_path / "in.npz", ids=ids, mask=mask)
    r = cli("run", tmp_path / "ids.rvv", "--inputs", tmp_path / "in.npz",
            "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as out:
        assert out["y"].dtype == np.int64 and np.array_equal(out["y"], ids)
        assert out["z"].dtype == bool and np.array_equal(out["z"], mask)
