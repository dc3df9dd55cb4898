"""The examples of examples/, run as a reader runs them: the command of each one's header, as a
subprocess from the repository root, with a timeout and an output directory of the test's own
(never the repository). Each must exit 0 and print what shows it worked (its error lines, the
refusals, the PNG it wrote), so that an example cannot rot unnoticed.

The subprocesses inherit the session's private compile cache (RVVKIT_CACHE_DIR, tests/
conftest.py), so the examples sharing the tiny model (examples/tiny_model.py) compile its C
once per target. An example skips, with the reason, only where a tool it needs is missing and
CI installs it (QEMU and the riscv64 compilers, ssh-keygen, the Debian board as root, nvcc and a
GPU for the CUDA example); under CI=true only the GPU may be missing."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from executors import _why_not

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ssh"))
from debian_board_support import ALIAS  # noqa: E402
from ssh_support import needs_rvv, needs_sshd  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def missing(why: str) -> None:
    """A tool CI installs is missing: skip here, fail in CI."""
    if CI:
        pytest.fail(f"CI should have it: {why}")
    pytest.skip(why)


def need(on: str) -> None:
    """This machine must be able to run the executor `on` (else `missing`)."""
    why = _why_not(on)
    if why:
        missing(f"{on}: {why}")


def run_example(argv: List[str], timeout: float, env: Optional[Dict[str, str]] = None) -> str:
    """Run an example from the repository root; its stdout and stderr together, after
    asserting exit status 0 (the tail of its output in the failure message otherwise)."""
    # (no __pycache__ written into examples/: the tests leave the tree as it was)
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    full_env.pop("OUTDIR", None)  # each test passes its directory on the command line
    res = subprocess.run(argv, cwd=REPO, env=full_env, capture_output=True, text=True,
                         timeout=timeout)
    text = res.stdout + res.stderr
    assert res.returncode == 0, f"{' '.join(argv)} exited {res.returncode}:\n{text[-6000:]}"
    return text


def python(name: str, *args: str) -> List[str]:
    return [sys.executable, str(EXAMPLES / name), *args]


def bash(name: str, *args: str) -> List[str]:
    return ["bash", str(EXAMPLES / name), *args]


def assert_png(path: Path) -> None:
    assert path.is_file(), f"{path} was not written"
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path} is not a PNG"


# ---------------------------------------------------------------------------------------------

def test_tiny_model(tmp_path):
    out = run_example(python("tiny_model.py", str(tmp_path / "m.onnx"), "--inputs",
                             str(tmp_path / "in.npz")), timeout=60)
    assert "wrote" in out and (tmp_path / "m.onnx").is_file() and (tmp_path / "in.npz").is_file()


def test_python_api(tmp_path):
    need("qemu")
    out = run_example(python("python_api.py", "--out", str(tmp_path)), timeout=240)
    assert re.search(r"host: max abs error vs onnxruntime \d\.\d+e-\d+, class (\d+) "
                     r"\(onnxruntime: \1\)", out), out
    assert "slowest steps:" in out and "a wrong shape is refused: InputError" in out
    for vlen in (128, 512):
        assert re.search(rf"qemu \(VLEN {vlen}\): max abs error vs onnxruntime \S+, [\d,]+ "
                         r"instructions per inference", out), out
    assert (tmp_path / "model.rvv").is_file() and out.rstrip().endswith(f"OK: files in {tmp_path}")


def test_llm_generate(tmp_path):
    need("qemu")
    out = run_example(bash("llm_generate.sh", str(tmp_path)), timeout=300)
    lines = [ln.strip() for ln in out.splitlines() if re.fullmatch(r"(\d+ ){24}", ln + " ")
             or re.fullmatch(r"(\d+ )+\d+", ln.strip())]
    host, qemu = lines[0], lines[1]
    assert host == qemu and len(host.split()) == 24, out   # the same tokens on both
    assert "on host" in out and "on qemu" in out and "cache is full" in out, out
    assert (tmp_path / "decoder_int4.rvv").is_file()


def test_gguf_generate(tmp_path):
    need("qemu")
    pytest.importorskip("gguf", reason="rvvkit[llm]")
    pytest.importorskip("tokenizers", reason="rvvkit[llm]")
    out = run_example(bash("gguf_generate.sh", "", str(tmp_path)), timeout=300)
    assert "GGUF qwen2: 2 layers" in out, out
    assert "carries: tokenizer, chat template, end-of-text ids" in out, out
    assert "generated 16 at" in out and "on host" in out, out
    assert "qemu (VLEN 256): kernels ready" in out and "generated 12 at" in out, out
    assert (tmp_path / "model.rvv").is_file() and f"files in {tmp_path}" in out


def test_int8_from_onnxruntime(tmp_path):
    need("qemu")
    out = run_example(python("int8_from_onnxruntime.py", "--out", str(tmp_path)), timeout=240)
    assert "rvvkit.QConv (conv1)" in out and "rvvkit.QMatMul (fc)" in out, out
    # the example itself fails when a path is more than one quantum from the evaluator
    for label in ("host", r"qemu \(VLEN 256\)"):
        assert re.search(rf"{label}: logits [01] quant\w+ from the evaluator at most, .*"
                         r"class \d+ \(same\)", out), out
    assert (tmp_path / "model.int8.onnx").is_file() and "OK: files in" in out


def test_signing(tmp_path):
    if not shutil.which("ssh-keygen"):
        missing("ssh-keygen (the OpenSSH client; scripts/setup.sh installs it)")
    try:
        import cryptography  # noqa: F401
    except ImportError:
        missing("the cryptography package (pip install 'rvvkit[sign]')")
    out = run_example(bash("signing.sh", str(tmp_path)), timeout=240)
    assert re.search(r"signature: ed25519, key id [0-9a-f]{16}: valid", out), out
    assert re.search(r"model\.rvv: signature by key [0-9a-f]{16} verified", out), out
    refusals = re.findall(r"refused \(exit 1\): rvvkit: error: (.*)", out)
    assert len(refusals) == 4, out
    other, damaged, forged, unsigned = refusals
    assert "not by the required key" in other
    assert "section .rvvkit.weights is corrupt" in damaged
    assert "does not verify: the artifact was changed after it was signed" in forged
    assert "unsigned.rvv is not signed" in unsigned


def test_board_without_compiler(tmp_path):
    need("qemu")
    out = run_example(bash("board_without_compiler.sh", str(tmp_path)), timeout=240)
    assert ".rvvkit.so.riscv64" in out and ".rvvkit.runner.riscv64" in out, out
    assert re.search(r"qemu \(VLEN 256\): kernels ready .*precompiled riscv64\S* kernels", out)
    assert re.search(r"host: kernels ready .*precompiled x86_64\S* kernels", out), out
    # the fall-back is said once per executor, as a progress line of rvvkit's own
    assert re.search(r"^rvvkit: qemu: no compiler \(.*\); running the artifact's precompiled",
                     out, re.M), out
    assert out.count("-> OK") == 4, out   # two outputs, QEMU and host, against onnxruntime
    assert re.search(r"refused \(exit 1\): .*--precompile riscv64", out), out


def test_compare_plot(tmp_path):
    need("qemu")
    need("cuda-emu")
    out = run_example(bash("compare_plot.sh", str(tmp_path)), timeout=300)
    for path in ("host", "qemu vlen=128", "qemu vlen=512", "cuda-emu"):
        assert re.search(rf"^{re.escape(path)} +ok ", out, re.M), out
    assert re.search(r"^cuda +(ok|skipped) ", out, re.M), out
    assert_png(tmp_path / "compare.png")


@needs_sshd
@needs_rvv
@pytest.mark.ssh
def test_board_over_ssh_loopback(ssh_world, tmp_path):  # noqa: F811
    """The loopback RVV board of tests/ssh/ssh_support.py (sshd here, a riscv64 cross
    compiler and a qemu-riscv64 wrapper), by board name; needs no root."""
    env = {"RVVKIT_SSH_CONFIG": str(ssh_world.ssh_config),
           "RVVKIT_BOARDS": str(ssh_world.boards)}
    out = run_example(python("board_over_ssh.py", "rvv-board", "--out", str(tmp_path)),
                      timeout=240, env=env)
    assert "session: ssh://rvv-board (" in out and "the board runs riscv64" in out, out
    assert re.search(r"max abs error vs onnxruntime \S+, class \d+ \(same as", out), out
    assert "latency on the board:" in out and "OK: files in" in out


@pytest.mark.ssh
@pytest.mark.slow
def test_board_over_ssh_debian(debian_board, tmp_path):  # noqa: F811
    """The emulated Debian riscv64 board (scripts/debian_board.sh: its own GCC 14 under
    qemu-user), its address from $BOARD as the example's header allows."""
    out = run_example(python("board_over_ssh.py", "--out", str(tmp_path)), timeout=600,
                      env=dict(debian_board.env, BOARD=f"ssh://{ALIAS}"))
    assert f"session: ssh://{ALIAS} (" in out, out
    assert re.search(r"the board runs riscv64; its compiler: .*\b14\.\d.* -march=rv64gcv",
                     out), out
    assert re.search(r"max abs error vs onnxruntime \S+, class \d+ \(same as", out), out
    assert "OK: files in" in out


@pytest.mark.cuda
def test_cuda_gpu(tmp_path):
    why = _why_not("cuda")   # a GPU and its driver; not something CI machines have
    if why:
        pytest.skip(why)
    out = run_example(python("cuda_gpu.py", "--out", str(tmp_path)), timeout=600)
    assert re.search(r"^cuda \(.*\): max abs error vs onnxruntime \S+, argmax same", out,
                     re.M), out
    assert "slowest steps on the GPU:" in out and "OK: files in" in out


@pytest.mark.slow
def test_quickstart(tmp_path):
    need("qemu")
    out = run_example(bash("quickstart.sh", str(tmp_path)), timeout=600)
    assert re.search(r"softmaxout_1: max abs error \S+, argmax rvvkit (\d+) / onnxruntime \1 "
                     r"-> OK", out), out
    for path in ("host", "qemu vlen=256"):
        assert re.search(rf"^{re.escape(path)} +ok ", out, re.M), out
    assert_png(tmp_path / "compare.png")
