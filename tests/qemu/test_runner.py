"""The standalone C runner (runtime_c/runner.c) as a program: its command line, exit
codes and messages, the files it reads and writes. Each behaviour is checked on the host (the
runner built natively: fast, needs only cc) and under qemu-riscv64 (built by the riscv64
compiler), since boards run exactly this program."""
from __future__ import annotations

import json
import struct
import subprocess

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand
from qemu_support import QEMU, RV, RV_COMPILER, needs_qemu, small_feeds, small_model
from rvvkit.artifact.abi import ABI_VERSION
from rvvkit.artifact import Artifact
from rvvkit.jit import compile_flags, compile_source, resolve_compiler
from rvvkit.runtime.runner import build_kernels, build_runner, runner_source

WEIGHTS = ".rvvkit.weights"


class Runner:
    """The runner and one model's kernels, for one platform."""

    def __init__(self, where: str, artifact_path, c_source: str):
        self.artifact = artifact_path
        if where == "host":
            comp = resolve_compiler(target="host")
            self.prefix = []
        else:
            sess = rvvkit.load(artifact_path, on="qemu", compiler=RV_COMPILER)
            comp, self.prefix = sess.compiler, sess.qemu_prefix()
        self.compiler = comp
        self.exe = str(build_runner(comp))
        self.kernels = str(build_kernels(c_source, comp))

    def __call__(self, *args, artifact=None, kernels=None, cwd=None):
        argv = self.prefix + [self.exe, str(artifact or self.artifact),
                              str(kernels or self.kernels)]
        return subprocess.run(argv + [str(a) for a in args], capture_output=True, text=True,
                              timeout=120, cwd=cwd)


@pytest.fixture(scope="module")
def model_art(tmp_path_factory):
    path = tmp_path_factory.mktemp("runner") / "small.rvv"
    art = rvvkit.build(small_model())
    art.save(path)
    return art, path


@pytest.fixture(scope="module", params=["host", pytest.param("qemu", marks=needs_qemu)])
def runner(request, model_art):
    art, path = model_art
    return Runner(request.param, path, art.c_source)


@pytest.fixture(scope="module")
def expected(model_art):
    with rvvkit.load(model_art[0], on="host") as sess:
        return sess.run(small_feeds())


@pytest.fixture
def x_npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, small_feeds()["x"])
    return path


def assert_failed(proc, code: int, *words):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("rvvkit-runner: "), proc.stderr
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)


def test_runs_writes_outputs_and_timings(runner, model_art, expected, x_npy, tmp_path):
    art = model_art[0]
    proc = runner("--inputs", x_npy, "--outdir", tmp_path, "--repeat", 3, "--warmup", 1,
                  "--timings", tmp_path / "t.json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    for i, o in enumerate(art.meta["outputs"]):
        got = np.load(tmp_path / f"out{i}.npy")
        assert got.dtype == np.float32 and got.shape == (int(np.prod(o["shape"])),)  # 1-D
        np.testing.assert_allclose(got.reshape(o["shape"]), expected[o["name"]], rtol=1e-4,
                                   atol=1e-5)
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["repeat"] == 3 and doc["warmup"] == 1 and doc["timed_steps"] is True
    assert doc["abi_version"] == ABI_VERSION  # the runner's, from runtime_c/rvvkit_abi.h
    assert doc["num_steps"] == len(art.meta["plan"]) == len(doc["step_seconds"])
    assert all(s >= 0 for s in doc["step_seconds"]) and doc["total_seconds"] > 0
    assert doc["mean_seconds"] == pytest.approx(doc["total_seconds"] / 3, rel=1e-6)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_repeat_zero_loads_but_never_infers(runner, x_npy, tmp_path):
    proc = runner("--inputs", x_npy, "--outdir", tmp_path, "--repeat", 0, "--untimed",
                  "--timings", tmp_path / "t.json")
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob("out*.npy"))
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["repeat"] == 0 and doc["timed_steps"] is False
    assert doc["step_seconds"] == [0] * doc["num_steps"]


def test_npy_version_2_input_and_default_outdir(runner, expected, tmp_path):
    path = tmp_path / "x2.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, small_feeds()["x"], version=(2, 0))
    proc = runner("--inputs", path.name, cwd=tmp_path)  # relative paths, outputs into cwd
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out0.npy"), expected["probs"].ravel(),
                               rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# bad artifacts: exit 3, the message names the section

def _patched(model_art, tmp_path, patch) -> str:
    data = bytearray(model_art[1].read_bytes())
    patch(data, {s["name"]: s for s in Artifact.load(model_art[1]).sections()})
    bad = tmp_path / "bad.rvv"
    bad.write_bytes(bytes(data))
    return bad


