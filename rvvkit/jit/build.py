"""Compile one generated translation unit (or several in parallel) through the cache."""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from .. import children
from ..errors import CompileError, CompilerNotFound, RvvkitError
from . import cache
from . import cache_trust as trust
from .diagnostics import source_excerpt
from .compilers import Compiler

log = logging.getLogger("rvvkit.jit")

DEFAULT_TIMEOUT_S = 600.0
PathLike = Union[str, os.PathLike]


def compile_timeout() -> float:
    """Seconds one compiler run may take: $RVVKIT_COMPILE_TIMEOUT, else 600."""
    value = os.environ.get("RVVKIT_COMPILE_TIMEOUT", "").strip()
    try:
        seconds = float(value) if value else DEFAULT_TIMEOUT_S
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise RvvkitError(f"$RVVKIT_COMPILE_TIMEOUT={value!r} is not a positive number of "
                          "seconds")
    return seconds


def _flags_for_kind(flags: Sequence[str], kind: str, compiler: Compiler) -> List[str]:
    # kind decides the linkage, whatever flags the caller built: an executable must not get
    # -shared, a shared object must get it (and -fPIC); -fPIC in an executable is harmless.
    # nvcc rejects a bare -fPIC: it reaches the host compiler through -Xcompiler (nvcc_flags).
    out = [f for f in flags if not (kind == "exe" and f == "-shared")]
    if kind == "so":
        needed = ("-shared",) if compiler.family == "nvcc" else ("-fPIC", "-shared")
        out += [f for f in needed if f not in out]
    return out


def build_command(compiler: Compiler, flags: Sequence[str], src_name: str, out_name: str,
                  kind: str = "so", extra_sources: Iterable[PathLike] = (),
                  link_flags: Sequence[str] = ()) -> List[str]:
    """The argv that builds src_name into out_name (both relative to the build dir)."""
    cmd = list(compiler.argv) + _flags_for_kind(flags, kind, compiler)
    extras = [os.path.abspath(p) for p in extra_sources]
    if compiler.is_cxx and compiler.family != "gcc":
        # g++ compiles .c as C++ by itself; clang++ / zig c++ do too but warn that it is
        # deprecated, so say it explicitly, then reset for the extra inputs that follow.
        cmd += ["-x", "c++", src_name] + (["-x", "none"] if extras else [])
    else:
        cmd.append(src_name)
    cmd += extras
    # -lm last: generated code calls expf/tanhf/..., and link order matters for archives.
    return cmd + ["-o", out_name, *link_flags, "-lm"]


