"""The runner's artifact reader (runtime_c/rvk_artifact.h) under AddressSanitizer and
UndefinedBehaviorSanitizer: runtime_c/fuzz_artifact.c mutates a real artifact 10^4 times per
run (bit flips, JSON-significant bytes and digit runs in the meta, deleted, duplicated and
truncated ranges; half the reads without checksums so that damage reaches the JSON parser and
the fact checks). Any sanitizer report aborts the driver. scripts/fuzz_nightly.sh runs more."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand
from rvvkit.resources import runtime_c_file

ITERATIONS = 10_000
CC = shutil.which("gcc") or shutil.which("clang-16")


def _build(tmp_path, cxx: bool):
    exe = tmp_path / ("fuzz_cxx" if cxx else "fuzz_c")
    lang = ["-x", "c++", "-std=c++11"] if cxx else ["-std=c11"]
    cc = shutil.which("g++") if cxx else CC
    subprocess.run([cc, *lang, "-g", "-O1", "-Wall", "-Wextra", "-Werror",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    str(runtime_c_file("fuzz_artifact.c")), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    return exe


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["y"], ["z"]),
                        helper.make_node("Split", ["z"], ["a", "b"], axis=1)],
                       [("x", (1, 3, 6, 6))], [("a", (1, 2, 6, 6)), ("b", (1, 2, 6, 6))],
                       {"w": rand(4, 3, 3, 3)})
    path = tmp_path_factory.mktemp("fuzz") / "seed.rvv"
    rvvkit.build(model, cuda=False).save(path)
    return path


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("cxx", [False, True], ids=["c", "c++"])
def test_reader_survives_mutations_under_sanitizers(tmp_path, seed, cxx):
    if cxx and not shutil.which("g++"):
        pytest.skip("g++ missing")
    exe = _build(tmp_path, cxx)
    proc = subprocess.run([str(exe), str(seed), str(ITERATIONS), "20261123"],
                          capture_output=True, text=True, timeout=600,
                          env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
                               "UBSAN_OPTIONS": "print_stacktrace=1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "ERROR: AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr
    m = re.search(r"(\d+) inputs, (\d+) accepted, (\d+) refused", proc.stdout)
    assert m and int(m.group(1)) == ITERATIONS
    # both outcomes occur: the mutations reach past the first check, and most are refused
    assert 0 < int(m.group(2)) < int(m.group(3))
