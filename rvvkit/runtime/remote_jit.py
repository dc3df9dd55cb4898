"""The JIT on a board: find the board's compiler, build its flags with the local JIT's rules
(rvvkit.jit.compilers, fed with the board's answers), compile there, cache there by content.

Board cache layout, under the board's work dir: runner-<key>/{rvvkit_runner, runner.c, cmd.txt}
and kernels-<key>/{model.so, model.c, cmd.txt}; <key> is rvvkit.jit's cache key (source,
compiler identity, flags, schema), so the runner is built once per board and compiler, and a
model's kernels once per content. An entry is built in a temporary dir and renamed into place
(a rename that never replaces), so a concurrent session sees a whole entry or none. A hit
touches the entry and each new entry is followed by least-recently-used eviction down to the
board's cache_size (rvvkit.runtime.board_cache)."""
from __future__ import annotations

import logging
import shlex
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

from ..errors import CompileError, CompilerNotFound
from ..jit import build_command, cache_key, compile_timeout
from ..jit.cache import artifact_name
from ..jit.diagnostics import source_excerpt
from ..jit.probe import compiler_exe_index, target_from_argv
from ..jit import targets
from ..jit.compilers import Compiler, compile_flags, compiler_from_answers
from . import board_cache
from .remote import HOUSEKEEPING_TIMEOUT_S, Board

log = logging.getLogger("rvvkit.ssh")
DEFAULT_BOARD_COMPILER = "cc"
_SEP = "@@rvvkit@@"


def probe_compiler(board: Board, argv: Sequence[str]) -> Tuple[Optional[Compiler], str]:
    """(Compiler, "") for argv on the board, or (None, why not): one round trip asking for
    the resolved path, `--version` and `-dumpmachine`, as rvvkit.jit.probe does locally."""
    argv = tuple(argv)
    exe = argv[compiler_exe_index(argv)]
    cmd = shlex.join(argv)
    res = board.sh(f"p=$(command -v {shlex.quote(exe)}) || exit 127\n"
                   f'readlink -f "$p" 2>/dev/null || echo "$p"\necho {_SEP}\n'
                   f"LC_ALL=C {cmd} --version 2>&1 || exit 126\necho {_SEP}\n"
                   f"LC_ALL=C {cmd} -dumpmachine 2>/dev/null || true",
                   timeout=HOUSEKEEPING_TIMEOUT_S, what=f"probing compiler {cmd}")
    if res.rc == 127:
        return None, f"{exe!r} not found on the board (nor on its PATH)"
    parts = res.out.split(_SEP + "\n")
    if res.rc == 126 or len(parts) != 3:
        return None, f"`{cmd} --version` failed: {res.out.strip()[-300:]}"
    path, version_text, machine = (p.strip() for p in parts)
    return compiler_from_answers(argv, path, version_text, machine.splitlines()[0]
                                 if machine else ""), ""


def resolve_board_compiler(board: Board, explicit: Optional[str] = None) -> Compiler:
    """The compiler for the board, first set wins: `explicit`, the board's `compiler` option,
    the board's $RVVKIT_COMPILER, $TVM_RVV_COMPILER, then cc. It must build for what the board
    runs (board.arch); a clang or zig for a riscv64 board gets --target like the local JIT."""
    sources = [("the compiler argument", explicit),
               (f"the compiler option of {board.label}", board.cfg.compiler),
               ("$RVVKIT_COMPILER on the board", board.env.get("RVVKIT_COMPILER")),
               ("$TVM_RVV_COMPILER on the board", board.env.get("TVM_RVV_COMPILER")),
               ("the default", DEFAULT_BOARD_COMPILER)]
    source, spec = next((s, v) for s, v in sources if v and v.strip())
    argv = tuple(shlex.split(spec))
    comp, err = probe_compiler(board, argv)
    rv = targets.riscv()
    want_riscv = board.arch.lower().startswith(rv.arch)
    if comp is not None and want_riscv and rv.family_flags(comp.family).names_target \
            and target_from_argv(argv) is None:
        # What _make does locally, without a second round trip: point the cross compiler at
        # riscv64 (its -dumpmachine then names riscv64 too).
        comp = replace(comp, argv=argv + (f"--target={rv.triple}",), machine=rv.triple)
    if comp is None:
        raise CompilerNotFound(
            f"no usable compiler on {board.label}: {spec!r} (from {source}): {err}. Install "
            f"one on the board, or name it: compiler = \"...\" in the [{board.cfg.alias}] "
            f"table of the boards file, ?compiler=... in the address, or RVVKIT_COMPILER in "
            "the board's environment")
    if comp.is_riscv != want_riscv:
        raise CompilerNotFound(
            f"compiler {spec!r} on {board.label} (from {source}) builds for "
            f"{comp.machine or 'an unknown machine'}, but the board runs {board.arch} programs"
            + ("" if want_riscv else " (set arch = \"riscv64\" or a qemu-riscv64 wrapper for "
               "an emulated board)"))
    return comp


