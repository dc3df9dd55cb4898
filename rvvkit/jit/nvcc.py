"""Build the CUDA translation unit: with nvcc for a GPU, or with the host C++ compiler against
the CPU emulator header (toolchain/cuda_emu/rvk_cuda_emu.h) for checking numerics without
one. Both go through the same cache and CompileError reporting as the C builds
(build.compile_source). nvcc's facts (candidates, flags) are in toolchain/targets/nvcc.toml.

    so = compile_cu(cu_source)                   # nvcc from $RVVKIT_NVCC / PATH / /usr/local/cuda
    so = compile_cu_emulated(cu_source)          # g++/clang++ -include rvk_cuda_emu.h

nvcc is chosen by, first match wins: an explicit argument, $RVVKIT_NVCC (a path or a command,
split like RVVKIT_COMPILER), `nvcc` on PATH, /usr/local/cuda/bin/nvcc.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from ..errors import CompilerNotFound
from ..resources import toolchain_file
from . import targets
from .build import compile_source
from .compilers import Compiler, builds_for_this_machine, native_flags, resolve_compiler, \
    split_compiler
from .pch import precompiled
from .probe import compiler_exe_index, probe

NVCC_ENV = "RVVKIT_NVCC"
NVCC_FLAGS_ENV = "RVVKIT_NVCC_FLAGS"
_NVCC = targets.nvcc()
DEFAULT_NVCC = tuple(_NVCC.compilers["native"])
BASE_FLAGS = tuple(_NVCC.flags["base"])
# Options that choose the GPU architecture: when the user's flags name one, ours steps aside.
_ARCH_OPTIONS = tuple(_NVCC.flags["arch_options"])
_RELEASE_RE = re.compile(r"release\s+([\d.]+),\s*V([\d.]+)")


# ---------------------------------------------------------------------------------------------
# nvcc

def _make_nvcc(argv: Tuple[str, ...]) -> Tuple[Optional[Compiler], str]:
    """Probe argv; (Compiler, "") when it is a working nvcc, else (None, reason)."""
    res = probe(argv)
    if res.error:
        return None, res.error
    lines = [ln.strip() for ln in res.version_text.splitlines() if ln.strip()]
    release = [ln for ln in lines if _RELEASE_RE.search(ln)]
    if not release:
        first = lines[0] if lines else "nothing"
        return None, f"not nvcc (`--version` says {first[:120]!r})"
    # nvcc answers no -dumpmachine; "cuda" as the machine puts the target in the cache key.
    # is_cxx False: nvcc picks the language by the file suffix, so build_command adds no -x.
    return Compiler(argv=argv, path=res.path, version=release[0], family="nvcc",
                    machine="cuda", is_cxx=False), ""


def resolve_nvcc(explicit: Optional[str] = None) -> Compiler:
    """The nvcc to use; CompilerNotFound (naming RVVKIT_NVCC) when there is none."""
    for source, value in (("the nvcc argument", explicit),
                          (f"${NVCC_ENV}", os.environ.get(NVCC_ENV))):
        if value is None or not value.strip():
            continue
        comp, err = _make_nvcc(split_compiler(value))
        if comp is None:
            raise CompilerNotFound(f"nvcc {value!r} from {source} is not usable: {err}")
        return comp
    tried = []
    for exe in DEFAULT_NVCC:
        comp, err = _make_nvcc((exe,))
        if comp is not None:
            return comp
        tried.append(f"  {exe}: {err}")
    raise CompilerNotFound(
        "nvcc not found; tried:\n" + "\n".join(tried) +
        f"\nInstall the CUDA toolkit, or set {NVCC_ENV} to its nvcc, e.g. "
        f"{NVCC_ENV}=/usr/local/cuda/bin/nvcc.")


def nvcc_version(comp: Compiler) -> str:
    """'13.0.88' from `Cuda compilation tools, release 13.0, V13.0.88` (else the raw line)."""
    m = _RELEASE_RE.search(comp.version)
    return m.group(2) if m else comp.version


def _env_nvcc_flags() -> List[str]:
    return shlex.split(os.environ.get(NVCC_FLAGS_ENV, ""))


def names_arch(flags: Sequence[str]) -> bool:
    return any(f == opt or f.startswith(opt + "=") for f in flags for opt in _ARCH_OPTIONS)


def nvcc_flags(*, native: bool = False, extra: Optional[Sequence[str]] = None) -> List[str]:
    """Flags for nvcc; extra (default $RVVKIT_NVCC_FLAGS) come last to win.

    native: build for the GPUs of this machine (-arch=native; pass it only when one is
    present: without one nvcc warns and falls back). Otherwise nvcc's default arch, whose PTX
    the driver compiles for newer GPUs when it loads the object."""
    extra = _env_nvcc_flags() if extra is None else list(extra)
    flags = list(BASE_FLAGS)
    if native and not names_arch(extra):
        flags += _NVCC.flags["native"]
    return flags + extra


def compile_cu(source: str, compiler: Optional[Compiler] = None,
               flags: Optional[Sequence[str]] = None, *, name: str = "model",
               use_cache: Optional[bool] = None) -> Path:
    """A CUDA translation unit as a shared object built by nvcc (cached)."""
    comp = compiler or resolve_nvcc()
    return compile_source(source, comp, nvcc_flags() if flags is None else list(flags),
                          name=name, kind="so", suffix=".cu", use_cache=use_cache)


# ---------------------------------------------------------------------------------------------
# CPU emulation: the host C++ compiler

_C_TO_CXX = {"gcc": "g++", "clang": "clang++", "cc": "c++"}
_C_DRIVER_RE = re.compile(r"^(?P<pre>.*?)(?P<drv>gcc|clang|cc)(?P<post>-[\d.]+)?$")


def _cxx_siblings(comp: Compiler) -> List[Tuple[str, ...]]:
    """The C++ driver matching a C one: gcc-12 -> g++-12, clang-16 -> clang++-16, zig cc ->
    zig c++ (wrappers such as ccache kept), then the usual names."""
    argv, out = list(comp.argv), []
    if comp.family == "zig" and "cc" in argv:
        argv[argv.index("cc")] = "c++"
        out.append(tuple(argv))
    else:
        i = compiler_exe_index(comp.argv)
        head, base = os.path.split(argv[i])
        m = _C_DRIVER_RE.match(base)
        if m:
            argv[i] = os.path.join(head, m["pre"] + _C_TO_CXX[m["drv"]] + (m["post"] or ""))
            out.append(tuple(argv))
    usual = [tuple(shlex.split(c)) for c in targets.host().compilers["cxx"]]
    return out + [c for c in usual if c not in out]


def resolve_host_cxx(explicit: Optional[str] = None) -> Compiler:
    """A host C++ compiler (the emulator header is C++17): the host compiler chosen as usual
    (explicit, $RVVKIT_COMPILER, ...) when it is a C++ driver, else its C++ sibling."""
    comp = resolve_compiler(explicit, target="host")
    if comp.is_cxx:
        return comp
    tried = []
    for argv in _cxx_siblings(comp):
        try:
            cxx = resolve_compiler(shlex.join(argv), target="host")
        except CompilerNotFound as exc:
            tried.append(f"  {shlex.join(argv)}: {str(exc).splitlines()[0]}")
            continue
        if cxx.is_cxx:
            return cxx
        tried.append(f"  {shlex.join(argv)}: not a C++ driver")
    raise CompilerNotFound(
        f"the CUDA emulator needs a host C++ compiler; {shlex.join(comp.argv)} is a C "
        "compiler and no C++ one was found; tried:\n" + "\n".join(tried) +
        "\nInstall g++ (or clang++), or set RVVKIT_COMPILER to a C++ compiler.")


def emulator_header() -> Path:
    """The CPU emulator header (RvvkitError when the installation lacks it)."""
    return toolchain_file(_NVCC.get("emulator", "header"))


def emulator_flags(extra: Optional[Sequence[str]] = None,
                   header: Optional[str] = None,
                   compiler: Optional[Compiler] = None) -> List[str]:
    """Flags that build CUDA source for the CPU emulator, force-including `header` (default
    the emulator header); with `compiler`, the host's tuning flags as the host executor gets
    them (so the emulator contracts multiply-adds where the host's code does, as nvcc does on
    a GPU: the same C gives the same floats on both); extra (default $RVVKIT_CFLAGS, as for
    any host build) come last."""
    extra = shlex.split(os.environ.get("RVVKIT_CFLAGS", "")) if extra is None else list(extra)
    header = str(emulator_header()) if header is None else header
    tuned = native_flags(compiler) if compiler is not None and \
        builds_for_this_machine(compiler, None) else []
    return [f.replace("{header}", header) for f in _NVCC.get("emulator", "flags")] + tuned + \
        extra


def compile_cu_emulated(source: str, compiler: Optional[Compiler] = None,
                        flags: Optional[Sequence[str]] = None, *, name: str = "model",
                        use_cache: Optional[bool] = None) -> Path:
    """A CUDA translation unit as a shared object that runs on the CPU (cached; the key
    covers the emulator header's content, which the flags name only by path). With the
    default flags, g++ reads the header precompiled (jit/pch.py)."""
    comp = compiler or resolve_host_cxx()
    if flags is None:
        header = precompiled(emulator_header(), comp,
                             emulator_flags(header="{header}", compiler=comp))
        flags = emulator_flags(header=str(header), compiler=comp)
    return compile_source(source, comp, list(flags),
                          name=name, kind="so", suffix=".cu", depends=(emulator_header(),),
                          use_cache=use_cache)
