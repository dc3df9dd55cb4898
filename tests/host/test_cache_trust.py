"""The compile cache runs only what rvvkit built (rvvkit/jit/cache_trust.py): a private
directory, a digest checked before an object is returned for dlopen, leftovers of killed builds
swept, and a killed rvvkit takes its compiler down with it."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from rvvkit.jit import cache, cache_trust, compile_flags, compile_source, resolve_compiler
from rvvkit.jit.cache_trust import CacheError

ADD = "int add(int a, int b) { return a + b; }\n"
# A constructor that leaves a mark: planted code that must never run.
PLANT = textwrap.dedent("""\
    #include <stdio.h>
    __attribute__((constructor)) static void planted(void) {
        FILE *f = fopen("%s", "w"); if (f) { fputs("ran", f); fclose(f); } }
    int add(int a, int b) { return a - b; }
    """)


@pytest.fixture
def root(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("RVVKIT_CACHE_DIR", str(path))
    monkeypatch.delenv("RVVKIT_NO_CACHE", raising=False)
    monkeypatch.setattr(cache_trust, "_checked", set())
    monkeypatch.setattr(cache_trust, "_swept", set())
    return path


def gcc():
    comp = resolve_compiler("gcc")
    return comp, compile_flags(comp)


def call_add(so):
    from cffi import FFI
    ffi = FFI()
    ffi.cdef("int add(int a, int b);")
    return ffi.dlopen(str(so)).add(2, 40)


def test_new_cache_is_private(root):
    so = compile_source(ADD, *gcc())
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert cache_trust.verified(so) and call_add(so) == 42


def test_cache_writable_by_others_is_refused(root):
    root.mkdir()
    os.chmod(root, 0o777)
    with pytest.raises(CacheError, match="writable by others") as e:
        compile_source(ADD, *gcc())
    assert str(root) in str(e.value) and "chmod 700" in str(e.value)


def test_readable_cache_is_tightened_not_refused(root):
    root.mkdir()
    os.chmod(root, 0o755)
    compile_source(ADD, *gcc())
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="changing a directory's owner needs root")
def test_cache_owned_by_another_user_is_refused(root):
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    with pytest.raises(CacheError, match="owned by uid 65534"):
        compile_source(ADD, *gcc())


def _plant(tmp_path, comp, flags):
    marker = tmp_path / "planted-ran"
    evil = compile_source(PLANT % marker, comp, flags, use_cache=False)
    return marker, evil.read_bytes()


def test_object_replaced_in_place_is_rebuilt_not_loaded(root, tmp_path):
    comp, flags = gcc()
    so = compile_source(ADD, comp, flags)
    marker, evil = _plant(tmp_path, comp, flags)
    so.write_bytes(evil)  # same path, the old digest
    again = compile_source(ADD, comp, flags)
    assert cache_trust.verified(again) and call_add(again) == 42
    assert not marker.exists()


def test_planted_entry_without_digest_is_rebuilt_not_loaded(root, tmp_path):
    comp, flags = gcc()
    key = cache.cache_key(ADD, comp, flags)
    marker, evil = _plant(tmp_path, comp, flags)
    entry = cache.entry_dir(key)
    entry.mkdir(parents=True)
    (entry / "model.so").write_bytes(evil)
    so = compile_source(ADD, comp, flags)
    assert call_add(so) == 42 and not marker.exists()


def test_leftovers_of_dead_builds_are_swept(root):
    comp, flags = gcc()
    compile_source(ADD, comp, flags)
    prefix = next(p for p in root.iterdir() if len(p.name) == 2)
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = prefix / f".tmp-0123456789abcdef-{dead.pid}-abc"
    live = prefix / f".tmp-0123456789abcdef-{os.getpid()}-def"
    trash = prefix / ".trash-0123456789abcdef-1234"
    for d in (gone, live, trash):
        (d / "sub").mkdir(parents=True)
    cache_trust._swept.clear()
    compile_source(ADD.replace("a + b", "b + a"), comp, flags)  # a miss: builds, sweeps
    assert not gone.exists() and not trash.exists() and live.exists()


def test_killed_rvvkit_takes_its_compiler_down(root, tmp_path):
    """SIGKILL gives rvvkit no chance to clean up: the compiler's watcher notices the closed
    pipe and kills the compiler's whole process group."""
    pidfile = tmp_path / "cc.pid"
    fake = tmp_path / "slowcc"
    fake.write_text(f'#!/bin/sh\ncase "$*" in *model.c*) echo $$ > {pidfile}; exec sleep 60;; '
                    'esac\nexec gcc "$@"\n')
    fake.chmod(0o755)
    script = ("from rvvkit.jit import compile_flags, compile_source, resolve_compiler\n"
              f"c = resolve_compiler({str(fake)!r})\n"
              "compile_source('int x;', c, compile_flags(c))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env=dict(os.environ))
    deadline = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, "compiler never started"
        time.sleep(0.05)
    cc = int(pidfile.read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(cc) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(cc), "the compiler outlived rvvkit"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def test_compiler_writing_a_garbage_object_is_one_line_error(root, tmp_path):
    """A compiler that exits 0 having written an ELF-looking but unloadable object: rebuilt
    once (a bad cache entry), then reported as one line naming the object and the compiler."""
    bad = tmp_path / "badcc"
    bad.write_text('#!/bin/sh\ncase "$*" in *model.c*)\n  prev=""; for a in "$@"; do '
                   '[ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
                   '  printf "\\177ELFgarbage" > "$out"; exit 0;;\nesac\nexec gcc "$@"\n')
    bad.chmod(0o755)
    from conftest import make_model
    from onnx import helper
    import rvvkit
    from rvvkit.errors import ExecutionError
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 4))],
                       [("y", (1, 4))], {})
    with pytest.raises(ExecutionError, match="cannot be loaded") as e:
        rvvkit.load(rvvkit.build(model, cuda=False), on="host", compiler=str(bad))
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
