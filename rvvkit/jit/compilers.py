"""Find the C compiler for a target and build its flags.

Choice, first match wins: explicit argument, $RVVKIT_COMPILER, $TVM_RVV_COMPILER (kept for users
of the TVM-based flow), then a per-target default list. A compiler string is split with shlex, so
"clang-16 --target=riscv64-linux-gnu" or "ccache gcc" work; "zig"/"ziglang" means the PyPI
ziglang module. Commands are always argv lists, never shell strings. The default lists and
the per-family flags are data: toolchain/targets/*.toml (read through .targets).
"""
from __future__ import annotations

import importlib.util
import os
import platform
import shlex
import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..errors import CompilerNotFound
from . import targets
from .isa import profile as isa_profile
from .probe import compiler_exe_index, print_path, probe, target_from_argv

TARGETS = ("host", "rvv")
RISCV_TRIPLE = targets.riscv().triple
ENV_VARS = ("RVVKIT_COMPILER", "TVM_RVV_COMPILER")


@dataclass(frozen=True)
class Compiler:
    argv: Tuple[str, ...]   # command prefix, e.g. ("gcc",) or ("clang-16", "--target=...")
    path: str               # realpath of the compiler executable (for the cache key)
    version: str            # first line of `--version`
    family: str             # "gcc" | "clang" | "zig"
    machine: str            # `-dumpmachine` (the --target for a cross clang)
    is_cxx: bool            # a C++ driver: the generated .c is compiled as C++

    @property
    def is_riscv(self) -> bool:
        # The TVM_RVV_COMPILER contract: a name containing "riscv64" is enough.
        return "riscv64" in self.machine or any("riscv64" in a for a in self.argv)

    @property
    def has_target_option(self) -> bool:
        return target_from_argv(self.argv) is not None

    def identity(self) -> str:
        """What makes two compilers produce the same object: for cache keys."""
        return "\n".join((self.path, self.version, shlex.join(self.argv)))


def host_is_riscv() -> bool:
    return platform.machine().lower().startswith("riscv64")


def _ziglang_available() -> bool:
    return importlib.util.find_spec("ziglang") is not None


def split_compiler(spec: str) -> Tuple[str, ...]:
    """Turn a user string into argv; "zig [cc|c++] ..." becomes `python -m ziglang cc ...`; a
    relative path (./cc) is made absolute, since compiles run in another directory."""
    try:
        argv = shlex.split(spec)
    except ValueError as exc:
        raise CompilerNotFound(f"compiler string {spec!r} cannot be split into words: "
                               f"{exc}") from None
    if argv and os.sep in argv[0] and not os.path.isabs(argv[0]):
        argv[0] = os.path.abspath(argv[0])
    if not argv:
        raise CompilerNotFound("empty compiler string")
    if argv[0] in ("zig", "ziglang"):
        rest = argv[1:]
        if not rest or rest[0] not in ("cc", "c++"):
            rest = ["cc"] + rest
        return (sys.executable, "-m", "ziglang", *rest)
    return tuple(argv)


def _family(argv: Tuple[str, ...], version_text: str) -> str:
    if "ziglang" in argv or os.path.basename(argv[compiler_exe_index(argv)]) == "zig":
        return "zig"
    if "clang" in version_text.lower():
        return "clang"
    return "gcc"


def _is_cxx(argv: Tuple[str, ...], path: str, family: str) -> bool:
    if family == "zig":
        return "c++" in argv
    exe = os.path.basename(argv[compiler_exe_index(argv)])
    # clang++ is a symlink to clang, so the name used matters; g++ resolves to ...-g++-12.
    return "++" in exe or "++" in os.path.basename(path)


def compiler_from_answers(argv: Sequence[str], path: str, version_text: str,
                          machine: str) -> Compiler:
    """A Compiler from what a probe answered (resolved path, `--version`, `-dumpmachine`),
    wherever it ran: on this machine, or on a board over SSH (rvvkit.runtime.remote)."""
    argv = tuple(argv)
    lines = [ln.strip() for ln in version_text.splitlines() if ln.strip()]
    family = _family(argv, version_text)
    return Compiler(argv=argv, path=path, version=lines[0] if lines else "", family=family,
                    machine=machine or target_from_argv(argv) or "",
                    is_cxx=_is_cxx(argv, path, family))


