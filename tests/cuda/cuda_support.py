"""Helpers of the CUDA executor tests: skip markers, small models, and a hand-written CUDA
translation unit exporting rvvkit's CUDA ABI (to reach error paths that generated code never
takes: a wrong ABI, no device, a failing run).

Not a conftest.py: tests/conftest.py is imported by name (`from conftest import ...`)."""
from __future__ import annotations

from string import Template

import numpy as np
import pytest
from onnx import helper

from conftest import make_model, rand  # noqa: F401 (re-exported)
from executors import nvcc_compiles_artifact  # noqa: F401 (re-exported)
from rvvkit.codegen.c import ABI_VERSION
from rvvkit.runtime.cuda import cuda_available, nvcc_available

NVCC_OK, NVCC_WHY = nvcc_available()
GPU_OK, GPU_WHY = cuda_available()
needs_nvcc = pytest.mark.skipif(not NVCC_OK, reason="nvcc not found")
needs_gpu = pytest.mark.skipif(not GPU_OK, reason=GPU_WHY)  # "no CUDA device: ..."


def relu_model(shape=(2, 3, 4, 5)):
    return make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", list(shape))], ["y"])


def convnet():
    """Conv (padded) + Relu + MaxPool + GlobalAveragePool + Gemm + Softmax, logits exposed."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "gw", "gb"], ["y"], transB=1),
             helper.make_node("Softmax", ["y"], ["z"])]
    inits = {"w": rand(8, 3, 3, 3, seed=1), "b": rand(8, seed=2), "gw": rand(5, 8, seed=3),
             "gb": rand(5, seed=4)}
    return make_model(nodes, [("x", [1, 3, 12, 12])], ["y", "z"], inits)


def two_input_model():
    """Broadcast Add of two inputs, then MatMul with a constant and a Sigmoid."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("MatMul", ["s", "m"], ["t"]),
             helper.make_node("Sigmoid", ["t"], ["y"])]
    return make_model(nodes, [("a", [2, 4, 6]), ("b", [1, 1, 6])], ["y"],
                      {"m": rand(6, 7, seed=9)})


def feeds_for(model, seed=0):
    from conftest import onnx_inputs
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in model.graph.input}
    return {n: rand(*shapes[n], seed=seed + i) for i, n in enumerate(onnx_inputs(model))}


def assert_close(ours, ref, rtol=1e-3, atol=1e-4, label=""):
    assert sorted(ours) == sorted(ref), (label, sorted(ours), sorted(ref))
    for name, want in ref.items():
        assert ours[name].shape == want.shape, (label, name)
        np.testing.assert_allclose(ours[name], want, rtol=rtol, atol=atol,
                                   err_msg=f"{label}: output {name!r}")


# A Relu over `n` floats, one step, with knobs for the error paths. $-placeholders: the C
# braces stay as they are.
HAND_CU = Template(r"""
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define RVK_LAUNCH(kern, grid, block, args) kern<<<(grid), (block)>>> args
#endif
#include <stdio.h>
#define RVK_API extern "C" __attribute__((visibility("default")))

__global__ void hand_relu(const float *__restrict__ x, float *__restrict__ y, int n) {
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

RVK_API int rvvkit_abi_version(void) { return $abi; }
RVK_API int rvvkit_num_steps(void) { return 1; }
RVK_API long rvvkit_arena_floats(void) { return ${arena}L; }
RVK_API long rvvkit_weights_floats(void) { return ${weights}L; }
RVK_API int rvvkit_num_inputs(void) { return 1; }
RVK_API int rvvkit_num_outputs(void) { return 1; }
RVK_API long rvvkit_input_elems(int i) { return i == 0 ? ${n}L : -1L; }
RVK_API long rvvkit_output_elems(int i) { return i == 0 ? ${n}L : -1L; }
RVK_API int rvvkit_input_dtype(int i) { return i == 0 ? 1 : -1; }
RVK_API int rvvkit_output_dtype(int i) { return i == 0 ? 1 : -1; }
RVK_API int rvvkit_set_num_threads(int n) { (void)n; return 1; }
RVK_API int rvvkit_prefill_tokens(void) { return 0; }   /* no prefill plan */
RVK_API int rvvkit_step(int i, const float *w, float *a, const void *const *in,
                        void *const *out) {
    (void)w; (void)a;
    if (i != 0) return -1;
    RVK_LAUNCH(hand_relu, dim3(($n + 127) / 128), dim3(128),
               ((const float *)in[0], (float *)out[0], $n));
    return 0;
}
RVK_API int rvvkit_run_timed(const float *w, float *a, const void *const *in,
                             void *const *out, double *seconds) {
    rvvkit_step(0, w, a, in, out);
    int err = (int)cudaGetLastError();
    const int sync = (int)cudaDeviceSynchronize();
    if (!err) err = sync;
    if (seconds) seconds[0] += 1e-3;
    return err ? err : $run_rc;
}
RVK_API int rvvkit_run(const float *w, float *a, const void *const *in, void *const *out) {
    return rvvkit_run_timed(w, a, in, out, NULL);
}
RVK_API int rvvkit_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return $devices < 0 ? n : $devices;
}
RVK_API const char *rvvkit_cuda_error_string(int code) {
    return cudaGetErrorString((cudaError_t)code);
}
RVK_API int rvvkit_cuda_device_name(char *buf, int n) {
    snprintf(buf, (size_t)n, "%s", "hand-written device");
    return 0;
}
RVK_API void *rvvkit_cuda_alloc(long bytes) {
    void *p = NULL;
    return cudaMalloc(&p, (size_t)bytes) == cudaSuccess ? p : NULL;
}
RVK_API int rvvkit_cuda_free(void *p) { return (int)cudaFree(p); }
RVK_API int rvvkit_cuda_upload(void *dst, const void *src, long bytes) {
    return (int)cudaMemcpy(dst, src, (size_t)bytes, cudaMemcpyHostToDevice);
}
RVK_API int rvvkit_cuda_download(void *dst, const void *src, long bytes) {
    return (int)cudaMemcpy(dst, src, (size_t)bytes, cudaMemcpyDeviceToHost);
}
RVK_API int rvvkit_cuda_memset(void *dst, int value, long bytes) {
    return (int)cudaMemset(dst, value, (size_t)bytes);
}
RVK_API int rvvkit_cuda_sync(void) { return (int)cudaDeviceSynchronize(); }
RVK_API int rvvkit_cuda_emulated(void) {
#if defined(RVK_CUDA_EMU)
    return 1;
#else
    return 0;
#endif
}
RVK_API int rvvkit_cuda_fault_step(void) { return -1; }
""")


def hand_source(artifact, *, abi=ABI_VERSION, run_rc=0, devices=-1) -> str:
    """HAND_CU for a one-input, one-output, one-step artifact (relu_model's)."""
    meta = artifact.meta
    (n_in,) = {int(np.prod(i["shape"])) for i in meta["inputs"] + meta["outputs"]}
    return HAND_CU.substitute(abi=abi, arena=meta["memory"]["arena_floats"],
                              weights=artifact.weights_array().size, n=n_in, run_rc=run_rc,
                              devices=devices)


def with_cu(artifact, cu_source):
    """A copy of `artifact` carrying `cu_source` as its CUDA section."""
    from rvvkit.artifact import Artifact
    return Artifact(artifact.meta, artifact.c_source, artifact.weights, cu_source=cu_source)