def test_truncated_artifact(runner, model_art, x_npy, tmp_path):
    bad = _patched(model_art, tmp_path, lambda d, s: d.__delitem__(slice(len(d) // 2, None)))
    proc = runner("--inputs", x_npy, "--outdir", tmp_path, artifact=bad)
    assert_failed(proc, 3, "truncated", str(bad))
    assert not list(tmp_path.glob("out*.npy"))


def test_section_past_end_of_file(runner, model_art, x_npy, tmp_path):
    def grow_weights(data, sections):
        shoff = struct.unpack_from("<Q", data, 40)[0]
        index = [s["name"] for s in sections.values()].index(WEIGHTS) + 1  # after the null one
        struct.pack_into("<Q", data, shoff + index * 64 + 32, 1 << 40)  # sh_size
    bad = _patched(model_art, tmp_path, grow_weights)
    proc = runner("--inputs", x_npy, artifact=bad)
    assert_failed(proc, 3, f"section {WEIGHTS} is corrupt", "past the end")


def test_missing_weights_section(runner, model_art, x_npy, tmp_path):
    def rename(data, sections):
        strtab = sections[".shstrtab"]["offset"]
        at = data.index(WEIGHTS.encode(), strtab)
        data[at + 1:at + 2] = b"R"
    bad = _patched(model_art, tmp_path, rename)
    # the section names are checksummed; past that check the meta lists the section
    assert_failed(runner("--inputs", x_npy, artifact=bad), 3, "section .shstrtab is corrupt")
    proc = runner("--inputs", x_npy, "--no-verify", artifact=bad)
    assert_failed(proc, 3, f"missing required section {WEIGHTS}", ".rvvkit.meta", ".rvvkit.c")


def test_not_an_elf_file(runner, x_npy, tmp_path):
    junk = tmp_path / "junk.rvv"
    junk.write_bytes(b"hello" * 100)
    assert_failed(runner("--inputs", x_npy, artifact=junk), 3, "not an ELF file")
    assert_failed(runner("--inputs", x_npy, artifact=tmp_path / "nope.rvv"), 3, "cannot open")


def test_weights_of_another_model(runner, x_npy, tmp_path):
    other = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)],
                       [("x", (1, 507))], [("y", (1, 3))], {"w": rand(3, 507)})
    path = tmp_path / "other.rvv"
    rvvkit.build(other).save(path)
    assert_failed(runner("--inputs", x_npy, artifact=path), 3, "disagree", "different builds")


def test_flipped_weight_bit_is_caught_unless_no_verify(runner, model_art, x_npy, tmp_path):
    def flip(data, sections):
        data[sections[WEIGHTS]["offset"] + 123] ^= 0x10
    bad = _patched(model_art, tmp_path, flip)
    proc = runner("--inputs", x_npy, "--outdir", tmp_path, artifact=bad)
    assert_failed(proc, 3, f"section {WEIGHTS} is corrupt: checksum mismatch")
    assert not list(tmp_path.glob("out*.npy"))
    assert runner("--inputs", x_npy, "--outdir", tmp_path, "--no-verify",
                  artifact=bad).returncode == 0


def _edited(model_art, tmp_path, edit) -> str:
    """The model's artifact with its meta edited and every checksum recomputed: what an
    attacker (or a buggy tool) can write; the runner must refuse it before sizing a buffer."""
    art = model_art[0]
    meta = json.loads(json.dumps(art.meta))
    edit(meta)
    path = tmp_path / "edited.rvv"
    Artifact(meta, art.c_source, art.weights, art.cu_source).save(path)
    return path


@pytest.mark.parametrize("edit,words", [
    (lambda m: m["outputs"][0].update(shape=[1, 2]), ("output 0",)),
    (lambda m: m["inputs"][0].update(shape=[1]), ("input 0",)),
    (lambda m: m["outputs"][0].update(dtype="int64"), ("output 0",)),
    (lambda m: m.pop("outputs"), ("'outputs' is not a list",)),
    (lambda m: m.update(inputs=[]), ("input count",)),
    (lambda m: m["plan"].pop(), ("step count",)),
    (lambda m: m["memory"].update(arena_floats=1), ("arena size",)),
    (lambda m: m["inputs"][0].update(shape=[1, -3]), ("inputs[0] has no valid shape",)),
    (lambda m: m["inputs"][0].update(shape=[2 ** 40, 2 ** 40]), ("inputs[0]",)),
    (lambda m: m.update(abi_version=99), ("ABI version",)),
], ids=["smaller-output", "input-of-1", "output-type", "no-outputs", "no-inputs", "steps",
        "arena", "negative-dim", "overflow", "abi"])
def test_edited_meta_with_valid_checksums_is_refused(runner, model_art, x_npy, tmp_path, edit,
                                                     words):
    bad = _edited(model_art, tmp_path, edit)
    proc = runner("--inputs", x_npy, "--outdir", tmp_path, artifact=bad)
    assert_failed(proc, 3, *words)
    assert not list(tmp_path.glob("out*.npy"))


def test_artifact_without_runner_checksums(runner, model_art, x_npy, tmp_path):
    """An artifact written before rvk64 (sha256 only): refused with the way out named."""
    def strip(data, sections):
        sec = sections[".rvvkit.check"]
        text = bytes(data[sec["offset"]:sec["offset"] + sec["size"]])
        doc = json.loads(text)
        doc["meta_rvk64"] = doc["shstrtab_rvk64"] = "x" * 16  # same length, no longer valid
        new = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        assert len(new) == len(text)
        data[sec["offset"]:sec["offset"] + sec["size"]] = new
    bad = _patched(model_art, tmp_path, strip)
    assert_failed(runner("--inputs", x_npy, artifact=bad), 3, "checksum mismatch", "--no-verify")
    assert runner("--inputs", x_npy, "--outdir", tmp_path, "--no-verify",
                  artifact=bad).returncode == 0


