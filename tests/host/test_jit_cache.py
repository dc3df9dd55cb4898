"""Compile, cache and load real code with the compilers installed on this machine."""
import os
import shutil
import subprocess
import threading

import pytest
from cffi import FFI

from rvvkit.errors import CompileError
from rvvkit.jit import build
from rvvkit.jit import (Compiler, cache_key, compile_flags, compile_many, compile_source, evict,
                        resolve_compiler)

ADD = "int add(int a, int b) { return a + b; }\n"
BAD = "int add(int a, int b)\n{\n    int c = a +;\n    return c;\n}\n"
pytestmark = pytest.mark.usefixtures("private_jit_cache")  # every test: own cache
needs = lambda exe: pytest.mark.skipif(shutil.which(exe) is None, reason=f"{exe} not installed")


def call_add(so_path, a=2, b=40):
    ffi = FFI()
    ffi.cdef("int add(int a, int b);")
    lib = ffi.dlopen(str(so_path))
    return lib.add(a, b)


def host(explicit="gcc"):
    comp = resolve_compiler(explicit)
    return comp, compile_flags(comp)


@needs("gcc")
def test_compile_load_call_and_cache_hit(private_jit_cache, compile_counter):
    comp, flags = host()
    so = compile_source(ADD, comp, flags)
    assert call_add(so) == 42
    assert so.is_relative_to(private_jit_cache) and so.parent.name == cache_key(ADD, comp, flags)
    entry = sorted(p.name for p in so.parent.iterdir())
    assert entry == ["cmd.txt", "model.c", "model.so", "model.so.sha256"]
    assert (so.parent / "model.c").read_text() == ADD
    assert "model.c" in (so.parent / "cmd.txt").read_text()
    mtime = so.stat().st_mtime_ns
    assert compile_source(ADD, comp, flags) == so
    assert len(compile_counter) == 1 and so.stat().st_mtime_ns == mtime
    assert not [p for p in so.parent.parent.iterdir() if p.name.startswith(".")]  # no temp left


@needs("gcc")
def test_no_cache_env_bypasses(private_jit_cache, monkeypatch, compile_counter):
    comp, flags = host()
    monkeypatch.setenv("RVVKIT_NO_CACHE", "1")
    a = compile_source(ADD, comp, flags)
    b = compile_source(ADD, comp, flags)
    assert a != b and len(compile_counter) == 2 and not private_jit_cache.exists()
    assert (a.parent / "model.c").exists() and call_add(b) == 42


@needs("gcc")
def test_key_depends_on_source_flags_name_kind():
    comp, flags = host()
    key = cache_key(ADD, comp, flags)
    assert key == cache_key(ADD, comp, list(flags))
    assert key != cache_key(ADD + "\n", comp, flags)
    assert key != cache_key(ADD, comp, flags + ["-DX"])
    assert key != cache_key(ADD, comp, flags, name="other")
    assert key != cache_key(ADD, comp, flags, kind="exe")


@needs("gcc")
def test_syntax_error(private_jit_cache):
    comp, flags = host()
    with pytest.raises(CompileError) as exc:
        compile_source(BAD, comp, flags, name="broken")
    err = exc.value
    assert err.returncode != 0 and "error" in err.stderr and "broken.c:3" in err.stderr
    assert os.path.exists(err.source_path) and open(err.source_path).read() == BAD
    assert str(private_jit_cache / "failed") in err.source_path
    assert ">" in err.excerpt and "int c = a +;" in err.excerpt and "3 |" in err.excerpt
    text = str(err)
    assert "gcc" in text and "broken.c" in text and "int c = a +;" in text


@needs("gcc")
def test_syntax_error_without_cache_keeps_source(monkeypatch):
    monkeypatch.setenv("RVVKIT_NO_CACHE", "yes")
    comp, flags = host()
    with pytest.raises(CompileError) as exc:
        compile_source(BAD, comp, flags)
    assert os.path.exists(exc.value.source_path)


