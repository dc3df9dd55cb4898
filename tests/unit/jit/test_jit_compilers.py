"""Compiler choice and flags, against fake compilers on a private PATH (no real toolchain)."""
import platform
import stat
import sys

import pytest

from rvvkit.errors import CompilerNotFound
from rvvkit.jit import compilers, targets
from rvvkit.jit.compilers import Compiler, compile_flags, resolve_compiler, split_compiler
from rvvkit.jit.probe import clear_probe_cache

HOST_TRIPLE = f"{platform.machine()}-linux-gnu"
pytestmark = pytest.mark.skipif(platform.machine().startswith("riscv64"),
                                reason="expectations written for a non-RISC-V host")

# A fake driver: answers --version / -dumpmachine like gcc or clang and logs each call.
FAKE = """#!/bin/sh
echo "$0 $*" >> "{log}"
for a in "$@"; do
  case "$a" in
    --version) echo "{version}"; echo "Copyright (C) Free Software Foundation"; exit 0;;
    -dumpmachine)
      case "$*" in *--target=riscv64*) echo riscv64-unknown-linux-gnu; exit 0;; esac
      {dump}; exit 0;;
    -print-prog-name=*|-print-file-name=*) {found}; exit 0;;
  esac
done
exit 0
"""

# -print-prog-name=ld.lld / -print-file-name=crt1.o: a driver answers with a path when it finds
# the file ("$0" exists), with the bare name when it does not (a clang without lld or sysroot).
FOUND, NOT_FOUND = 'echo "$0"', 'echo "${a#*=}"'
FAKES = {
    "cc": ("cc (Fake) 12.2.0", f"echo {HOST_TRIPLE}", FOUND),
    "gcc": ("gcc (Fake) 12.2.0", f"echo {HOST_TRIPLE}", FOUND),
    "g++": ("g++ (Fake) 12.2.0", f"echo {HOST_TRIPLE}", FOUND),
    "clang-16": ("Debian clang version 16.0.6", f"echo {HOST_TRIPLE}", FOUND),
    "clang": ("clang version 14.0.6", f"echo {HOST_TRIPLE}", NOT_FOUND),  # no lld, no sysroot
    "riscv64-linux-gnu-gcc": ("riscv64-linux-gnu-gcc (Fake) 12.2.0", "echo riscv64-linux-gnu",
                              FOUND),
    "riscv64-linux-gnu-g++": ("riscv64-linux-gnu-g++ (Fake) 12.2.0", "echo riscv64-linux-gnu",
                              FOUND),
    # answers no -dumpmachine at all: its name alone must make it a riscv64 compiler
    "riscv64-mute-gcc": ("riscv64-mute-gcc 1.0", "exit 1", FOUND),
}


