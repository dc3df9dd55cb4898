"""The JIT: find the compiler, build its flags, compile generated C, cache by content.

    comp = resolve_compiler(target="host")            # or target="rvv", or an explicit string
    so = compile_source(c_source, comp, compile_flags(comp))
    so = compile_cu(cu_source)                        # CUDA: nvcc, or compile_cu_emulated
"""
from .build import build_command, compile_many, compile_source, compile_timeout
from .cache import (CACHE_SCHEMA, cache_dir, cache_enabled, cache_key, entry_dir, evict,
                    key_material)
from .nvcc import (compile_cu, compile_cu_emulated, nvcc_flags, nvcc_version, resolve_host_cxx,
                   resolve_nvcc)
from .probe import clear_probe_cache
from .compilers import (Compiler, compile_flags, default_candidates, describe, host_is_riscv,
                        resolve_compiler, split_compiler)

__all__ = [
    "CACHE_SCHEMA", "Compiler", "build_command", "cache_dir", "cache_enabled", "cache_key",
    "clear_probe_cache", "compile_cu", "compile_cu_emulated", "compile_flags", "compile_many",
    "compile_source", "compile_timeout", "default_candidates", "describe", "entry_dir", "evict",
    "host_is_riscv", "key_material", "nvcc_flags", "nvcc_version", "resolve_compiler",
    "resolve_host_cxx", "resolve_nvcc", "split_compiler",
]