# ---------------------------------------------------------------------------------------------
# bad inputs: exit 4

def test_wrong_input_size(runner, tmp_path):
    np.save(tmp_path / "small.npy", np.zeros((1, 3, 12, 13), np.float32))
    proc = runner("--inputs", tmp_path / "small.npy", "--outdir", tmp_path)
    assert_failed(proc, 4, "small.npy", str(3 * 12 * 13), str(3 * 13 * 13))
    assert not list(tmp_path.glob("out*.npy"))


def test_wrong_inputs(runner, x_npy, tmp_path):
    assert_failed(runner(), 4, "takes 1 input(s) but 0")
    assert_failed(runner("--inputs", x_npy, x_npy), 4, "takes 1 input(s) but 2")
    np.save(tmp_path / "d.npy", small_feeds()["x"].astype(np.float64))
    assert_failed(runner("--inputs", tmp_path / "d.npy"), 4, "float32")
    np.save(tmp_path / "f.npy", np.asfortranarray(np.zeros((1, 3, 13, 13), np.float32)[0]))
    assert_failed(runner("--inputs", tmp_path / "f.npy"), 4, "Fortran")
    (tmp_path / "junk.npy").write_bytes(b"junk" * 20)
    assert_failed(runner("--inputs", tmp_path / "junk.npy"), 4, "not a .npy")
    raw = (x_npy.read_bytes())[:-8]
    (tmp_path / "cut.npy").write_bytes(raw)
    assert_failed(runner("--inputs", tmp_path / "cut.npy"), 4, "truncated")
    assert_failed(runner("--inputs", tmp_path / "missing.npy"), 4, "cannot open")


# ---------------------------------------------------------------------------------------------
# usage (2) and kernel loading (5)

def test_usage_errors(runner, x_npy):
    proc = subprocess.run(runner.prefix + [runner.exe], capture_output=True, text=True)
    assert_failed(proc, 2, "usage:")
    assert_failed(runner("--inputs", x_npy, "--repeat", "x"), 2, "--repeat", "'x'")
    assert_failed(runner("--inputs", x_npy, "--warmup", "-1"), 2, "--warmup")
    assert_failed(runner("--inputs", x_npy, "--bogus", "1"), 2, "unknown option --bogus")
    assert_failed(runner("--inputs", x_npy, "--outdir"), 2, "--outdir needs a value")


def test_kernel_load_failures(runner, model_art, x_npy, tmp_path):
    assert_failed(runner("--inputs", x_npy, kernels=model_art[1]), 5, "cannot load kernels")
    assert_failed(runner("--inputs", x_npy, kernels=tmp_path / "none.so"), 5, "none.so")
    # A loadable library that is not rvvkit kernels, built by the same compiler.
    lib = compile_source("int not_rvvkit(void) { return 1; }\n", runner.compiler,
                         compile_flags(runner.compiler), name="notkernels")
    assert_failed(runner("--inputs", x_npy, kernels=lib), 5, "rvvkit_abi_version")
    old = compile_source('#ifdef __cplusplus\nextern "C"\n#endif\n'
                         "int rvvkit_abi_version(void) { return 999; }\n", runner.compiler,
                         compile_flags(runner.compiler), name="oldkernels")
    assert_failed(runner("--inputs", x_npy, kernels=old), 5, "ABI version 999")


# ---------------------------------------------------------------------------------------------
# the source itself

def _compilers():
    import shutil
    found = [(c, "host") for c in ("gcc", "g++", "clang-16") if shutil.which(c)]
    found += [(c, "rvv") for c in (f"{RV.triple}-gcc", f"{RV.triple}-g++") if shutil.which(c)]
    if shutil.which("clang-16") and shutil.which("ld.lld-16"):
        found.append(("clang-16", "rvv"))
    return found


@pytest.mark.parametrize("compiler,target", _compilers())
def test_runner_source_is_warning_clean(compiler, target):
    comp = resolve_compiler(compiler, target=target)
    flags = compile_flags(comp, shared=False) + ["-Werror"]
    exe = compile_source(runner_source(), comp, flags, name="runner_werror", kind="exe",
                         link_flags=["-ldl"])
    assert exe.is_file()


def test_runner_source_inlines_headers():
    src = runner_source()
    assert '#include "' not in src and "rvk_elf_find" in src and "rvk_npy_read" in src
    assert '#line 1 "rvk_elf.h"' in src and '#line 1 "rvvkit_abi.h"' in src
    assert '#line 1 "rvk_json.h"' in src and src.count('#line 1 "rvk_elf.h"') == 1


@pytest.mark.skipif(QEMU is None, reason="qemu-riscv64 not installed")
def test_qemu_fixture_available():
    assert RV_COMPILER, "qemu-riscv64 is installed but no riscv64 compiler is"