def _make(argv: Tuple[str, ...], target: str) -> Tuple[Optional[Compiler], str]:
    """Probe argv; return (Compiler, "") or (None, reason)."""
    res = probe(argv)
    if res.error:
        return None, res.error
    family = _family(argv, res.version_text)
    if target == "rvv" and targets.riscv().family_flags(family).names_target and \
            target_from_argv(argv) is None:
        # clang and zig are cross compilers by nature; point them at riscv64.
        return _make(argv + (f"--target={RISCV_TRIPLE}",), target)
    return compiler_from_answers(argv, res.path, res.version_text, res.machine), ""


def _mismatch(comp: Compiler, target: str) -> str:
    want_riscv = target == "rvv" or host_is_riscv()
    if comp.is_riscv == want_riscv:
        return ""
    what = "riscv64" if want_riscv else platform.machine()
    return (f"{shlex.join(comp.argv)} targets {comp.machine or 'an unknown machine'}, "
            f"not {what} (needed for target {target!r})")


_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64", "i386": "x86", "i686": "x86"}


def builds_for_this_machine(compiler: Compiler, machine: Optional[str] = None) -> bool:
    """True when the compiler's target architecture is the one this process runs on (or
    `machine`, a `uname -m` answer: a board's, when compiling there over SSH)."""
    arch = compiler.machine.split("-")[0].lower()
    here = (machine or platform.machine()).lower()
    return bool(arch) and _ARCH_ALIASES.get(arch, arch) == _ARCH_ALIASES.get(here, here)


def default_candidates(target: str) -> List[Tuple[str, ...]]:
    """The compilers tried in order for `target` when none is named (toolchain/targets/)."""
    if target == "host":
        names = targets.host().compilers["native"]
    else:
        lists = targets.riscv().compilers
        # On a board the native compiler is the rvv compiler; elsewhere cross compilers that
        # emit RVV come first, then the GNU cross compilers (see the data file for why).
        names = lists["native" if host_is_riscv() else "cross"] + lists["fallback"]
    zig_ok = None
    cands: List[Tuple[str, ...]] = []
    for name in names:
        if shlex.split(name)[0] in ("zig", "ziglang"):
            zig_ok = _ziglang_available() if zig_ok is None else zig_ok
            if not zig_ok:
                continue
        cands.append(split_compiler(name))
    return cands


def _cross_link_problem(comp: Compiler) -> str:
    """Why a clang found by default cannot link riscv64 programs here ("" when it can).

    Only asked of defaults: a clang is common on x86 machines that lack lld or a riscv64
    sysroot, and taking it would turn a working gcc fallback into a link error. A compiler the
    user names explicitly is taken as given. zig ships its own linker and libc."""
    if comp.family != "clang" or host_is_riscv():
        return ""
    if not print_path(comp.argv, "-print-prog-name=ld.lld"):
        return "ld.lld not found (install lld, e.g. lld-16), needed to link riscv64 code"
    if not print_path(comp.argv, "-print-file-name=crt1.o"):
        return ("no riscv64 sysroot found (install libc6-dev-riscv64-cross), needed to link "
                "riscv64 code")
    return ""


def _from_env_or_arg(explicit: Optional[str], target: str) -> Optional[Compiler]:
    sources = [("the compiler argument", explicit)]
    sources += [(f"${var}", os.environ.get(var)) for var in ENV_VARS]
    for source, value in sources:
        if value is None or not value.strip():
            continue
        comp, err = _make(split_compiler(value), target)
        if comp is None:
            raise CompilerNotFound(f"compiler {value!r} from {source} is not usable: {err}")
        bad = _mismatch(comp, target)
        if bad and source == "$TVM_RVV_COMPILER" and target == "host":
            continue  # an RVV cross compiler set for the TVM flow says nothing about the host
        if bad:
            raise CompilerNotFound(f"compiler {value!r} from {source}: {bad}")
        return comp
    return None


