/* rvk_pool.h - the thread pool of generated kernels. The C emitter embeds this file in each
 * generated translation unit (like rvvkit_abi.h: an artifact's source compiles on a board
 * alone); kernels call rvk_parallel, the plan ABI's rvvkit_set_num_threads sets the count.
 *
 * Why it is written this way:
 * - Persistent workers that sleep on a condition variable between parallel regions: no
 *   OpenMP runtime to find on a board, no thread start per step, no core burnt spinning
 *   between inferences.
 * - Task t runs on thread t (the caller is thread 0, with the scratch it was given: the
 *   kernel's region of the arena); no task is taken first come, first served, so each
 *   thread's work, and so its instruction count under QEMU, is the same run after run.
 *   A region of fewer tasks than there are threads (a decoding step's 128-wide key and value
 *   products: 2 tasks of 8) runs on workers only, task t on worker first + t (counted round
 *   the workers), `first` turning over them region by region: the caller already runs every
 *   step between regions alone, and as task 0 of every small region it was the busiest thread
 *   at 8. A worker uses scratch of its own, grown on demand; one that cannot get it hands
 *   its task back to the caller, and a worker that cannot start is not counted: the region
 *   then runs on fewer threads, never wrongly.
 * - Tasks split a kernel's output into ranges whose bounds do not change how any element is
 *   computed (whole panels, whole vector blocks), so outputs are bit-identical for every thread
 *   count; no reduction is ever split across tasks.
 * - One region at a time (rvk_pool_region): a region asked for while another runs (a nested
 *   one, or another caller of the same loaded object) runs on its caller alone.
 * - Thread count: rvvkit_set_num_threads(n), else RVVKIT_NUM_THREADS, else the online cores,
 *   at most RVK_MAX_THREADS. A region gets no more tasks than its work / RVVKIT_TASK_GRAIN
 *   (default RVK_TASK_GRAIN multiply-accumulates): tests set 1 to split even tiny kernels.
 *
 * Valid as C11 and C++11; POSIX threads only. */
#ifndef RVK_POOL_H
#define RVK_POOL_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#define RVK_MAX_THREADS 256   /* < 1024: the task count shares a word (rvk_pool_job) */
#if defined(__GNUC__)
#define RVK_POOL_FN static __attribute__((unused))
#else
#define RVK_POOL_FN static
#endif
/* rvk_parallel is opaque to interprocedural optimisation: GCC 12 at -O3 -march=native cloned
 * it for a constant task, inlined the task and lost the stores of the caller's argument array
 * (a NULL operand, caught by tests/ops/test_ops_gemm_binary.py); a call per region costs
 * nothing next to the region. */
#if defined(__GNUC__) && !defined(__clang__)
#define RVK_POOL_OPAQUE __attribute__((noipa))
#elif defined(__GNUC__)
#define RVK_POOL_OPAQUE __attribute__((noinline))
#else
#define RVK_POOL_OPAQUE
#endif

/* A task: run part `task` of `ntasks` of a region, with `scratch` of the floats asked for. */
typedef void (*rvk_task_fn)(void *ctx, int task, int ntasks, float *scratch);

static pthread_once_t rvk_pool_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t rvk_pool_lock;     /* only for sleeping and waking */
static pthread_mutex_t rvk_pool_region;   /* held for a whole parallel region */
static pthread_cond_t rvk_pool_wake, rvk_pool_done;
static int rvk_pool_want;                 /* threads asked for; 0 = not chosen yet */
static int rvk_pool_started;              /* workers running (ids 1..started) */
static int rvk_pool_stop;
/* The region: (generation << 30) | (span << 20) | (first << 10) | its task count n, one word
 * so that a worker reads them together (a worker outside the region may read it after the
 * next one began): with first 0, task t runs on thread t (the caller's is task 0); else on
 * worker 1 + (first - 1 + t) % span. fn, ctx and need are written before it (release) and
 * read after it (acquire). 64-bit words: the generation has 34 bits. */
