"""CUDA executor: build the artifact's CUDA translation unit (`.rvvkit.cu`) with nvcc, or with
the host C++ compiler against the CPU emulator (emulate=True: slow, for checking the CUDA
kernels' numerics on machines without a GPU), dlopen it through cffi and run the plan on
device buffers that the object itself allocates and copies."""
from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..artifact.container import Artifact
from ..artifact.meta import check_library
from ..artifact import abi
from ..artifact.abi import check_version
from ..errors import ArtifactError, CompilerNotFound, ExecutionError, ExecutorUnavailable
from ..jit import (compile_cu, compile_cu_emulated, evict, nvcc_flags, nvcc_version,
                   resolve_host_cxx, resolve_nvcc)
from . import cuda_state
from .cuda_state import NO_DEVICE
from .host import CDEF as PLAN_CDEF
from .session import Session

CDEF = PLAN_CDEF + """
int rvvkit_cuda_device_count(void);
const char *rvvkit_cuda_error_string(int code);
int rvvkit_cuda_device_name(char *buf, int n);
void *rvvkit_cuda_alloc(long bytes);
int rvvkit_cuda_free(void *p);
int rvvkit_cuda_upload(void *dst, const void *src, long bytes);
int rvvkit_cuda_download(void *dst, const void *src, long bytes);
int rvvkit_cuda_memset(void *dst, int value, long bytes);
int rvvkit_cuda_sync(void);
int rvvkit_cuda_emulated(void);
int rvvkit_cuda_fault_step(void);
"""

def cuda_available() -> Tuple[bool, str]:
    """(True, "N CUDA device(s)") when the driver sees a GPU, else (False, "no CUDA device:
    why"). Compiles nothing, and does not initialise CUDA in this process (cuda_state.probe:
    memoised per process; cuda_available.cache_clear() to ask again)."""
    return cuda_state.probe()


cuda_available.cache_clear = cuda_state.probe.cache_clear  # type: ignore[attr-defined]


def nvcc_available() -> Tuple[bool, str]:
    """(True, "nvcc 13.0.88 (/path)") or (False, why), from `nvcc --version` alone."""
    try:
        comp = resolve_nvcc()
    except CompilerNotFound as exc:
        return False, str(exc)
    return True, f"nvcc {nvcc_version(comp)} ({comp.path})"