def run_compiler(cmd: Sequence[str], cwd: Path, timeout: float) -> Tuple[Optional[int], str]:
    """Run cmd; return (returncode, diagnostics), returncode None when it timed out. The
    compiler ends with rvvkit, cc1 and ld with it (rvvkit.children)."""
    env = dict(os.environ, LC_ALL="C")  # diagnostics are parsed: keep them untranslated
    if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
        raise CompilerNotFound(f"cannot run {cmd[0]!r}: not found")
    try:
        proc = children.run(cmd, cwd=cwd, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        text = (exc.stderr or b"").decode("utf-8", "replace")
        return None, (f"compiler timed out after {timeout:g} s and was killed "
                      f"(raise RVVKIT_COMPILE_TIMEOUT to allow longer)\n{text}")
    except OSError as exc:
        raise CompilerNotFound(f"cannot run {cmd[0]!r}: {exc}") from exc
    text = proc.stderr.decode("utf-8", "replace")
    if proc.stdout.strip():  # a few drivers print diagnostics on stdout
        text = proc.stdout.decode("utf-8", "replace") + text
    if proc.returncode == 127 and "not found" in text:  # a wrapper could not exec it
        raise CompilerNotFound(f"cannot run {cmd[0]!r}: {text.strip()}")
    return proc.returncode, text


def _build(build_dir: Path, source: str, compiler: Compiler, flags: Sequence[str], name: str,
           kind: str, extra_sources, link_flags, timeout: float,
           suffix: str) -> Tuple[Optional[int], str, list]:
    src_name, out_name = f"{name}{suffix}", cache.artifact_name(name, kind)
    (build_dir / src_name).write_text(source, encoding="utf-8")
    cmd = build_command(compiler, flags, src_name, out_name, kind, extra_sources, link_flags)
    # Relative paths in cmd.txt: the command reproduces the build when run in the entry dir.
    (build_dir / "cmd.txt").write_text(shlex.join(cmd) + "\n", encoding="utf-8")
    rc, text = run_compiler(cmd, build_dir, timeout)
    if rc == 0 and not cache.is_valid_artifact(build_dir / out_name):
        rc, text = -1, text + f"\ncompiler exited 0 but {out_name} is missing or empty"
    if rc == 0:
        trust.record(build_dir / out_name)
    if text.strip():
        (build_dir / "stderr.txt").write_text(text, encoding="utf-8")
    return rc, text, cmd


def compile_source(source: str, compiler: Compiler, flags: Sequence[str], *,
                   name: str = "model", kind: str = "so", use_cache: Optional[bool] = None,
                   extra_sources: Sequence[PathLike] = (), link_flags: Sequence[str] = (),
                   timeout: Optional[float] = None, suffix: str = ".c",
                   depends: Sequence[PathLike] = ()) -> Path:
    """Compile C source into a shared object (kind "so") or executable (kind "exe").

    suffix: the source file's (".cu" for CUDA: nvcc picks the language by it); depends: files
    the build reads besides the source (a header given with -include), keyed by content.
    Returns the path of the result, from the cache when an identical build exists. Raises
    CompileError with the command, stderr, the kept source and an excerpt around the error.
    """
    cache.check_name(name, kind)
    cache.check_suffix(suffix)
    use_cache = cache.cache_enabled() if use_cache is None else use_cache
    key = cache.cache_key(source, compiler, flags, name=name, kind=kind,
                          extra_sources=extra_sources, link_flags=link_flags, suffix=suffix,
                          depends=depends)
    artifact = cache.artifact_name(name, kind)
    hit = cache.lookup(key, artifact) if use_cache else None
    if hit is not None:
        return hit
    build_dir = cache.new_build_dir(key, name, use_cache)
    try:
        rc, text, cmd = _build(build_dir, source, compiler, flags, name, kind, extra_sources,
                               link_flags, compile_timeout() if timeout is None else timeout,
                               suffix)
    except BaseException:
        if use_cache:
            shutil.rmtree(build_dir, ignore_errors=True)
        raise
    if rc != 0:
        kept = cache.keep_failure(build_dir, key) if use_cache else build_dir
        raise CompileError(cmd, -1 if rc is None else rc, text,
                           source_path=str(kept / f"{name}{suffix}"),
                           excerpt=source_excerpt(text, source, f"{name}{suffix}"))
    if text.strip():
        log.warning("%s compiled with diagnostics (generated code should be warning "
                    "clean):\n%s", name, text.strip())
    return cache.publish(build_dir, key, artifact) if use_cache else build_dir / artifact


Job = Union[Tuple[str, Compiler, List[str]], Tuple[str, Compiler, List[str], str]]


def compile_many(jobs: Sequence[Job], max_workers: Optional[int] = None, *,
                 use_cache: Optional[bool] = None) -> List[Path]:
    """compile_source over (source, compiler, flags[, name]) jobs in parallel, results in job
    order. Threads suffice: the compilers are subprocesses. The first failing job (in job
    order) raises its CompileError; jobs not yet started are cancelled."""
    if not jobs:
        return []
    workers = max_workers or min(len(jobs), os.cpu_count() or 1)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rvvkit-cc")
    try:
        futures = [pool.submit(compile_source, job[0], job[1], job[2],
                               name=job[3] if len(job) > 3 else "model", use_cache=use_cache)
                   for job in jobs]
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