static unsigned long rvk_pool_job;
static rvk_task_fn rvk_pool_fn;
static void *rvk_pool_ctx;
static long rvk_pool_need;                /* scratch floats the region's tasks use */
static unsigned long rvk_pool_pending;    /* workers' tasks of the region not done yet */
static unsigned long rvk_pool_sleepers;   /* workers asleep on rvk_pool_wake */
static unsigned long rvk_pool_waiting;    /* 1 while the caller sleeps on rvk_pool_done */
static unsigned long rvk_pool_norphans;   /* tasks handed back to the caller ... */
static int rvk_pool_orphan[RVK_MAX_THREADS];   /* ... these */
static unsigned rvk_pool_turn;             /* where the next small region starts among them */
static long rvk_pool_spin_ns;             /* $RVVKIT_SPIN_US (default 200): polling first */
static long rvk_pool_grain;               /* least work per task: $RVVKIT_TASK_GRAIN or below */
/* A handover costs a few microseconds on any core, but a board's core does several times less
 * work in them than a desktop's: 2^16 multiply-accumulates there, so that a decoding step's
 * hidden-896 products (0.8 M) reach every core of a K1; 2^18 elsewhere, where such a product
 * takes ~20 us and splitting it cost an x86 host a third of its 2-thread decoding speed. */
#if defined(__riscv)
#define RVK_TASK_GRAIN (1L << 16)
#else
#define RVK_TASK_GRAIN (1L << 18)
#endif
static float *rvk_pool_scratch[RVK_MAX_THREADS];
static long rvk_pool_have[RVK_MAX_THREADS];
static pthread_t rvk_pool_tid[RVK_MAX_THREADS];
static unsigned long rvk_pool_job0[RVK_MAX_THREADS];

static void rvk_pool_locks(void) {
    pthread_mutex_init(&rvk_pool_lock, NULL);
    pthread_mutex_init(&rvk_pool_region, NULL);
    pthread_cond_init(&rvk_pool_wake, NULL);
    pthread_cond_init(&rvk_pool_done, NULL);
}

/* A forked child has none of its parent's workers: it starts its own when it needs them. */
static void rvk_pool_after_fork(void) {
    rvk_pool_locks();
    rvk_pool_started = 0;
    rvk_pool_sleepers = rvk_pool_waiting = 0;
}

static void rvk_pool_init(void) {
    const char *spin = getenv("RVVKIT_SPIN_US");
    const long us = spin && *spin ? strtol(spin, NULL, 10) : 200;
    rvk_pool_spin_ns = us < 0 ? 0 : (us > 1000000 ? 1000000000L : 1000 * us);
    rvk_pool_locks();
    pthread_atfork(NULL, NULL, rvk_pool_after_fork);
}

/* A positive integer from the environment, else `fallback`. */
static long rvk_pool_env(const char *name, long fallback) {
    const char *env = getenv(name);
    const long v = env && *env ? strtol(env, NULL, 10) : 0;
    return v > 0 ? v : fallback;
}

static int rvk_pool_default(void) {
    long n = rvk_pool_env("RVVKIT_NUM_THREADS", 0);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > RVK_MAX_THREADS ? RVK_MAX_THREADS : (int)n);
}

static double rvk_pool_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

/* Polls *word until it differs from `was` (differ = 1) or equals it (differ = 0), for at
 * most the spin time; returns whether it got there. A sleeping thread takes tens of
 * microseconds to wake (hundreds in a VM), as long as a small step takes, so threads poll
 * first: with no lock and no PAUSE (a VM's pause-loop exiting would deschedule the poller),
 * but with a sched_yield every 64 polls: where the cores are oversubscribed (another engine's
 * spinning threads; measured with onnxruntime's after its run) a poller sharing a core with the
 * thread it waits for would otherwise hold that core for its whole spin (squeezenet, 2 threads,
 * right after an onnxruntime call: 22 ms without the yield, 10 with, 6 on idle cores).
 * Under QEMU the runner sets the spin to 0, so waiting never counts as instructions. */
static int rvk_pool_poll(unsigned long *word, unsigned long was, int differ) {
    if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) != was) == differ) return 1;
    if (rvk_pool_spin_ns == 0) return 0;
    const double end = rvk_pool_now() + (double)rvk_pool_spin_ns;
    for (int i = 0;; ++i) {
        if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) != was) == differ) return 1;
        if ((i & 63) == 63) {
            if (rvk_pool_now() >= end) return 0;
            sched_yield();
        }
    }
}

/* Worker `id`'s scratch holds at least `need` floats (64-byte aligned); 0 when it cannot. */
static int rvk_pool_grow(int id, long need) {
    if (rvk_pool_have[id] >= need) return 1;
    void *p = NULL;
    if (posix_memalign(&p, 64, (size_t)need * sizeof(float)) != 0) return 0;
    free(rvk_pool_scratch[id]);
    rvk_pool_scratch[id] = (float *)p;
    rvk_pool_have[id] = need;
    return 1;
}

/* Worker `id`'s part of a region: task `id`, or, when its scratch cannot be had, the task
 * handed back for the caller to run. The last one to finish wakes the caller if it sleeps
 * (seq_cst on both sides: either the caller sees pending reach 0, or the worker sees it
 * waiting). */
