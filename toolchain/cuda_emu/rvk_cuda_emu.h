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
 * memory filled with NaN bytes on allocation, so reads of unwritten memory show up.
 *
 * Device memory is out of the host's reach, as on a GPU: every cudaMalloc is a mapping of its
 * own, kept PROT_NONE except while a kernel launch, cudaMemcpy or cudaMemset runs (launch
 * arguments are evaluated before it opens, as a GPU's host evaluates them). Host code that
 * reads or writes it anyway (a memset in a host wrapper) faults; the fault is caught, and the
 * plan step it happened in (RVK_HOST_STEP) returns the error code RVK_EMU_HOST_ACCESS, whose
 * cudaGetErrorString says where. On a GPU the same code kills the process with SIGSEGV. */
#ifndef RVK_CUDA_EMU_H
#define RVK_CUDA_EMU_H

#ifndef RVK_CUDA_EMU
#define RVK_CUDA_EMU 1
#endif

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
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

/* ---- device memory: mappings that host code cannot touch outside launches and copies ---- */

/* cudaGetLastError's code for a host access to device memory (not a CUDA runtime code). */
#define RVK_EMU_HOST_ACCESS 9001

struct Region {
    char *base;
    size_t mapped;   /* whole pages */
    size_t asked;    /* what cudaMalloc was asked for */
};

inline std::vector<Region> regions;
inline int open_depth = 0;             /* > 0 while a launch or a copy may touch device memory */
inline int step = -1;                  /* the plan step whose host code runs (RVK_HOST_STEP) */
inline const char *launched = nullptr; /* the last kernel that step launched */
inline sigjmp_buf *trap = nullptr;     /* where a caught host access returns to */
inline int fault_step = -1;            /* the step of the last caught host access */
inline int sticky = 0;                 /* what cudaGetLastError returns next */
inline char fault_text[512];
inline struct sigaction previous;
inline bool handler_on = false;

inline void protect_all(int prot) {
    for (const Region &r : regions) mprotect(r.base, r.mapped, prot);
}

/* Device memory is reachable while one of these lives (launches, copies, sets). */
struct Open {
    Open() { if (open_depth++ == 0) protect_all(PROT_READ | PROT_WRITE); }
    ~Open() { if (--open_depth == 0) protect_all(PROT_NONE); }
    Open(const Open &) = delete;
    Open &operator=(const Open &) = delete;
};

inline const Region *region_of(const void *p) {
    const char *c = static_cast<const char *>(p);
    for (const Region &r : regions)
        if (c >= r.base && c < r.base + r.mapped) return &r;
    return nullptr;
}

inline const char *access_kind(void *uc) {
#if defined(__x86_64__) && defined(REG_ERR)
    /* bit 1 of the page-fault error code: the access was a write */
    return (static_cast<ucontext_t *>(uc)->uc_mcontext.gregs[REG_ERR] & 2) ? "wrote" : "read";
#else
    (void)uc;
    return "read or wrote";
#endif
}

/* Not async-signal-safe in the strict sense (snprintf): it runs on a fault of the emulator's
 * own making, in code that holds no lock, and only to report it. */
inline void on_fault(int sig, siginfo_t *info, void *uc) {
    const Region *r = open_depth == 0 ? region_of(info->si_addr) : nullptr;
    if (!r) {   /* not ours: whatever handled SIGSEGV before (Python's faulthandler, default) */
        if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
            previous.sa_sigaction(sig, info, uc);
            return;
        }
        if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
            previous.sa_handler(sig);
            return;
        }
        signal(sig, SIG_DFL);   /* the access happens again and ends the process as usual */
        return;
    }
    const size_t off = (size_t)(static_cast<char *>(info->si_addr) - r->base);
    char where[160];
    if (step >= 0)
        std::snprintf(where, sizeof where, "in the host code of plan step %d (%s%s)", step,
                      launched ? "after launching " : "before any launch",
                      launched ? launched : "");
    else
        std::snprintf(where, sizeof where, "outside any plan step");
    std::snprintf(fault_text, sizeof fault_text,
                  "host code %s device memory (byte %zu of a %zu-byte cudaMalloc) %s; host "
                  "code may only launch kernels and call the CUDA runtime (on a GPU this is a "
                  "host SIGSEGV)", access_kind(uc), off, r->asked, where);
    if (trap) {
        fault_step = step;
        sticky = RVK_EMU_HOST_ACCESS;
        siglongjmp(*trap, 1);
    }
    static const char head[] = "rvk_cuda_emu: ";
    if (write(2, head, sizeof head - 1) < 0 || write(2, fault_text, strlen(fault_text)) < 0 ||
        write(2, "\n", 1) < 0) {
    }
    std::abort();
}

