"""An emulated Debian 13 riscv64 board (scripts/debian_board.sh: debootstrap root, qemu-user
with RVV 1.0 at VLEN 256, OpenSSH in a chroot): models over ssh:// compiled by each of the
board's compilers (GCC 14, the default, and GCC 13) match onnxruntime; `rvvkit doctor` sees RVV
there; and rvvkit installed on the board from a wheel, with only Debian's numpy, cffi and
pyelftools, runs an artifact itself (`on="host"` on the board). See debian_board_support.py for
when these skip."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

import rvvkit
from conftest import run_ort
from debian_board_support import ALIAS, REPO
from rvvkit.zoo import light_model, sample_inputs
from ssh_support import assert_close, small_feeds, small_model

pytestmark = [pytest.mark.ssh, pytest.mark.slow]
# (URL query, GCC major version): Debian 13's gcc is GCC 14; gcc-13 is named in the URL.
COMPILERS = [pytest.param("", "14", id="gcc-14"),
             pytest.param("?compiler=gcc-13", "13", id="gcc-13")]


@pytest.fixture
def board(debian_board, monkeypatch):  # noqa: F811
    """The board, with this process's rvvkit pointed at it for one test (other SSH tests of
    the session set the same variables to their own boards)."""
    for key, value in debian_board.env.items():
        monkeypatch.setenv(key, value)
    return debian_board


def _check_compiler(sess, major: str) -> None:
    assert sess.compiler.is_riscv and "-march=rv64gcv" in sess.flags
    assert f" {major}." in sess.compiler.version, sess.compiler.version


@pytest.mark.parametrize("query, major", COMPILERS)
def test_small_model_with_each_board_compiler(board, query, major):
    model, feeds = small_model(), small_feeds()
    with rvvkit.load(rvvkit.build(model), on=f"ssh://{ALIAS}{query}") as sess:
        _check_compiler(sess, major)
        assert_close(sess.run(feeds), run_ort(model, feeds), f"gcc-{major} on {ALIAS}")


def test_squeezenet_with_the_default_compiler(board):
    # One compiler only: a cold run (the board's GCC compiling every kernel under QEMU) takes
    # about a minute; the small model above already covers each compiler.
    model = light_model("squeezenet")
    feeds = sample_inputs(model)
    with rvvkit.load(rvvkit.build(model), on=f"ssh://{ALIAS}") as sess:
        _check_compiler(sess, "14")
        got = sess.run(feeds)
    assert_close(got, run_ort(model, feeds), f"squeezenet, gcc-14 on {ALIAS}")


def test_doctor_on_the_board_reports_rvv(debian_board):  # noqa: F811
    code = f"import sys; from rvvkit.cli import main; sys.exit(main(['doctor', '--on', " \
           f"'ssh://{ALIAS}']))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, env={**os.environ, **debian_board.env})
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "Debian GNU/Linux 13 (trixie)" in out and "riscv64" in out, out
    for compiler in ("gcc-14", "gcc-13"):  # the survey lists the versioned GCCs
        assert f"  {compiler} " in out, out
    # The rows of "RVV with cc" (gcc 14): columns are padded, so match with \s+.
    assert re.search(r"-march=rv64gcv\s+accepted", out), out
    assert re.search(r"__riscv_v_intrinsic\s+12000 \(0\.12 API, as GCC 14\)", out), out
    assert re.search(r"VLEN\s+256 bits", out), out  # measured: QEMU_CPU from sshd's SetEnv


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """rvvkit's wheel, built here from the checkout (--no-deps; the build backend comes from
    the package index, as for any `pip wheel`)."""
    out = tmp_path_factory.mktemp("wheel")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                          "-w", str(out), str(REPO)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    (path,) = out.glob("rvvkit-*.whl")
    return path


ON_BOARD = """
import json, sys, numpy as np, rvvkit
with rvvkit.load("model.rvv", on="host") as sess:
    out = sess.run(dict(np.load("in.npz")))
    info = {"compiler": sess.compiler.version, "flags": sess.flags}
np.savez("out.npz", **out)
info["rvvkit"] = rvvkit.__file__
for name in ("onnx", "paramiko"):  # not on the board: the runtime must not need them
    try:
        __import__(name)
        info[name] = "importable"
    except ImportError:
        info[name] = "absent"