def install(bindir, names):
    for name in names:
        version, dump, found = FAKES[name]
        path = bindir / name
        path.write_text(FAKE.format(log=bindir / "calls.log", version=version, dump=dump,
                                    found=found))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fakebin(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    for var in ("RVVKIT_COMPILER", "TVM_RVV_COMPILER", "RVVKIT_CFLAGS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(compilers, "_ziglang_available", lambda: False)
    clear_probe_cache()
    yield bindir
    clear_probe_cache()


def test_precedence_explicit_env_tvm_default(fakebin, monkeypatch):
    install(fakebin, ["cc", "gcc", "g++", "clang-16"])
    assert resolve_compiler().argv == ("cc",)
    monkeypatch.setenv("TVM_RVV_COMPILER", "g++")
    assert resolve_compiler().argv == ("g++",)
    monkeypatch.setenv("RVVKIT_COMPILER", "clang-16")
    assert resolve_compiler().argv == ("clang-16",)
    assert resolve_compiler("gcc").argv == ("gcc",)


def test_default_order_host(fakebin):
    install(fakebin, ["g++", "gcc"])
    comp = resolve_compiler()
    assert comp.argv == ("gcc",) and comp.family == "gcc" and not comp.is_cxx
    assert comp.path == str(fakebin / "gcc") and comp.version == "gcc (Fake) 12.2.0"


def test_tvm_cross_compiler_is_skipped_for_host_but_used_for_rvv(fakebin, monkeypatch):
    install(fakebin, ["cc", "riscv64-linux-gnu-gcc"])
    monkeypatch.setenv("TVM_RVV_COMPILER", "riscv64-linux-gnu-gcc")
    assert resolve_compiler(target="host").argv == ("cc",)
    assert resolve_compiler(target="rvv").argv == ("riscv64-linux-gnu-gcc",)


def test_rvv_default_gets_riscv_flags(fakebin):
    install(fakebin, ["cc", "riscv64-linux-gnu-gcc", "riscv64-linux-gnu-g++"])
    comp = resolve_compiler(target="rvv")
    assert comp.argv == ("riscv64-linux-gnu-gcc",) and comp.is_riscv
    flags = compile_flags(comp)
    assert "-march=rv64gcv" in flags and "-mabi=lp64d" in flags
    assert "-march=native" not in flags and "-fuse-ld=lld" not in flags


def test_name_with_riscv64_is_enough(fakebin):
    install(fakebin, ["riscv64-mute-gcc"])
    comp = resolve_compiler("riscv64-mute-gcc", target="rvv")
    assert comp.machine == "" and comp.is_riscv
    assert "-march=rv64gcv" in compile_flags(comp)


def test_rvv_default_order(monkeypatch):
    monkeypatch.setattr(compilers, "_ziglang_available", lambda: True)
    zig = (sys.executable, "-m", "ziglang", "cc")
    assert compilers.default_candidates("rvv") == [
        ("clang-16",), ("clang",), zig, ("riscv64-linux-gnu-gcc",), ("riscv64-linux-gnu-g++",),
        ("riscv64-unknown-linux-gnu-gcc",)]
    # ... which is the order of toolchain/targets/riscv64-linux-gnu.toml
    lists = targets.riscv().compilers
    assert [split_compiler(c) for c in lists["cross"] + lists["fallback"]] == \
        compilers.default_candidates("rvv")
    monkeypatch.setattr(compilers, "_ziglang_available", lambda: False)
    assert zig not in compilers.default_candidates("rvv")
    monkeypatch.setattr(compilers, "host_is_riscv", lambda: True)  # on a board: native first
    assert compilers.default_candidates("rvv")[:3] == [("cc",), ("gcc",), ("clang",)]


def test_rvv_default_prefers_clang_over_gcc12(fakebin):
    install(fakebin, ["cc", "riscv64-linux-gnu-gcc", "riscv64-linux-gnu-g++", "clang-16"])
    comp = resolve_compiler(target="rvv")
    assert comp.argv == ("clang-16", "--target=riscv64-linux-gnu") and comp.is_riscv


def test_rvv_default_skips_clang_that_cannot_link_riscv64(fakebin):
    install(fakebin, ["cc", "clang", "riscv64-linux-gnu-gcc"])
    assert resolve_compiler(target="rvv").argv == ("riscv64-linux-gnu-gcc",)
    (fakebin / "riscv64-linux-gnu-gcc").unlink()
    clear_probe_cache()
    with pytest.raises(CompilerNotFound, match="ld.lld not found"):
        resolve_compiler(target="rvv")
    # Named explicitly, it is taken as given (the user may pass -fuse-ld=... and a sysroot).
    assert resolve_compiler("clang", target="rvv").argv == ("clang", "--target=riscv64-linux-gnu")


def test_clang_as_rvv_cross_compiler(fakebin):
    install(fakebin, ["cc", "clang-16"])
    comp = resolve_compiler(target="rvv")
    assert comp.argv == ("clang-16", "--target=riscv64-linux-gnu")
    assert comp.family == "clang" and comp.machine.startswith("riscv64") and comp.is_riscv
    flags = compile_flags(comp)
    assert "-march=rv64gcv" in flags and "-mabi=lp64d" in flags and "-fuse-ld=lld" in flags
    assert not any(f.startswith("--target") for f in flags)  # already in argv


def test_clang_string_with_target_is_not_doubled(fakebin, monkeypatch):
    install(fakebin, ["clang-16"])
    monkeypatch.setenv("RVVKIT_COMPILER", "clang-16 --target=riscv64-linux-gnu")
    comp = resolve_compiler(target="rvv")
    assert comp.argv == ("clang-16", "--target=riscv64-linux-gnu")
    # the same variable gives a host compiler when asked for the host... it targets riscv64:
    with pytest.raises(CompilerNotFound, match="riscv64"):
        resolve_compiler(target="host")


def test_host_clang_for_rvv_needs_target_flag_in_flags():
    comp = Compiler(argv=("clang-16",), path="/x/clang", version="clang 16", family="clang",
                    machine="riscv64-unknown-linux-gnu", is_cxx=False)
    assert "--target=riscv64-linux-gnu" in compile_flags(comp)


def test_zig_flags_and_split():
    assert split_compiler("zig") == (sys.executable, "-m", "ziglang", "cc")
    assert split_compiler("ziglang c++ -g") == (sys.executable, "-m", "ziglang", "c++", "-g")
    comp = Compiler(argv=split_compiler("zig"), path=sys.executable, version="clang (zig)",
                    family="zig", machine="riscv64-linux-gnu", is_cxx=False)
    flags = compile_flags(comp)
    assert "--target=riscv64-linux-gnu" in flags and "-mcpu=baseline_rv64+v" in flags
    assert not any(f.startswith("-march") for f in flags)


def test_host_flags(fakebin):
    install(fakebin, ["gcc", "g++"])
    comp = resolve_compiler("gcc")
    flags = compile_flags(comp)
    for f in ("-O3", "-std=c11", "-fPIC", "-shared", "-Wall", "-Wextra", "-DNDEBUG",
              "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast", "-march=native"):
        assert f in flags
    assert "-march=native" not in compile_flags(comp, native=False)
    # AVX-512 CPUs are tuned to prefer ymm; the x86 micro-kernels are written for zmm rows
    x86 = Compiler(**{**comp.__dict__, "machine": "x86_64-linux-gnu"})
    arm = Compiler(**{**comp.__dict__, "machine": "aarch64-linux-gnu"})
    assert compile_flags(x86, native=True)[-2:] == ["-march=native", "-mprefer-vector-width=512"]
    assert "-mprefer-vector-width=512" not in compile_flags(x86, native=False)
    assert compile_flags(arm, native=True)[-1] == "-march=native"
    assert "-shared" not in compile_flags(comp, shared=False)
    assert "-fopenmp" in compile_flags(comp, openmp=True)
    cxx = resolve_compiler("g++")
    assert cxx.is_cxx and "-std=c++11" in compile_flags(cxx) and "-std=c11" not in compile_flags(cxx)


def test_rvvkit_cflags_appended_last(fakebin, monkeypatch):
    install(fakebin, ["gcc"])
    monkeypatch.setenv("RVVKIT_CFLAGS", "-O2 -DFOO='a b'")
    flags = compile_flags(resolve_compiler("gcc"))
    assert flags[-2:] == ["-O2", "-DFOO=a b"]


def test_unknown_compiler_raises(fakebin, monkeypatch):
    with pytest.raises(CompilerNotFound, match="no-such-cc"):
        resolve_compiler("no-such-cc")
    monkeypatch.setenv("RVVKIT_COMPILER", "no-such-cc --foo")
    with pytest.raises(CompilerNotFound, match="RVVKIT_COMPILER"):
        resolve_compiler()


def test_nothing_found_lists_tries_and_env_var(fakebin):
    with pytest.raises(CompilerNotFound) as exc:
        resolve_compiler(target="rvv")
    msg = str(exc.value)
    assert "riscv64-linux-gnu-gcc" in msg and "clang-16" in msg and "RVVKIT_COMPILER" in msg


def test_host_compiler_rejected_for_rvv(fakebin, monkeypatch):
    install(fakebin, ["gcc"])
    monkeypatch.setenv("RVVKIT_COMPILER", "gcc")
    with pytest.raises(CompilerNotFound, match="riscv64"):
        resolve_compiler(target="rvv")


def test_unknown_target():
    with pytest.raises(ValueError):
        resolve_compiler(target="gpu")


def test_wrapper_prefix_and_probe_memo(fakebin):
    install(fakebin, ["gcc"])
    wrapper = fakebin / "ccache"
    wrapper.write_text('#!/bin/sh\nexec "$@"\n')
    wrapper.chmod(0o755)
    comp = resolve_compiler("ccache gcc")
    assert comp.argv == ("ccache", "gcc") and comp.path == str(fakebin / "gcc")
    assert comp.family == "gcc" and comp.machine == HOST_TRIPLE
    calls = (fakebin / "calls.log").read_text().count("--version")
    resolve_compiler("ccache gcc")
    assert (fakebin / "calls.log").read_text().count("--version") == calls  # memoised


def test_identity_covers_path_version_argv(fakebin):
    install(fakebin, ["gcc"])
    comp = resolve_compiler("gcc")
    ident = comp.identity()
    assert comp.path in ident and comp.version in ident and "gcc" in ident
    other = Compiler(**{**comp.__dict__, "version": "gcc 13"})
    assert other.identity() != ident


def test_compiler_string_that_cannot_be_split(fakebin, monkeypatch):
    monkeypatch.setenv("RVVKIT_COMPILER", "gcc 'oops")
    with pytest.raises(CompilerNotFound, match="cannot be split into words"):
        resolve_compiler()


def test_relative_compiler_path_is_made_absolute(fakebin, monkeypatch):
    """Compiles run in a scratch directory, so ./cc must name this directory's cc."""
    install(fakebin, ["gcc"])
    monkeypatch.chdir(fakebin)
    assert split_compiler("./gcc -v")[0] == str(fakebin / "gcc")
    monkeypatch.setenv("RVVKIT_COMPILER", "./gcc")
    assert resolve_compiler().argv[0] == str(fakebin / "gcc")


@pytest.mark.parametrize("value", ["abc", "0", "-3", "nan"])
def test_compile_timeout_must_be_positive_seconds(monkeypatch, value):
    from rvvkit.errors import RvvkitError
    from rvvkit.jit.build import compile_timeout
    monkeypatch.setenv("RVVKIT_COMPILE_TIMEOUT", value)
    with pytest.raises(RvvkitError, match="RVVKIT_COMPILE_TIMEOUT"):
        compile_timeout()
    monkeypatch.setenv("RVVKIT_COMPILE_TIMEOUT", "2.5")
    assert compile_timeout() == 2.5