def resolve_compiler(explicit: Optional[str] = None, target: str = "host") -> Compiler:
    """The compiler to use for `target` ("host" or "rvv"); CompilerNotFound if none works."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    chosen = _from_env_or_arg(explicit, target)
    if chosen is not None:
        return chosen
    tried = []
    for argv in default_candidates(target):
        comp, err = _make(argv, target)
        err = err or _mismatch(comp, target)
        if not err and target == "rvv":
            err = _cross_link_problem(comp)
        if not err:
            return comp
        tried.append(f"  {shlex.join(argv)}: {err}")
    example = f"{RISCV_TRIPLE}-gcc" if target == "rvv" else "gcc"
    raise CompilerNotFound(
        f"no usable C compiler for target {target!r}; tried:\n" + "\n".join(tried) +
        f"\nInstall one, or set RVVKIT_COMPILER (or TVM_RVV_COMPILER), e.g. "
        f"RVVKIT_COMPILER={example!r}.")


# ---------------------------------------------------------------------------------------------
# Flags

def _env_cflags() -> List[str]:
    return shlex.split(os.environ.get("RVVKIT_CFLAGS", ""))


def _riscv_flags(compiler: Compiler, runs_on_riscv: bool, isa: Optional[str]) -> List[str]:
    fam = targets.riscv().family_flags(compiler.family)
    flags: List[str] = []
    if fam.names_target and not compiler.has_target_option:
        flags.append(f"--target={RISCV_TRIPLE}")
    flags += isa_profile(isa).arch_flags(compiler.family, compiler.version)
    if fam.cross_link and not runs_on_riscv and \
            not any(a.startswith("-fuse-ld=") for a in compiler.argv):
        flags += fam.cross_link  # the host's GNU ld cannot link riscv64 objects
    return flags


def native_flags(compiler: Compiler) -> List[str]:
    """The host target's tuning flags for a compiler that builds for the machine it runs on:
    `native`, then what `native_by_arch` lists for the compiler's architecture."""
    facts = targets.host().flags
    arch = compiler.machine.split("-")[0].lower()
    return list(facts["native"]) + list(facts.get("native_by_arch", {}).get(arch, []))


def compile_flags(compiler: Compiler, *, shared: bool = True, openmp: bool = False,
                  native: Optional[bool] = None, runs_on: Optional[str] = None,
                  cflags: Optional[Sequence[str]] = None, isa: Optional[str] = None
                  ) -> List[str]:
    """Flags for building generated code with `compiler`; extra flags come last to win.

    runs_on: `uname -m` of the machine the compiler runs on, when that is not this one (a
    board reached over SSH); cflags: the extra flags, by default $RVVKIT_CFLAGS of this
    process (a board passes its own, since this process's environment describes this one);
    isa: the ISA profile a riscv64 build may use (toolchain/isa/; None: plain RVV)."""
    flags = ["-O3", "-std=c++11" if compiler.is_cxx else "-std=c11"]
    if shared:
        flags += ["-fPIC", "-shared"]
    # -fno-trapping-math: generated code never reads the FP exception flags, and with them
    # kept GCC will not if-convert the range clamps of rvk_expf, which leaves every sigmoid,
    # SiLU and tanh loop scalar (the results are the same either way)
    flags += ["-fno-math-errno", "-fno-trapping-math", "-ffp-contract=fast", "-Wall", "-Wextra",
              "-DNDEBUG"]
    if compiler.is_riscv:
        on_riscv = runs_on.lower().startswith("riscv64") if runs_on else host_is_riscv()
        flags += _riscv_flags(compiler, on_riscv, isa)
    else:
        # The JIT runs where the code runs, so native is right, but only if the compiler
        # builds for this very machine (never for some other cross target).
        if native is None:
            native = builds_for_this_machine(compiler, runs_on)
        if native:
            flags += native_flags(compiler)
    if openmp:
        flags.append("-fopenmp")
    return flags + (_env_cflags() if cflags is None else list(cflags))


def describe(compiler: Compiler) -> Sequence[Tuple[str, str]]:
    """(label, value) rows for `rvvkit doctor`."""
    return [("command", shlex.join(compiler.argv)), ("path", compiler.path),
            ("version", compiler.version), ("family", compiler.family),
            ("machine", compiler.machine), ("C++ driver", str(compiler.is_cxx)),
            ("riscv64", str(compiler.is_riscv))]