print(json.dumps(info))
"""


def test_rvvkit_from_a_wheel_runs_on_the_board(debian_board, wheel, tmp_path):  # noqa: F811
    model, feeds = small_model(), small_feeds()
    work = f"/tmp/rvvkit-wheel-{tmp_path.name}"  # on the board; removed at the end
    host_work = debian_board.inside(work)
    host_work.mkdir(parents=True)
    try:
        # The board is a directory here: put files in place directly, then act over SSH.
        (host_work / wheel.name).write_bytes(wheel.read_bytes())
        rvvkit.build(model).save(str(host_work / "model.rvv"))
        np.savez(host_work / "in.npz", **feeds)
        (host_work / "run.py").write_text(ON_BOARD)
        venv = f"{work}/venv"
        script = " && ".join([
            f"cd {work}",
            # Debian's numpy, cffi and pyelftools through --system-site-packages; nothing from
            # PyPI. --without-pip, then Debian's pip installs into it: ensurepip under QEMU
            # would add half a minute.
            f"python3 -m venv --without-pip --system-site-packages {venv}",
            f"python3 -m pip --python {venv}/bin/python install -q --no-deps --no-index "
            f"--disable-pip-version-check {shlex.quote(wheel.name)}",
            f"RVVKIT_CACHE_DIR={work}/cache {venv}/bin/python run.py"])
        res = debian_board.ssh(script)
        assert res.returncode == 0, res.stdout + res.stderr
        info = json.loads(res.stdout.splitlines()[-1])
        assert info["rvvkit"].startswith(f"{venv}/lib/"), info
        assert (info["onnx"], info["paramiko"]) == ("absent", "absent"), info
        assert " 14." in info["compiler"] and "-march=rv64gcv" in info["flags"], info
        got = dict(np.load(host_work / "out.npz"))
        assert_close(got, run_ort(model, feeds), "rvvkit on the board, from a wheel")
    finally:
        debian_board.ssh(f"rm -rf {work}", timeout=120)


def test_generation_runs_on_the_board(board):
    # the loop runs in the runner on the board: one SSH command for the whole generation; the
    # prompt's first 19 tokens go through the prefill plan (a chunk of 16, one of 3 padded)
    from ort_decoder import ort_greedy
    from rvvkit.zoo import llm as zoo_llm
    model = zoo_llm.decoder(zoo_llm.DecoderConfig(bits=4, layers=1))
    prompt = [(5 * i + 3) % 256 for i in range(20)]
    want, _ = ort_greedy(model, prompt, 16, 40)
    art = rvvkit.build(model, max_seq=40)
    assert art.meta["prefill"]["tokens"] == 16
    with rvvkit.load(art, on=f"ssh://{ALIAS}") as sess:
        got = sess.generate(prompt, 16)
    assert got.tokens == want and got.stopped == "max_new_tokens"


def test_generation_streams_from_the_board(board):
    """Tokens come over SSH as the board's runner prints them, not all at its end: their
    arrivals spread over the generation (the same decoder as above, its kernels cached)."""
    import time

    from ort_decoder import ort_greedy
    from rvvkit.zoo import llm as zoo_llm
    model = zoo_llm.decoder(zoo_llm.DecoderConfig(bits=4, layers=1))
    want, _ = ort_greedy(model, [1, 2, 3], 36, 40)
    with rvvkit.load(rvvkit.build(model, max_seq=40), on=f"ssh://{ALIAS}") as sess:
        t0 = time.monotonic()
        arrivals, got = [], []
        for token in sess.generate_iter([1, 2, 3], 36, eos=[]):
            arrivals.append(time.monotonic() - t0)
            got.append(token)
    assert got == want
    # all at the end would be one instant (tokens handed over within microseconds); streamed,
    # the first and last are apart by the decoding of 35 tokens (36 ms here: ~1 ms a token
    # on the emulated board), and many arrive in milliseconds of their own
    assert arrivals[-1] - arrivals[0] > 0.005 and len({round(t, 3) for t in arrivals}) > 5, \
        arrivals


def test_gguf_file_generates_llama_cpps_tokens_on_the_board(board, tmp_path):
    """A GGUF file built here (its float32 copy, on which llama.cpp computes in float32 alone:
    tests/llm/test_gguf.py) generates llama.cpp's 64 greedy tokens on the board."""
    import json
    pytest.importorskip("gguf", reason="the gguf package (rvvkit[llm]) reads GGUF files")
    from gguf_support import as_f32
    stored = REPO / "tests" / "models" / "llm" / "gguf"
    ref = json.loads((stored / "qwen2_q4_0.json").read_text())
    copy = tmp_path / "qwen2_q4_0.f32.gguf"
    as_f32(stored / "qwen2_q4_0.gguf", copy)
    with rvvkit.load(rvvkit.build(str(copy), max_seq=80), on=f"ssh://{ALIAS}") as sess:
        got = sess.generate(ref["prompt"], len(ref["f32"]["tokens"]), eos=[])
    assert got.tokens == ref["f32"]["tokens"]


LLM = REPO / "tests" / "models" / "llm"
# each exporter's stored output (tests/llm/export_*.py): onnxruntime-genai's builder (its
# reference is its own generator's), optimum, transformers' legacy and dynamo exporters (opset
# 18 decomposed; opset 23 Attention)
EXPORTS = [pytest.param(LLM / "genai" / "qwen2_int4" / "model.onnx", id="genai_builder_int4"),
           pytest.param(LLM / "optimum" / "qwen2_sdpa" / "model.onnx", id="optimum_sdpa"),
           pytest.param(LLM / "qwen2_tf.onnx", id="transformers"),
           pytest.param(LLM / "qwen2_dynamo.onnx", id="dynamo_opset18"),
           pytest.param(LLM / "llama_dynamo23.onnx", id="dynamo_opset23")]


@pytest.mark.parametrize("path", EXPORTS)
def test_each_exporters_decoder_generates_its_reference_on_the_board(board, path):
    """64 greedy tokens over SSH, the loop in the board's runner, as on the host and under
    QEMU (tests/llm): onnxruntime's, or onnxruntime-genai's for its builder's output."""
    import onnx
    from ort_decoder import ort_greedy
    ref = path.parent / "reference.json"
    if ref.is_file():
        stored = json.loads(ref.read_text())
        prompt, want = stored["prompt"], stored["tokens"]
    else:
        prompt = [5, 17, 33, 2, 99, 40, 41, 42]
        want, _ = ort_greedy(onnx.load(str(path)), prompt, 64, 80, growing=True)
    art = rvvkit.build(str(path), max_seq=80)
    with rvvkit.load(art, on=f"ssh://{ALIAS}") as sess:
        got = sess.generate(prompt, len(want), eos=[])
    assert got.tokens == want
