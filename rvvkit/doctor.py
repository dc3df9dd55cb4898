"""`rvvkit doctor`: what this machine, or a board, offers rvvkit: compilers with versions, RVV
support (-march=rv64gcv accepted, the __riscv_v_intrinsic level, VLEN), QEMU and its counting
plugin, CUDA, cores and OS. Every check is a small shell script run in a scratch dir, here or
on the board over SSH, so both reports ask the same questions the same way. A failing check is
a row saying why, never an exception: the report is what one runs when something is broken."""
from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from typing import List, Optional, Sequence, Tuple

from . import children
from .errors import RvvkitError
from .jit import targets
from .resources import runtime_c_dir, toolchain_dir

Rows = List[Tuple[str, str]]
Section = Tuple[str, Rows]
CHECK_TIMEOUT_S = 120.0
# The compilers looked for: toolchain/targets/*.toml ([compilers] survey).
HOST_COMPILERS = tuple(targets.host().compilers["survey"])
CROSS_COMPILERS = tuple(targets.riscv().compilers["survey"])
BOARD_COMPILERS = tuple(targets.riscv().compilers["board_survey"])
VLEN_C = """#include <stdio.h>
#include <riscv_vector.h>
int main(void) { printf("%d\\n", (int)(__riscv_vsetvlmax_e8m1() * 8)); return 0; }
"""
TRIVIAL_C = "int main(void) { return 0; }\n"
# One round trip for the facts every machine has; `|| true` keeps a missing tool a blank.
FACTS_SH = """uname -srvm; (nproc 2>/dev/null || getconf _NPROCESSORS_ONLN) | head -n1
(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || echo unknown
grep -m1 '^isa' /proc/cpuinfo 2>/dev/null | sed 's/^isa[[:space:]]*:[[:space:]]*//' || true"""


