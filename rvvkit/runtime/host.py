"""Host executor: JIT-compile the artifact's C with the host compiler, dlopen it through cffi
and call the plan in process."""
from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Union

import numpy as np

from ..artifact import abi, precompiled
from ..artifact.container import Artifact
from ..artifact.meta import check_library
from ..errors import ExecutionError
from ..jit import compile_flags, compile_source, evict, resolve_compiler
from .session import Session, aligned_empty

# The plan ABI, read from runtime_c/rvvkit_abi.h (the CUDA object exports it too, on device
# pointers).
CDEF = abi.cdef()


class HostSession(Session):
    executor = "host"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact], *,
                 compiler: Optional[str] = None, use_cache: Optional[bool] = None,
                 native: Optional[bool] = None, prefer_precompiled: Optional[bool] = None):
        super().__init__(artifact)
        import cffi

        def jit():
            self.compiler = resolve_compiler(compiler, target="host")
            self.flags = compile_flags(self.compiler, native=native)
            return compile_source(self.artifact.c_source, self.compiler, self.flags,
                                  name="model", use_cache=use_cache)
        self.compiler = None
        self.kernels_from, got = precompiled.choose(self, precompiled.arch_of("host"),
                                                    prefer_precompiled, jit)
        self.so_path = got if self.kernels_from == "jit" else got[0]
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        self.lib = self._dlopen()
        abi.check_version(self.lib, f"the compiled kernels ({self.so_path})")
        check_library(self.artifact.meta, len(self.artifact.weights), self.lib,
                      "the compiled kernels")
        meta_arena = self.artifact.meta["memory"]["arena_floats"]
        self.weights = self.artifact.weights_array()
        if self.weights.ctypes.data % 64:
            self.weights = _aligned_copy(self.weights)
        self.arena = aligned_empty(meta_arena)
        self._w = self.ffi.cast("const float *", self.weights.ctypes.data)
        self._a = self.ffi.cast("float *", self.arena.ctypes.data)

    def _threads(self) -> None:
        # The count lives in the loaded object, which sessions on the same kernels share
        # (dlopen returns one handle): each session sets its own before it runs.
        self.lib.rvvkit_set_num_threads(self.threads or 0)

    def _dlopen(self):
        try:
            return self.ffi.dlopen(str(self.so_path))
        except OSError as exc:
            if self.kernels_from != "jit":
                raise ExecutionError(f"cannot load the artifact's {self.kernels_from}: "
                                     f"{exc}") from None
            # A cache entry that does not load is a miss: rebuild once.
            evict(self.so_path)
            self.so_path = compile_source(self.artifact.c_source, self.compiler, self.flags,
                                          name="model")
            try:
                return self.ffi.dlopen(str(self.so_path))
            except OSError as exc:  # built twice and still not loadable: the compiler's fault
                raise ExecutionError(f"the compiled kernels {self.so_path} cannot be loaded "
                                     f"({exc}); compiler: {self.compiler_text()}") from None

    def _pointers(self, feeds, prefill: bool = False):
        ins = self.validate(feeds, self.prefill_inputs if prefill else None)
        outs = [] if prefill else self.output_buffers()
        in_ptrs = self.ffi.new("const void *[]", [self.ffi.cast("const void *", a.ctypes.data)
                                                   for a in ins] or [self.ffi.NULL])
        out_ptrs = self.ffi.new("void *[]", [self.ffi.cast("void *", a.ctypes.data)
                                             for a in outs] or [self.ffi.NULL])
        return ins, outs, in_ptrs, out_ptrs

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        ins, outs, in_ptrs, out_ptrs = self._pointers(feeds)
        self._threads()
        rc = self.lib.rvvkit_run(self._w, self._a, in_ptrs, out_ptrs)
        if rc != 0:
            step = abi.failed_step(rc)
            raise self.step_error(step) if step is not None else \
                ExecutionError(f"rvvkit_run returned {rc}")
        return dict(zip(self.output_names, outs))

    def run_prefix(self, feeds: Mapping[str, np.ndarray], steps: int) -> None:
        """Run the plan's first `steps` steps only (no outputs read): a decoder's prompt token
        before the last needs just the steps that write its caches."""
        ins, outs, in_ptrs, out_ptrs = self._pointers(feeds)
        self._threads()
        for i in range(steps):
            if self.lib.rvvkit_step(i, self._w, self._a, in_ptrs, out_ptrs) != 0:
                raise self.step_error(i)

    def run_prefill(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Run the prefill plan on a chunk of prompt tokens (rvvkit/llm/prefill.py): it writes
        their keys and values into the session's caches and has no outputs."""
        ins, outs, in_ptrs, out_ptrs = self._pointers(feeds, prefill=True)
        self._threads()
        rc = self.lib.rvvkit_prefill_run(self._w, self._a, in_ptrs, out_ptrs)
        if rc != 0:
            step = abi.failed_step(rc)
            raise self.step_error(step, prefill=True) if step is not None else \
                ExecutionError(f"rvvkit_prefill_run returned {rc}")

    def run_prepared(self, prepared) -> None:
        """Run on buffers from `prepare()` with no Python work per call (for benchmarks)."""
        self.lib.rvvkit_run(self._w, self._a, prepared[2], prepared[3])

    def prepare(self, feeds: Mapping[str, np.ndarray]):
        self._threads()
        return self._pointers(feeds)

    def profile(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> List[Dict]:
        ins, outs, in_ptrs, out_ptrs = self._pointers(feeds)
        n = self.lib.rvvkit_num_steps()
        secs = self.ffi.new("double[]", max(n, 1))
        self._threads()
        self.lib.rvvkit_run(self._w, self._a, in_ptrs, out_ptrs)  # warm-up: page faults, caches
        for _ in range(repeat):
            self.lib.rvvkit_run_timed(self._w, self._a, in_ptrs, out_ptrs, secs)
        return self.profile_rows([secs[i] / repeat for i in range(n)])


def _aligned_copy(arr: np.ndarray) -> np.ndarray:
    out = aligned_empty(arr.size)
    out[:] = arr
    return out