inline void install_handler() {
    if (handler_on) return;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous);
    handler_on = true;
}

/* Runs a plan step's host code (its wrapper) so that a host access to device memory inside it
 * ends that step with RVK_EMU_HOST_ACCESS instead of the process. */
template <class F>
inline void host_step(int i, F f) {
    sigjmp_buf here;
    sigjmp_buf *const outer = trap;
    step = i;
    launched = nullptr;
    trap = &here;
    if (sigsetjmp(here, 1) == 0) f();
    trap = outer;
    step = -1;
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
    const rvk_emu::Open open;
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

/* The arguments are evaluated once, on the host, before device memory opens (as a GPU's host
 * evaluates them): an argument that reads device memory is a host access. */
#define RVK_LAUNCH(kern, grid, block, args)                                                    \
    do {                                                                                       \
        auto rvk_args_ = std::make_tuple args;                                                 \
        rvk_emu::launched = #kern;                                                             \
        rvk_emu_launch((grid), (block), [&]() { std::apply(kern, rvk_args_); });              \
    } while (0)
#define RVK_HOST_STEP(i, call) rvk_emu::host_step((i), [&]() { (void)(call); })

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
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t mapped = (bytes + page - 1) / page * page + (bytes ? 0 : page);
    void *base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                      0);
    if (base == MAP_FAILED) { *p = nullptr; return cudaErrorMemoryAllocation; }
    std::memset(base, 0xff, mapped);   /* NaN floats: unwritten memory is visible */
    rvk_emu::install_handler();
    if (rvk_emu::open_depth == 0) mprotect(base, mapped, PROT_NONE);
    rvk_emu::regions.push_back({static_cast<char *>(base), mapped, bytes});
    *p = base;
    return cudaSuccess;
}
inline cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    for (size_t i = 0; i < rvk_emu::regions.size(); ++i) {
        if (rvk_emu::regions[i].base != p) continue;
        munmap(p, rvk_emu::regions[i].mapped);
        rvk_emu::regions.erase(rvk_emu::regions.begin() + (long)i);
        return cudaSuccess;
    }
    return cudaErrorInvalidValue;   /* not a pointer cudaMalloc returned */
}
inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind) {
    const rvk_emu::Open open;
    if (n) std::memcpy(dst, src, n);
    return cudaSuccess;
}
inline cudaError_t cudaMemset(void *dst, int v, size_t n) {
    const rvk_emu::Open open;
    std::memset(dst, v, n);
    return cudaSuccess;
}
/* The default stream is the only one, and synchronous here. */
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                                   cudaStream_t = nullptr) {
    return cudaMemcpy(dst, src, n, kind);
}
inline cudaError_t cudaMemsetAsync(void *dst, int v, size_t n, cudaStream_t = nullptr) {
    return cudaMemset(dst, v, n);
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
inline cudaError_t cudaGetLastError() {
    const int e = rvk_emu::sticky;
    rvk_emu::sticky = 0;
    return e;
}
inline cudaError_t cudaPeekAtLastError() { return rvk_emu::sticky; }
inline const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case RVK_EMU_HOST_ACCESS: return rvk_emu::fault_text;
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