class _Local:
    """Scratch dir and shell on this machine."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rvvkit-doctor-")

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.dir, name), "w", encoding="utf-8") as fh:
            fh.write(text)

    def sh(self, script: str) -> Tuple[int, str]:
        try:
            proc = children.run(["sh", "-c", script], cwd=self.dir, timeout=CHECK_TIMEOUT_S,
                                merge_stderr=True)
        except subprocess.TimeoutExpired:
            return 124, f"timed out after {CHECK_TIMEOUT_S:g} s"
        return proc.returncode, proc.stdout.decode("utf-8", "replace").strip()

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class _OnBoard:
    """Scratch dir and shell on a board (removed at close)."""

    def __init__(self, board):
        self.board, self.dir = board, board.mktemp("doctor-")

    def write(self, name: str, text: str) -> None:
        self.board.put(text.encode("utf-8"), f"{self.dir}/{name}")

    def sh(self, script: str) -> Tuple[int, str]:
        res = self.board.sh(f"cd {shlex.quote(self.dir)} && {{ {script}\n}}",
                            timeout=CHECK_TIMEOUT_S, what="a doctor check")
        return res.rc, (res.out + res.err).strip()

    def close(self) -> None:
        self.board.remove(self.dir)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def _facts(shell) -> Rows:
    _, out = shell.sh(FACTS_SH)
    lines = out.splitlines() + [""] * 4
    rows = [("system", lines[0]), ("cores", lines[1]), ("OS", lines[2])]
    return rows + ([("ISA (/proc/cpuinfo)", lines[3])] if lines[3] else [])


def _intrinsic_level(value: str) -> str:
    names = targets.riscv().intrinsics
    return f"{value} ({names[value]})" if value in names else value


def rvv_checks(shell, compiler, flags: Sequence[str], wrapper: str = "",
               run_vlen: bool = True) -> Rows:
    """Rows for one riscv64 compiler: does it accept (compile and link) -march=rv64gcv, what
    __riscv_v_intrinsic it defines, and the VLEN a program measures (run behind `wrapper`)."""
    from .jit import build_command
    cmd = list(compiler.argv) + [f for f in flags if f not in ("-shared", "-fPIC")]
    rv_flags = " ".join(f for f in flags if f.startswith(("-march", "-mabi", "-mcpu", "--t")))
    shell.write("t.c", TRIVIAL_C)
    rc, out = shell.sh(f"LC_ALL=C {shlex.join(cmd)} t.c -o t")
    rows = [("-march=rv64gcv", f"accepted ({rv_flags}: compiles and links)" if rc == 0 else
             f"REJECTED ({rv_flags}): {_first_line(out)[:160]}")]
    if rc != 0:
        return rows
    rc, out = shell.sh(f"LC_ALL=C {shlex.join(cmd)} -dM -E t.c 2>/dev/null | "
                       "grep '^#define __riscv_v_intrinsic '")
    level = out.split()[-1] if rc == 0 and out else ""
    rows.append(("__riscv_v_intrinsic", _intrinsic_level(level) if level else
                 "not defined (no RVV intrinsics: scalar code paths)"))
    if level and run_vlen:
        shell.write("v.c", VLEN_C)
        build = shlex.join(build_command(compiler, [f for f in flags if f != "-shared"],
                                         "v.c", "v", kind="exe"))
        rc, out = shell.sh(f"LC_ALL=C {build} && {wrapper} ./v".strip())
        rows.append(("VLEN", f"{out.splitlines()[-1]} bits (vsetvlmax_e8m1 * 8)" if rc == 0
                     and out.splitlines() and out.splitlines()[-1].isdigit()
                     else f"could not measure: {_first_line(out)[:160]}"))
    return rows


# -- this machine ------------------------------------------------------------------------------

def _local_compilers(names: Sequence[str], target: str, shell=None) -> Rows:
    """A row per compiler found; for riscv64 ones (shell given) their RVV checks below it."""
    from .jit import compile_flags, resolve_compiler
    rows = []
    for name in names:
        if not shutil.which(name) and name != "zig":
            continue
        try:
            comp = resolve_compiler(name, target=target)
        except RvvkitError as exc:
            if target == "host" or name != "zig":
                rows.append((name, f"unusable: {_first_line(str(exc))[:120]}"))
            continue
        label = "zig cc" if comp.family == "zig" else shlex.join(comp.argv)
        rows.append((label, f"{comp.version} [{comp.machine}]"))
        if shell is not None:
            checks = rvv_checks(shell, comp, compile_flags(comp, cflags=[]), run_vlen=False)
            rows += [(f"  {k}", v) for k, v in checks]
    return rows or [("(none)", "no compiler found")]


def _tool_version(argv: Sequence[str], last: bool = False) -> Optional[str]:
    if not shutil.which(argv[0]):
        return None
    try:
        out = children.run(argv, timeout=30).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"failed: {exc}"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return (lines[-1] if last else lines[0]) if lines else "?"


def _selected(target: str) -> str:
    from .jit import resolve_compiler
    try:
        return shlex.join(resolve_compiler(target=target).argv)
    except RvvkitError as exc:
        return f"NONE: {_first_line(str(exc))}"


def local_report() -> List[Section]:
    from .version import __version__
    from .jit import cache_dir
    shell = _Local()
    try:
        sections = [("this machine", [("rvvkit", __version__),
                                      ("python", platform.python_version())] + _facts(shell))]
        rows = _local_compilers(HOST_COMPILERS, "host")
        sections.append(("host compilers", rows + [("selected (--on host)", _selected("host"))]))
        rows = _local_compilers(CROSS_COMPILERS, "rvv", shell)
        sections.append(("riscv64 cross compilers",
                         rows + [("selected (--on qemu)", _selected("rvv"))]))
        sections.append(("QEMU", _qemu_rows()))
        sections.append(("CUDA", _cuda_rows()))
        env = [(k, v) for k, v in sorted(os.environ.items())
               if k.startswith("RVVKIT_") or k == "TVM_RVV_COMPILER"]
        data = [("runtime_c", str(runtime_c_dir())), ("toolchain", str(toolchain_dir()))]
        sections.append(("rvvkit settings", [("cache", str(cache_dir()))] + data +
                         _ssh_files() + env))
        return sections
    finally:
        shell.close()


def _qemu_rows() -> Rows:
    """qemu-riscv64, sysroot, VLEN and the counting plugin: what `--on qemu` would use."""
    from .runtime import qemu as q
    qrows: Rows = []
    try:
        qemu = q.resolve_qemu()
        qrows += [("qemu-riscv64", f"{qemu}: {_tool_version([qemu, '--version'])}"),
                  ("sysroot", q.resolve_sysroot()), ("VLEN", f"{q.resolve_vlen()} bits "
                   f"(--vlen / RVVKIT_VLEN: {', '.join(map(str, q.VLENS))})")]
        from .runtime.counting.icount import plugin_path
        qrows.append(("counting plugin", f"built: {plugin_path()}"))
    except RvvkitError as exc:
        if platform.machine() == targets.riscv().arch:
            # A riscv64 machine runs RVV code itself (--on host): no QEMU is no problem.
            qrows.append(("not needed", "this machine is riscv64 (--on host runs RVV code "
                          f"natively); --on qemu: {_first_line(str(exc))}"))
        else:
            qrows.append(("problem", _first_line(str(exc))))
    return qrows


def _cuda_rows() -> Rows:
    """nvcc, GPU presence (asked of the driver, as `--on cuda` does) and the emulator's
    compiler: what `--on cuda` and `--on cuda-emu` would use here."""
    from .jit.nvcc import nvcc_version, resolve_host_cxx, resolve_nvcc
    from .runtime.cuda import cuda_available
    rows: Rows = []
    nvcc = None
    try:
        nvcc = resolve_nvcc()
        rows.append(("nvcc", f"{nvcc.path}: release {nvcc_version(nvcc)} (RVVKIT_NVCC overrides)"))
    except RvvkitError as exc:
        rows.append(("nvcc", f"not found: {_first_line(str(exc))}"))
    ok, why = cuda_available()
    gpus = _tool_version(["nvidia-smi", "-L"]) if ok else ""
    rows.append(("GPU", (gpus or why) if ok else why))
    cuda = "ready" if ok and nvcc else ("unavailable: " + (why if not ok else "no nvcc"))
    rows.append(("--on cuda", cuda))
    try:
        cxx = resolve_host_cxx()
        rows.append(("--on cuda-emu", f"ready: CPU emulator built with {cxx.path}"))
    except RvvkitError as exc:
        rows.append(("--on cuda-emu", f"unavailable: {_first_line(str(exc))}"))
    return rows


def _ssh_files() -> Rows:
    from .runtime.boards import boards_path, ssh_config_path
    rows = []
    for label, path in (("ssh config", ssh_config_path()), ("boards file", boards_path())):
        rows.append((label, f"{path}" + ("" if path.is_file() else " (absent)")))
    return rows


# -- a board -----------------------------------------------------------------------------------

def _board_compilers(board) -> Rows:
    names = " ".join(BOARD_COMPILERS)
    res = board.sh(f'for c in {names}; do p=$(command -v "$c") || continue; '
                   'printf "%s\\t%s\\n" "$c" "$(LC_ALL=C "$c" --version 2>&1 | head -n1)"; done',
                   timeout=CHECK_TIMEOUT_S, what="listing compilers")
    rows = [tuple(line.split("\t", 1)) for line in res.out.splitlines() if "\t" in line]
    return rows or [("(none)", "no compiler on PATH")]


def _preset_rows(name: str) -> Rows:
    """What a board's preset assumes (toolchain/boards/<name>.toml), labelled as assumed."""
    if not name:
        return []
    p = targets.board_preset(name)
    rows = [("preset", f"{name}: {p.get('name', name)} (assumed, not measured)"),
            ("  cpu / cores / VLEN", f"{p.get('cpu', '?')} / {p.get('cores', '?')} / "
                                     f"{p.get('vlen', '?')} bits")]
    if p.get("compilers"):
        rows.append(("  compilers", p["compilers"]))
    return rows + [("  note", note) for note in p.get("notes", [])]