static void rvk_pool_take(int id, int task, int ntasks) {
    if (rvk_pool_grow(id, rvk_pool_need)) {
        rvk_pool_fn(rvk_pool_ctx, task, ntasks, rvk_pool_scratch[id]);
    } else {
        const unsigned long k = __atomic_fetch_add(&rvk_pool_norphans, 1, __ATOMIC_RELAXED);
        rvk_pool_orphan[k] = task;
    }
    if (__atomic_sub_fetch(&rvk_pool_pending, 1, __ATOMIC_SEQ_CST) == 0 &&
            __atomic_load_n(&rvk_pool_waiting, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&rvk_pool_lock);
        pthread_cond_signal(&rvk_pool_done);
        pthread_mutex_unlock(&rvk_pool_lock);
    }
}

/* Waits, polling then asleep, for a job other than `seen`; returns it (0 when stopping). */
static unsigned long rvk_pool_next(unsigned long seen) {
    if (!rvk_pool_poll(&rvk_pool_job, seen, 1)) {
        pthread_mutex_lock(&rvk_pool_lock);
        __atomic_add_fetch(&rvk_pool_sleepers, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&rvk_pool_job, __ATOMIC_SEQ_CST) == seen && !rvk_pool_stop)
            pthread_cond_wait(&rvk_pool_wake, &rvk_pool_lock);
        __atomic_sub_fetch(&rvk_pool_sleepers, 1, __ATOMIC_SEQ_CST);
        const int stop = rvk_pool_stop;
        pthread_mutex_unlock(&rvk_pool_lock);
        if (stop) return 0;
    }
    return __atomic_load_n(&rvk_pool_job, __ATOMIC_ACQUIRE);
}

static void *rvk_pool_worker(void *arg) {
    const int id = (int)(intptr_t)arg;
    unsigned long seen = rvk_pool_job0[id];   /* the job when it was started, not now */
    for (;;) {
        const unsigned long job = rvk_pool_next(seen);
        if (job == 0) break;
        seen = job;
        const int n = (int)(job & 1023), first = (int)((job >> 10) & 1023);
        const int span = (int)((job >> 20) & 1023);
        const int task = first ? (id - first + span) % span : id;
        if (task >= (first ? 0 : 1) && task < n) rvk_pool_take(id, task, n);
    }
    return NULL;
}

/* Starts workers up to `want` - 1; returns the threads available (caller included). */
static int rvk_pool_start(int want) {
    while (rvk_pool_started + 1 < want) {
        const int id = rvk_pool_started + 1;
        rvk_pool_job0[id] = __atomic_load_n(&rvk_pool_job, __ATOMIC_RELAXED);
        if (pthread_create(&rvk_pool_tid[id], NULL, rvk_pool_worker, (void *)(intptr_t)id) != 0)
            break;
        rvk_pool_started = id;
    }
    return rvk_pool_started + 1 < want ? rvk_pool_started + 1 : want;
}

/* Hands the region's tasks to the workers (tasks 1..n-1 to workers 1..n-1 with first 0; all
 * n round the `span` workers from `first` else) and wakes those asleep. */
static void rvk_pool_publish(int n, int first, int span, long scratch_floats, rvk_task_fn fn,
                             void *ctx) {
    rvk_pool_fn = fn;
    rvk_pool_ctx = ctx;
    rvk_pool_need = scratch_floats > 0 ? scratch_floats : 1;
    __atomic_store_n(&rvk_pool_norphans, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&rvk_pool_pending, (unsigned long)(first ? n : n - 1), __ATOMIC_RELAXED);
    const unsigned long gen = (__atomic_load_n(&rvk_pool_job, __ATOMIC_RELAXED) >> 30) + 1;
    __atomic_store_n(&rvk_pool_job, (gen << 30) | ((unsigned long)span << 20) |
                     ((unsigned long)first << 10) | (unsigned long)n, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&rvk_pool_sleepers, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&rvk_pool_lock);
        pthread_cond_broadcast(&rvk_pool_wake);
        pthread_mutex_unlock(&rvk_pool_lock);
    }
}

/* Waits, polling then asleep, until every worker's task of the region is done. */
static void rvk_pool_join(void) {
    if (rvk_pool_poll(&rvk_pool_pending, 0, 0)) return;
    pthread_mutex_lock(&rvk_pool_lock);
    __atomic_store_n(&rvk_pool_waiting, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&rvk_pool_pending, __ATOMIC_SEQ_CST) > 0)
        pthread_cond_wait(&rvk_pool_done, &rvk_pool_lock);
    __atomic_store_n(&rvk_pool_waiting, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&rvk_pool_lock);
}