@needs("g++")
def test_gxx_compiles_c_as_cxx():
    comp, flags = host("g++")
    src = 'extern "C" int add(int a, int b);\nint add(int a, int b) { return a + b; }\n'
    assert comp.is_cxx and call_add(compile_source(src, comp, flags)) == 42


@needs("clang-16")
@pytest.mark.parametrize("name", ["clang-16", "clang++-16"])
def test_clang(name):
    comp, flags = host(name)
    src = ADD if not comp.is_cxx else 'extern "C" ' + ADD
    so = compile_source(src, comp, flags)
    assert call_add(so, 1, 2) == 3
    assert not (so.parent / "stderr.txt").exists()  # warning clean


def elf_machine(path):
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    return int.from_bytes(head[18:20], "little")


@needs("riscv64-linux-gnu-gcc")
def test_cross_compile_riscv_gcc():
    comp = resolve_compiler("riscv64-linux-gnu-gcc", target="rvv")
    so = compile_source(ADD, comp, compile_flags(comp))
    assert elf_machine(so) == 243  # EM_RISCV


@needs("clang-16")
@needs("ld.lld-16")
def test_cross_compile_riscv_clang_exe():
    comp = resolve_compiler("clang-16", target="rvv")
    src = "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }\n"
    exe = compile_source(src, comp, compile_flags(comp, shared=False), kind="exe")
    assert elf_machine(exe) == 243 and exe.name == "model"


@needs("gcc")
def test_host_exe_with_extra_source(tmp_path):
    comp, flags = host()
    extra = tmp_path / "add.c"
    extra.write_text(ADD)
    main = "int add(int a, int b);\nint main(void) { return add(40, 2); }\n"
    exe = compile_source(main, comp, flags, name="runner", kind="exe", extra_sources=[extra])
    assert subprocess.run([str(exe)]).returncode == 42


@needs("gcc")
def test_corrupt_entry_is_rebuilt(compile_counter):
    comp, flags = host()
    so = compile_source(ADD, comp, flags)
    so.write_bytes(b"")
    again = compile_source(ADD, comp, flags)
    assert again == so and so.stat().st_size > 0 and len(compile_counter) == 2
    assert call_add(again) == 42
    evict(again)
    assert not so.exists()
    assert compile_source(ADD, comp, flags) == so and len(compile_counter) == 3


@needs("gcc")
def test_compile_many_parallel(monkeypatch):
    comp, flags = host()
    active, peak, lock = [0], [0], threading.Lock()
    real = build.run_compiler

    def tracking(cmd, cwd, timeout):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return real(cmd, cwd, timeout)
        finally:
            with lock:
                active[0] -= 1
    monkeypatch.setattr(build, "run_compiler", tracking)
    srcs = [f"int add(int a, int b) {{ return a + b + {i}; }}\n" for i in range(4)]
    paths = compile_many([(s, comp, flags, f"unit{i}") for i, s in enumerate(srcs)],
                         max_workers=4)
    assert [call_add(p, 0, 0) for p in paths] == [0, 1, 2, 3]
    assert peak[0] > 1
    with pytest.raises(CompileError):
        compile_many([(ADD, comp, flags), (BAD, comp, flags, "bad")])


@needs("gcc")
def test_same_unit_from_threads_is_one_entry():
    comp, flags = host()
    paths = compile_many([(ADD, comp, flags)] * 4, max_workers=4)
    assert len(set(paths)) == 1 and call_add(paths[0]) == 42
    leftovers = [p for p in paths[0].parent.parent.iterdir() if p.name.startswith(".")]
    assert not leftovers


def test_timeout_kills_compiler(tmp_path):
    slow = tmp_path / "slowcc"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    comp = Compiler(argv=(str(slow),), path=str(slow), version="slow 1", family="gcc",
                          machine="x86_64-linux-gnu", is_cxx=False)
    with pytest.raises(CompileError, match="timed out") as exc:
        compile_source(ADD, comp, [], timeout=0.5)
    assert os.path.exists(exc.value.source_path)