def board_report(url: str) -> List[Section]:
    from .runtime.boards import board_config
    from .runtime.remote import Board
    from .runtime.remote_jit import board_flags, resolve_board_compiler
    cfg = board_config(url)
    board = Board(cfg)
    shell = None
    try:
        shell = _OnBoard(board)
        info = [(k, v) for k, v in board.describe().items()]
        sections = [(f"board {cfg.label}", info + _facts(shell) + _preset_rows(cfg.preset))]
        rows = _board_compilers(board)
        try:
            comp = resolve_board_compiler(board)
        except RvvkitError as exc:
            sections.append(("compilers on the board", rows + [("selected", f"NONE: {exc}")]))
            return sections
        rows.append(("selected", f"{shlex.join(comp.argv)}: {comp.version} [{comp.machine}]"))
        sections.append(("compilers on the board", rows))
        if comp.is_riscv:
            checks = rvv_checks(shell, comp, board_flags(board, comp), cfg.wrapper)
            if not any(k == "VLEN" for k, _ in checks):  # no intrinsics to measure it with
                isa = dict(sections[0][1]).get("ISA (/proc/cpuinfo)", "unknown")
                checks.append(("VLEN", f"not measured (no RVV intrinsics); ISA: {isa}"))
        else:
            checks = [("-march=rv64gcv", f"not applicable: {comp.machine} board")]
        sections.append((f"RVV with {shlex.join(comp.argv)}", checks))
        return sections
    finally:
        if shell is not None:
            shell.close()
        board.close()


def format_report(sections: Sequence[Section]) -> str:
    out = []
    for title, rows in sections:
        out.append(title)
        width = max((len(k) for k, _ in rows), default=0)
        out += [f"  {k.ljust(width)}  {v}" for k, v in rows]
        out.append("")
    return "\n".join(out).rstrip() + "\n"