def board_flags(board: Board, compiler: Compiler, *, shared: bool = True) -> List[str]:
    """compile_flags as the local JIT makes them, for the board's machine; extra flags are the
    board's $RVVKIT_CFLAGS, then its cflags option (last, so they win)."""
    extra = shlex.split(board.env.get("RVVKIT_CFLAGS", "")) + list(board.cfg.cflags)
    return compile_flags(compiler, shared=shared, runs_on=board.machine, cflags=extra)


def build_on_board(board: Board, source: str, compiler: Compiler, flags: Sequence[str], *,
                   name: str, kind: str, link_flags: Sequence[str] = (), use_cache: bool = True,
                   scratch: str = "") -> Tuple[str, bool]:
    """(path on the board of the built object, whether it came from the board's cache).

    Without the cache the build lands in `scratch` (a session's temporary dir, removed with
    it). A failing compile raises CompileError with the command and the board's stderr."""
    key = cache_key(source, compiler, flags, name=name, kind=kind, link_flags=link_flags)
    out_name = artifact_name(name, kind)
    final = f"{board.root}/{'runner' if kind == 'exe' else 'kernels'}-{key[:32]}"
    if use_cache and board_cache.lookup(board, final, out_name):
        log.info("%s: %s cache hit (%s)", board.label, name, final)
        return f"{final}/{out_name}", True
    if use_cache:
        build = board.mktemp(f".build-{key[:12]}-")
    else:
        if not scratch:
            raise ValueError("use_cache=False needs a scratch directory")
        build = f"{scratch}/build-{name}-{key[:12]}"
        board.mkdir(build)
    moved = False
    try:
        cmd = build_command(compiler, flags, f"{name}.c", out_name, kind,
                            link_flags=link_flags)
        board.put(source.encode("utf-8"), f"{build}/{name}.c")
        board.put((shlex.join(cmd) + "\n").encode(), f"{build}/cmd.txt")
        timeout = board.cfg.compile_timeout or compile_timeout()
        res = board.sh(f"cd {shlex.quote(build)} && LC_ALL=C {shlex.join(cmd)}",
                       timeout=timeout, what=f"compiling {name}")
        if res.rc != 0 or board.size(f"{build}/{out_name}") <= 0:
            text = (res.out + res.err).strip() or f"exit code {res.rc} but no {out_name}"
            raise CompileError([f"[{board.label}]", "cd", build, "&&", *cmd], res.rc, text,
                               excerpt=source_excerpt(text, source, f"{name}.c"))
        if not use_cache:
            return f"{build}/{out_name}", False
        # False: another session published the same key first; its entry is as good as ours.
        moved = board.rename(build, final)
        if not moved and board.size(f"{final}/{out_name}") <= 0:
            raise CompileError([f"[{board.label}]", "mv", build, final], 1,
                               f"cannot publish the build into {final}")
        log.info("%s: built %s into %s", board.label, name, final)
        board.cache_in_use.append(final)
        if moved:
            board_cache.evict(board)
        return f"{final}/{out_name}", False
    finally:
        if use_cache and not moved:
            board.remove(build)  # a failed build, or the loser of a publishing race