/* Runs fn(ctx, t, n, scratch) for t = 0..n-1 on the pool, n = min(max_tasks, threads,
 * work / grain): `work` is the region's multiply-accumulates (or element operations), and a
 * task below the grain would cost more to hand over than it saves. The caller runs task 0
 * (and any handed back) with `scratch0`, worker t task t with `scratch_floats` of its own;
 * a region of fewer tasks than threads runs on workers alone (see the top of this file). */
RVK_POOL_FN RVK_POOL_OPAQUE void rvk_parallel(int max_tasks, long work, long scratch_floats,
                                              float *scratch0, rvk_task_fn fn, void *ctx) {
    pthread_once(&rvk_pool_once, rvk_pool_init);
    /* Busy: a task of a region calling a parallel kernel (nested), or another caller of this
     * object. Either way the caller alone runs it, with only its own scratch. */
    if (pthread_mutex_trylock(&rvk_pool_region) != 0) {
        fn(ctx, 0, 1, scratch0);
        return;
    }
    if (rvk_pool_want == 0) rvk_pool_want = rvk_pool_default();
    if (rvk_pool_grain == 0) rvk_pool_grain = rvk_pool_env("RVVKIT_TASK_GRAIN", RVK_TASK_GRAIN);
    const long by_work = work / rvk_pool_grain;
    int n = max_tasks < rvk_pool_want ? max_tasks : rvk_pool_want;
    if (by_work < n) n = by_work < 1 ? 1 : (int)by_work;
    int first = 0, workers = 0;
    if (n > 1) {
        workers = rvk_pool_start(rvk_pool_want) - 1;
        if (n > workers + 1) n = workers + 1;
        if (n > 1 && n <= workers) {   /* on workers alone, from where the last one ended */
            first = 1 + (int)(rvk_pool_turn % (unsigned)workers);
            rvk_pool_turn += (unsigned)n;
        }
    }
    if (n > 1) rvk_pool_publish(n, first, workers, scratch_floats, fn, ctx);
    if (first == 0) fn(ctx, 0, n > 1 ? n : 1, scratch0);
    if (n > 1) {
        rvk_pool_join();
        const unsigned long k = __atomic_load_n(&rvk_pool_norphans, __ATOMIC_ACQUIRE);
        for (unsigned long i = 0; i < k; ++i) fn(ctx, rvk_pool_orphan[i], n, scratch0);
    }
    pthread_mutex_unlock(&rvk_pool_region);
}

/* [*lo, *hi): part `task` of `ntasks` of `units` units, the last `units % ntasks` parts one
 * unit longer: task 0 runs on the caller, which also runs the steps between regions (a
 * decoding step's norms and attention, the sampler), so it takes a short part. */
RVK_POOL_FN void rvk_split(int units, int task, int ntasks, int *lo, int *hi) {
    const int base = units / ntasks, short_parts = ntasks - units % ntasks;
    *lo = task * base + (task > short_parts ? task - short_parts : 0);
    *hi = *lo + base + (task >= short_parts ? 1 : 0);
}

/* The count the next region uses; n <= 0 picks the default again. Returns the count set. */
RVK_POOL_FN int rvk_pool_set_threads(int n) {
    pthread_once(&rvk_pool_once, rvk_pool_init);
    pthread_mutex_lock(&rvk_pool_region);
    rvk_pool_want = n > 0 ? (n > RVK_MAX_THREADS ? RVK_MAX_THREADS : n) : rvk_pool_default();
    const int got = rvk_pool_want;
    pthread_mutex_unlock(&rvk_pool_region);
    return got;
}

/* Unloading the object (dlclose) must not leave workers asleep in its code. */
#if defined(__GNUC__)
__attribute__((destructor))
#endif
static void rvk_pool_shutdown(void) {
    if (rvk_pool_started == 0) return;
    pthread_mutex_lock(&rvk_pool_lock);
    rvk_pool_stop = 1;
    pthread_cond_broadcast(&rvk_pool_wake);
    pthread_mutex_unlock(&rvk_pool_lock);
    /* a polling worker goes to sleep within the spin time, sees the stop and ends */
    for (int id = 1; id <= rvk_pool_started; ++id) pthread_join(rvk_pool_tid[id], NULL);
    for (int id = 0; id < RVK_MAX_THREADS; ++id) free(rvk_pool_scratch[id]);
    rvk_pool_started = 0;
}

#endif /* RVK_POOL_H */