class CudaSession(Session):
    executor = "cuda"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact], *, emulate: bool = False,
                 nvcc: Optional[str] = None, compiler: Optional[str] = None,
                 use_cache: Optional[bool] = None):
        """nvcc: the nvcc to use (else $RVVKIT_NVCC, PATH, /usr/local/cuda); compiler: the
        host C++ compiler for emulate=True (else the host compiler's usual choice)."""
        self._buffers: List = []  # device allocations, freed by close()
        self._pre_in = None   # the prefill plan's input buffers, allocated on first use
        self.lib = None
        self._pid = os.getpid()   # CUDA state does not survive fork(): see _live()
        super().__init__(artifact)
        self.emulate = emulate
        self.executor = "cuda-emu" if emulate else "cuda"
        self.last_seconds: Optional[List[float]] = None
        source = self.artifact.cu_source
        if source is None:
            why = (self.artifact.meta.get("cuda") or {}).get("reason")
            if why:    # the build could not express a kernel in CUDA: nothing to run here
                raise ExecutorUnavailable(f"this artifact has no CUDA source: {why}")
            raise ArtifactError("this artifact has no CUDA source (section .rvvkit.cu): it was "
                                "built by an older rvvkit; rebuild it with this one "
                                "(`rvvkit build model.onnx`)", section=".rvvkit.cu")
        if not emulate:
            ok, why = cuda_available()
            if not ok:  # before compiling: nvcc takes long and the result could not run
                raise ExecutorUnavailable(why)
            cuda_state.mark_initialised()   # loading the object below initialises CUDA
        import cffi
        self.ffi = cffi.FFI()
        self.ffi.cdef(CDEF)
        if emulate:
            self.compiler = resolve_host_cxx(compiler)
            self._build = lambda: compile_cu_emulated(source, self.compiler, use_cache=use_cache)
        else:
            self.compiler = resolve_nvcc(nvcc)
            flags = nvcc_flags(native=True)
            self._build = lambda: compile_cu(source, self.compiler, flags, use_cache=use_cache)
        self.so_path = self._build()
        self.lib = self._dlopen()
        self._check_object()
        self.device_name = self._device_name()
        self._allocate()

    # -- set-up -----------------------------------------------------------------------------

    def _dlopen(self):
        try:
            return self.ffi.dlopen(str(self.so_path))
        except OSError:
            evict(self.so_path)  # a cache entry that does not load is a miss: rebuild once
            self.so_path = self._build()
            try:
                return self.ffi.dlopen(str(self.so_path))
            except OSError as exc:  # built twice and still not loadable: the compiler's fault
                raise ExecutionError(f"the compiled CUDA kernels {self.so_path} cannot be loaded "
                                     f"({exc}); compiler: {self.compiler_text()}") from None

    def _check_object(self) -> None:
        lib, meta = self.lib, self.artifact.meta
        check_version(lib, "the CUDA object")
        check_library(meta, len(self.artifact.weights), lib, "the compiled CUDA kernels")
        count = lib.rvvkit_cuda_device_count()
        if count <= 0:
            forked = None if self.emulate else cuda_state.fork_error(NO_DEVICE)
            raise ExecutorUnavailable(forked or f"{NO_DEVICE}: the CUDA runtime in "
                                      f"{self.so_path.name} reports no devices")

    def _device_name(self) -> str:
        buf = self.ffi.new("char[]", 256)
        if self.lib.rvvkit_cuda_device_name(buf, 256) != 0:
            return "CUDA device"
        return self.ffi.string(buf).decode("utf-8", "replace")

    def _alloc(self, n_floats: int, what: str, elem: int = 4, ctype: str = "float *"):
        nbytes = elem * max(int(n_floats), 1)  # a zero-byte allocation may come back NULL
        ptr = self.lib.rvvkit_cuda_alloc(nbytes)
        if ptr == self.ffi.NULL:
            raise ExecutionError(f"cannot allocate {nbytes} bytes of device memory for {what} "
                                 f"on {self.device_name}")
        self._buffers.append(ptr)
        return self.ffi.cast(ctype, ptr)

    def _allocate(self) -> None:
        weights = np.ascontiguousarray(self.artifact.weights_array(), dtype=np.float32)
        self._w = self._alloc(weights.size, "the weights")
        if weights.size:
            self._upload(self._w, weights, "weights upload")
        self._a = self._alloc(self.artifact.meta["memory"]["arena_floats"], "the arena")
        self._in = [self._alloc(int(np.prod(s)), f"input {n!r}", self.dtypes[n].itemsize,
                                "const void *") for n, s in self.inputs]
        self._out = [self._alloc(int(np.prod(s)), f"output {n!r}", self.dtypes[n].itemsize,
                                 "void *") for n, s in self.outputs]
        self._in_ptrs = self.ffi.new("const void *[]", self._in or [self.ffi.NULL])
        self._out_ptrs = self.ffi.new("void *[]", self._out or [self.ffi.NULL])

    # -- transfers and errors ---------------------------------------------------------------

    def _check(self, rc: int, what: str, prefill: bool = False) -> None:
        step = abi.failed_step(rc, cuda=True)
        if step is not None:
            raise self.step_error(step, prefill)
        if rc != 0:
            text = self.ffi.string(self.lib.rvvkit_cuda_error_string(rc)).decode("utf-8",
                                                                                  "replace")
            fault = self.lib.rvvkit_cuda_fault_step() if self.emulate else -1
            if fault >= 0:   # the emulator caught host code touching device memory
                raise ExecutionError(f"{self.where(fault, prefill)}: {text}; the "
                                     "artifact's CUDA source is wrong (an rvvkit bug: "
                                     "please report it)")
            raise ExecutionError(f"{what} failed on {self.device_name}: CUDA error {rc} "
                                 f"({text})")

    def _upload(self, dst, arr: np.ndarray, what: str) -> None:
        self._check(self.lib.rvvkit_cuda_upload(dst, self.ffi.from_buffer(arr), arr.nbytes),
                    what)

    def _upload_inputs(self, feeds: Mapping[str, np.ndarray]) -> None:
        for (name, _), dev, arr in zip(self.inputs, self._in, self.validate(feeds)):
            self._upload(dev, arr, f"upload of input {name!r}")

    def _download_outputs(self) -> Dict[str, np.ndarray]:
        result = {}
        for (name, shape), dev in zip(self.outputs, self._out):
            host = np.empty(shape, self.dtypes[name])
            self._check(self.lib.rvvkit_cuda_download(self.ffi.from_buffer(host), dev,
                                                      host.nbytes),
                        f"download of output {name!r}")
            result[name] = host
        return result

    def _forked_copy(self) -> bool:
        """This session object was inherited through fork() from the process that opened it on
        a GPU (the emulator's plain memory survives fork; a GPU's CUDA state does not)."""
        return os.getpid() != self._pid and not self.emulate

    def _live(self) -> None:
        if self.lib is None or not self._buffers:
            raise ExecutionError("this CUDA session is closed")
        if self._forked_copy():
            raise ExecutionError(
                f"this CUDA session was opened in process {self._pid} and is used in process "
                f"{os.getpid()}, forked from it; CUDA state does not survive fork(): open the "
                "session in this process instead")

    # -- running ----------------------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray], *, timed: bool = False
            ) -> Dict[str, np.ndarray]:
        """Outputs for `feeds`; timed=True also sets last_seconds (per-step device time)."""
        self._live()
        self._upload_inputs(feeds)
        if timed:
            secs = self.ffi.new("double[]", max(len(self.steps), 1))
            self._check(self.lib.rvvkit_run_timed(self._w, self._a, self._in_ptrs,
                                                  self._out_ptrs, secs), "rvvkit_run_timed")
            self.last_seconds = [secs[i] for i in range(len(self.steps))]
        else:
            self._check(self.lib.rvvkit_run(self._w, self._a, self._in_ptrs, self._out_ptrs),
                        "rvvkit_run")
        return self._download_outputs()

    def run_prefill(self, feeds: Mapping[str, np.ndarray]) -> None:
        """Run the prefill plan on a chunk of prompt tokens (rvvkit/llm/prefill.py): it writes
        their keys and values into the caches in the device arena and has no outputs. Its
        input buffers are allocated on first use."""
        self._live()
        if self._pre_in is None:
            self._pre_in = [self._alloc(int(np.prod(s)), f"prefill input {n!r}",
                                        self.dtypes[n].itemsize, "const void *")
                            for n, s in self.prefill_inputs]
            self._pre_ptrs = self.ffi.new("const void *[]", self._pre_in or [self.ffi.NULL])
        arrays = self.validate(feeds, self.prefill_inputs)
        for (name, _), dev, arr in zip(self.prefill_inputs, self._pre_in, arrays):
            self._upload(dev, arr, f"upload of prefill input {name!r}")
        self._check(self.lib.rvvkit_prefill_run(self._w, self._a, self._pre_ptrs,
                                                self._out_ptrs), "rvvkit_prefill_run", True)

    def prepare(self, feeds: Mapping[str, np.ndarray]):
        """Upload `feeds` once; run_prepared then runs on the device buffers (benchmarks)."""
        self._live()
        self._upload_inputs(feeds)
        return self._in_ptrs, self._out_ptrs

    def run_prepared(self, prepared) -> None:
        """One inference on the buffers of prepare(), synchronised, no copies."""
        self._check(self.lib.rvvkit_run(self._w, self._a, prepared[0], prepared[1]),
                    "rvvkit_run")

    def describe(self) -> Dict:
        """Session.describe(), plus the device (a GPU's name, or the CPU emulator)."""
        return dict(super().describe(), label=f"{self.executor} ({self.device_name})",
                    device=self.device_name)

    def profile(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> List[Dict]:
        """Per-step mean device seconds (CUDA events) over `repeat` runs after a warm-up."""
        prepared = self.prepare(feeds)
        self.run_prepared(prepared)  # warm-up: module load, first-touch allocations
        n = len(self.steps)
        secs = self.ffi.new("double[]", max(n, 1))
        for _ in range(max(repeat, 1)):
            self._check(self.lib.rvvkit_run_timed(self._w, self._a, prepared[0], prepared[1],
                                                  secs), "rvvkit_run_timed")
        self.last_seconds = [secs[i] / max(repeat, 1) for i in range(n)]
        return self.profile_rows(self.last_seconds)

    def close(self) -> None:
        """Free the device buffers (idempotent); the object stays loaded (cffi cannot unload
        it safely while other sessions may share it)."""
        buffers, self._buffers = self._buffers, []
        if self.lib is None or self._forked_copy():
            return   # a forked child's copy: the device memory is the parent's to free
        for ptr in buffers:
            self.lib.rvvkit_cuda_free(ptr)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass
