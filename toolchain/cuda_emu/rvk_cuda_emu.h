/* rvk_cuda_emu.h - runs rvvkit's generated CUDA source on the CPU, for checking the CUDA
 * kernels' numerics on machines without a GPU (CI). Force-included by the host C++ compiler:
 *   g++ -std=c++17 -x c++ -include rvk_cuda_emu.h -DRVK_CUDA_EMU -shared -fPIC model.cu
 *
 * Execution model: blocks run one after another; the threads of a block run as fibers
 * (ucontext) on one OS thread and switch only at __syncthreads(). That keeps __shared__ arrays
 * plain statics (one block is live at a time) and makes missing barriers visible: a thread runs
 * until its next barrier before any other thread starts, so reading shared data another thread
 * has not written yet, or overwriting data another thread has not read yet, gives wrong
 * results instead of passing by luck. RVK_CUDA_EMU_ORDER=reverse runs the threads of every
 * phase last to first, which exposes the mirror-image mistakes (reading what a lower-numbered
 * thread writes); the kernel tests run both orders. A barrier reached by some threads of a
 * block while others have exited is reported and aborts (undefined behaviour on a GPU).
 *
 * Only the subset of CUDA that rvvkit's generators use is provided: thread/block indices,
 * __syncthreads, static __shared__ arrays, kernel launches through RVK_LAUNCH, and the runtime
 * calls of the generated entry points (malloc/copy/events/errors). Device memory is host
 * memory filled with NaN bytes on allocation, so reads of unwritten memory show up. */
#ifndef RVK_CUDA_EMU_H
#define RVK_CUDA_EMU_H

#ifndef RVK_CUDA_EMU
#define RVK_CUDA_EMU 1
#endif

#include <ucontext.h>
#include <time.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* External linkage (C++17 inline variables) on purpose: the compiler must assume that
 * __syncthreads(), which switches fibers, changes them, so no stale copy survives a barrier. */
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace rvk_emu {

enum State { RUNNING, AT_BARRIER, DONE };

struct Fiber {
    ucontext_t ctx;
    State state;
    dim3 tid;
};

inline ucontext_t scheduler;
inline std::vector<Fiber> fibers;
inline std::vector<char> stacks;
inline int current = 0;
inline const std::function<void()> *body = nullptr;

constexpr size_t STACK_BYTES = 128 * 1024;

inline void trampoline() {
    (*body)();
    fibers[current].state = DONE;
    swapcontext(&fibers[current].ctx, &scheduler);
}

[[noreturn]] inline void fail(const char *what) {
    std::fprintf(stderr, "rvk_cuda_emu: %s (block %u,%u,%u)\n", what, blockIdx.x, blockIdx.y,
                 blockIdx.z);
    std::abort();
}

inline bool reverse_order() {
    const char *order = std::getenv("RVK_CUDA_EMU_ORDER");
    return order && std::strcmp(order, "reverse") == 0;
}

/* Runs every thread of the current block to its next barrier (or its end), until all end. */
inline void run_block(int n, bool reverse) {
    for (int i = 0; i < n; ++i) {
        Fiber &f = fibers[(size_t)i];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks.data() + (size_t)i * STACK_BYTES;
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, trampoline, 0);
        f.state = RUNNING;
    }
    for (;;) {
        for (int k = 0; k < n; ++k) {
            const int i = reverse ? n - 1 - k : k;
            if (fibers[(size_t)i].state == DONE) continue;
            fibers[(size_t)i].state = RUNNING;
            current = i;
            threadIdx = fibers[(size_t)i].tid;
            swapcontext(&scheduler, &fibers[(size_t)i].ctx);
        }
        int done = 0;
        for (int i = 0; i < n; ++i) done += fibers[(size_t)i].state == DONE;
        if (done == n) return;
        if (done) fail("__syncthreads() reached by some threads of a block after others exited");
    }
}

}  // namespace rvk_emu

inline void __syncthreads() {
    rvk_emu::Fiber &f = rvk_emu::fibers[(size_t)rvk_emu::current];
    f.state = rvk_emu::AT_BARRIER;
    swapcontext(&f.ctx, &rvk_emu::scheduler);
}

template <class F>
inline void rvk_emu_launch(dim3 grid, dim3 block, F f) {
    const std::function<void()> fn(f);
    const int n = (int)(block.x * block.y * block.z);
    /* the launch limits of every CUDA GPU: a launch the emulator accepts must launch there */
    if (n <= 0 || n > 1024 || block.z > 64) rvk_emu::fail("block shape out of CUDA's limits");
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535u ||
        grid.z > 65535u)
        rvk_emu::fail("grid shape out of CUDA's limits");
    rvk_emu::body = &fn;
    rvk_emu::fibers.resize((size_t)n);
    if (rvk_emu::stacks.size() < (size_t)n * rvk_emu::STACK_BYTES)
        rvk_emu::stacks.resize((size_t)n * rvk_emu::STACK_BYTES);
    for (int i = 0; i < n; ++i)
        rvk_emu::fibers[(size_t)i].tid = dim3((unsigned)i % block.x,
                                              (unsigned)i / block.x % block.y,
                                              (unsigned)i / (block.x * block.y));
    const bool reverse = rvk_emu::reverse_order();
    gridDim = grid;
    blockDim = block;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = dim3(bx, by, bz);
                rvk_emu::run_block(n, reverse);
            }
    rvk_emu::body = nullptr;
}

#define RVK_LAUNCH(kern, grid, block, args) rvk_emu_launch((grid), (block), [&]() { kern args; })

/* ---- the runtime API subset used by the generated entry points ---- */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4
};
typedef void *cudaStream_t;
struct rvk_emu_event { double t; };
typedef rvk_emu_event *cudaEvent_t;
struct cudaDeviceProp { char name[256]; };

inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    const size_t n = (bytes + 255) / 256 * 256;
    *p = std::aligned_alloc(256, n ? n : 256);
    if (!*p) return cudaErrorMemoryAllocation;
    std::memset(*p, 0xff, n ? n : 256);   /* NaN floats: unwritten memory is visible */
    return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
    if (n) std::memcpy(dst, src, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void *dst, int v, size_t n) {
    std::memset(dst, v, n);
    return cudaSuccess;
}
/* __device__ variables are plain globals here: the symbol copies are memcpys. */
template <typename T>
inline cudaError_t cudaMemcpyToSymbol(T &sym, const void *src, size_t n, size_t off = 0,
                                      cudaMemcpyKind = cudaMemcpyHostToDevice) {
    std::memcpy(reinterpret_cast<char *>(&sym) + off, src, n);
    return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &sym, size_t n, size_t off = 0,
                                        cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    std::memcpy(dst, reinterpret_cast<const char *>(&sym) + off, n);
    return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error (CPU emulator)";
    case cudaErrorMemoryAllocation: return "out of memory (CPU emulator)";
    default: return "invalid value (CPU emulator)";
    }
}
inline cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int) {
    std::snprintf(p->name, sizeof p->name, "%s", "rvvkit CUDA emulator (CPU)");
    return cudaSuccess;
}
inline double rvk_emu_now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
inline cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new rvk_emu_event{0.0}; return 0; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
    e->t = rvk_emu_now();
    return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

#endif /* RVK_CUDA_EMU_H */
