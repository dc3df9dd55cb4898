"""The QEMU executor's contract apart from numerics: settings and their errors, timeouts,
crashes, the raw command interface, and `rvvkit run --on qemu` from the command line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import rvvkit
from qemu_support import (QEMU, RV_COMPILER, assert_close, needs_qemu, small_feeds,
                          small_model)
from rvvkit.artifact import Artifact
from rvvkit.errors import ExecutionError, RvvkitError
from rvvkit.jit import compile_flags, compile_source
from rvvkit.codegen.c import ABI_VERSION
from rvvkit.runtime.qemu import QemuSession, cpu_string, resolve_timeout, resolve_vlen


@pytest.fixture(scope="module")
def art_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("qemu-session") / "small.rvv"
    rvvkit.build(small_model()).save(path)
    return path


@pytest.fixture(scope="module")
def host_outputs(art_path):
    with rvvkit.load(art_path, on="host") as sess:
        return sess.run(small_feeds())


# ---------------------------------------------------------------------------------------------
# settings (no qemu needed: they fail before anything runs)

def test_vlen_validation(monkeypatch):
    monkeypatch.delenv("RVVKIT_VLEN", raising=False)
    assert resolve_vlen() == 256
    assert [resolve_vlen(v) for v in (128, 256, 512, 1024)] == [128, 256, 512, 1024]
    monkeypatch.setenv("RVVKIT_VLEN", "512")
    assert resolve_vlen() == 512 and resolve_vlen(128) == 128  # the argument wins
    for bad in (64, 100, 2048, 384, 0, -256):
        with pytest.raises(RvvkitError, match="power of two from 128 to 1024"):
            resolve_vlen(bad)
    monkeypatch.setenv("RVVKIT_VLEN", "wide")
    with pytest.raises(RvvkitError, match="RVVKIT_VLEN"):
        resolve_vlen()
    with pytest.raises(RvvkitError, match="VLEN"):
        QemuSession("never-read.rvv", vlen=96)  # before the artifact is even opened


def test_missing_qemu_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(RvvkitError, match="setup.sh.*RVVKIT_QEMU|RVVKIT_QEMU.*setup.sh"):
        QemuSession("never-read.rvv", qemu=str(tmp_path / "no-qemu"))
    monkeypatch.setenv("RVVKIT_QEMU", str(tmp_path / "no-qemu-either"))
    with pytest.raises(RvvkitError, match=r"no-qemu-either.*\$RVVKIT_QEMU"):
        rvvkit.load("never-read.rvv", on="qemu")
    monkeypatch.setenv("RVVKIT_QEMU", "")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RvvkitError, match="qemu-riscv64"):
        QemuSession("never-read.rvv")


def test_timeout_and_sysroot_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("RVVKIT_QEMU_TIMEOUT", "2.5")
    assert resolve_timeout() == 2.5 and resolve_timeout(7) == 7.0
    monkeypatch.setenv("RVVKIT_QEMU_TIMEOUT", "soon")
    with pytest.raises(RvvkitError, match="RVVKIT_QEMU_TIMEOUT"):
        resolve_timeout()
    with pytest.raises(RvvkitError, match="positive"):
        resolve_timeout(0)
    if QEMU:
        monkeypatch.setenv("RVVKIT_SYSROOT", str(tmp_path / "nowhere"))
        with pytest.raises(RvvkitError, match="RVVKIT_SYSROOT"):
            QemuSession("never-read.rvv", timeout=1)


def test_cpu_string():
    assert cpu_string(512) == "rv64,v=true,vlen=512,elen=64,vext_spec=v1.0"
    assert cpu_string(128, True).endswith(",rvv_ta_all_1s=true,rvv_ma_all_1s=true")


# ---------------------------------------------------------------------------------------------
# running

@needs_qemu
def test_run_raw_command_and_repeat_zero(art_path, host_outputs):
    with QemuSession(art_path, vlen=128, compiler=RV_COMPILER) as sess:
        workdir = sess.write_inputs(small_feeds())
        argv = sess.runner_command(workdir, repeat=0, warmup=0, extra_args=["-d", "nochain"])
        assert argv[:5] == [sess.qemu, "-L", sess.sysroot, "-cpu", cpu_string(128)]
        # the pool's workers sleep at once under QEMU: waiting must not count as instructions
        assert argv[5:9] == ["-E", "RVVKIT_SPIN_US=0", "-d", "nochain"] and "--repeat" in argv
        raw = sess.run_raw(workdir, repeat=0, extra_args=["-d", "nochain"])
        assert raw.returncode == 0 and not list(workdir.glob("out*.npy"))
        raw = sess.run_raw(workdir, repeat=2, warmup=1, timings=True)
        assert raw.returncode == 0 and (workdir / "timings.json").is_file()
        assert_close(sess.read_outputs(workdir), host_outputs, "run_raw")
        tmp = sess.tmpdir
    assert not tmp.exists()  # close() cleans up


@needs_qemu
def test_session_contract_measure_and_describe(art_path):
    with QemuSession(art_path, vlen=128, compiler=RV_COMPILER) as sess:
        desc = sess.describe()
        assert desc["executor"] == desc["path"] == "qemu" and desc["vlen"] == 128
        assert desc["label"] == "qemu (VLEN 128)" and desc["emulated"]
        assert desc["counts_instructions"] and desc["compiler"]
        lat = sess.measure(small_feeds(), repeat=2, warmup=0, count=False)
        assert lat["latency_stat"] == "mean" and lat["runs"] == 2 and lat["latency_ms"] > 0
        assert "dynamic_instructions" not in lat
        counted = sess.measure(small_feeds(), repeat=1, warmup=0)
        assert counted["dynamic_instructions"] > counted["vector_instructions"] > 0


@needs_qemu
def test_instruction_profile_adds_up_to_the_counts(art_path, monkeypatch):
    """The per-function profile of one inference sums to instruction_counts exactly (one
    thread: how often pool workers wake depends on timing), and the work is in the generated
    kernels (named from the kernel library's symbols)."""
    from rvvkit.runtime.counting.iprofile import KEYS
    monkeypatch.setenv("RVVKIT_NUM_THREADS", "1")
    with QemuSession(art_path, vlen=256, compiler=RV_COMPILER) as sess:
        prof = sess.instruction_profile(small_feeds())
        total = sess.instruction_counts(small_feeds())
    for k in KEYS:
        assert sum(r[k] for r in prof.values()) == total[k], k
    top = max(prof, key=lambda n: prof[n]["lmul_weighted_vector_ops"])
    assert re.match(r"(rvk_|k\d+_)", top), top       # a generated kernel, found by name


@needs_qemu
def test_timeout_kills_quickly(art_path):
    # 1 ms: less than QEMU needs to start, let alone load the runner and kernels.
    with QemuSession(art_path, compiler=RV_COMPILER, timeout=0.001) as sess:
        t0 = time.perf_counter()
        with pytest.raises(ExecutionError, match="timed out after 0.001 s") as exc:
            sess.run(small_feeds())
        assert time.perf_counter() - t0 < 5
        assert "command: " in str(exc.value) and "RVVKIT_QEMU_TIMEOUT" in str(exc.value)
        workdir = sess.write_inputs(small_feeds())
        with pytest.raises(ExecutionError, match="timed out"):
            sess.run_raw(workdir, repeat=10**6, timeout=0.5)  # a long run, cut short
        assert time.perf_counter() - t0 < 10


@needs_qemu
def test_runner_failure_and_crash_are_execution_errors(art_path, tmp_path):
    with QemuSession(art_path, compiler=RV_COMPILER) as sess:
        sess.artifact_path = tmp_path / "gone.rvv"
        with pytest.raises(ExecutionError) as exc:
            sess.run(small_feeds())
        msg = str(exc.value)
        assert "exited with code 3 (bad artifact)" in msg and "rvvkit-runner:" in msg
        assert "command: " in msg and "gone.rvv" in msg
        # Kernels that crash: the signal is reported, with the runner's command.
        sess.artifact_path = art_path
        # It declares what the meta says (else the runner refuses it before loading a step).
        meta = sess.artifact.meta
        nweights = sess.artifact.weights.nbytes // 4
        outs = [int(np.prod(o["shape"])) for o in meta["outputs"]]
        crash = ('#ifdef __cplusplus\nextern "C" {\n#endif\n'
                 f"int rvvkit_abi_version(void) {{ return {ABI_VERSION}; }}\n"
                 f"int rvvkit_num_steps(void) {{ return {len(meta['plan'])}; }}\n"
                 "int rvvkit_num_inputs(void) { return 1; }\n"
                 f"int rvvkit_num_outputs(void) {{ return {len(outs)}; }}\n"
                 f"long rvvkit_weights_floats(void) {{ return {nweights}; }}\n"
                 f"long rvvkit_arena_floats(void) {{ return {meta['memory']['arena_floats']}; }}\n"
                 "long rvvkit_input_elems(int i) { (void)i; return 507; }\n"
                 "long rvvkit_output_elems(int i) { static const long n[] = {"
                 + ", ".join(map(str, outs)) + "}; return n[i]; }\n"
                 "int rvvkit_input_dtype(int i) { (void)i; return 1; }\n"
                 "int rvvkit_output_dtype(int i) { (void)i; return 1; }\n"
                 "int rvvkit_prefill_tokens(void) { return 0; }\n"
                 "int rvvkit_set_num_threads(int n) { return n; }\n"
                 "int rvvkit_run_timed(const float *w, float *a, const void *const *in,\n"
                 "                     void *const *out, double *s) {\n"
                 "  (void)w; (void)a; (void)in; (void)out; (void)s;\n"
                 "  *(volatile int *)(long)8 = 1; return 0; }\n"
                 "#ifdef __cplusplus\n}\n#endif\n")
        sess.kernels_path = compile_source(crash, sess.compiler, compile_flags(sess.compiler),
                                           name="crashing")
        with pytest.raises(ExecutionError, match="killed by signal SIGSEGV") as exc:
            sess.run(small_feeds())
        assert "command: " in str(exc.value) and "crashing.so" in str(exc.value)


@needs_qemu
def test_input_errors_before_running(art_path):
    with QemuSession(art_path, compiler=RV_COMPILER) as sess:
        with pytest.raises(rvvkit.InputError, match="shape"):
            sess.run({"x": np.zeros((1, 3, 12, 13), np.float32)})


# ---------------------------------------------------------------------------------------------
# the command line

def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rvvkit", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))


@needs_qemu
def test_cli_run_on_qemu(art_path, host_outputs, tmp_path):
    feeds = tmp_path / "in.npz"
    np.savez(feeds, **small_feeds())
    out = tmp_path / "out.npz"
    proc = _cli("run", art_path, "--inputs", feeds, "--output", out, "--on", "qemu",
                "--vlen", 512, env={"RVVKIT_COMPILER": RV_COMPILER})
    assert proc.returncode == 0, proc.stderr
    assert "qemu (VLEN 512)" in proc.stderr
    with np.load(out) as got:
        assert_close({k: got[k] for k in got.files}, host_outputs, "cli")
    proc = _cli("run", art_path, "--inputs", feeds, "--on", "qemu", "--profile", "--repeat", 2,
                env={"RVVKIT_COMPILER": RV_COMPILER, "RVVKIT_VLEN": "128"})
    assert proc.returncode == 0, proc.stderr
    assert "qemu (VLEN 128)" in proc.stderr and "per-step time" in proc.stdout
    for step in Artifact.load(art_path).meta["plan"]:
        assert step["kernel"] in proc.stdout


def test_cli_vlen_errors(art_path):
    # Misused options are usage errors (exit 2) in every command, as in `rvvkit compare`.
    proc = _cli("run", art_path, "--on", "qemu", "--vlen", 300)
    assert proc.returncode == 2 and "VLEN 300" in proc.stderr and "Traceback" not in proc.stderr
    proc = _cli("run", art_path, "--vlen", 256)
    assert proc.returncode == 2 and "--vlen applies to --on qemu" in proc.stderr
    proc = _cli("bench", art_path, "--on", "host,qemu", "--vlen", "256,96")
    assert proc.returncode == 2 and "VLEN 96" in proc.stderr and "Traceback" not in proc.stderr
    proc = _cli("bench", art_path, "--vlen", 256)
    assert proc.returncode == 2 and "--vlen applies to qemu" in proc.stderr
    proc = _cli("run", art_path, "--on", "qemu", env={"RVVKIT_QEMU": "/nonexistent/qemu"})
    assert proc.returncode == 1 and "RVVKIT_QEMU" in proc.stderr
