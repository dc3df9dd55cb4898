"""The QEMU counting plugin per guest thread: a pthreads program whose worker k runs a known
number of loop passes at a known LMUL, side by side with the others. Each worker's vCPU entry
must hold exactly its own work (vtype tracked per thread, while the others run at other
LMULs), the entries must add up to the totals, mode=tb and mode=insn must agree entry by entry,
per_run must subtract entry by entry, and vCPUs past the plugin's table must be counted in its
overflow entry, not lost.

The program is built so that every thread's instruction count is repeatable: symbols are bound
at start-up (-z now: no lazy binding paid by whichever thread calls first); threads wait only
inside blocking system calls, whose instruction path does not depend on how long they block;
and a worker's last instruction is its exit(2) ecall, which main waits for on the worker's
clear-child-tid futex, so main's exit never cuts a worker short by a timing-dependent number of
instructions. All workers exist before any works or exits, so qemu-user numbers them 1..T in
creation order (main is vCPU 0) and no index is reused."""
from __future__ import annotations

import subprocess

import pytest

from rvvkit.runtime.counting import icount
from test_icount import CLANG, CLANG_FLAGS, _VREGS, counts, needs_clang, needs_qemu, qemu_prefix

LMULS = (2, 8, 1)  # worker k runs at LMUL LMULS[k % 3] ...
PASSES = (1, 2, 3)  # ... n * PASSES[k % 3] passes of: vadd, vadd, addi, bnez
INSNS_PER_PASS, VECTOR_PER_PASS = 4, 2

THREADS_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#define MAX_THREADS 512
static long n;
static int ready[2], go[2];
static int tids[MAX_THREADS], ctid[MAX_THREADS]; /* ctid[k]: cleared by the kernel at exit */

/* vsetvli once (it ends QEMU's block), then a loop whose vadds start a block each pass: they
 * weigh whatever vtype this thread set, whatever the others run at meanwhile. */
#define LOOP(LMUL, PASSES) __asm__ volatile(                                 \
        "vsetvli t0, zero, e32, " LMUL ", ta, ma\n\t"                       \
        "mv t1, %%0\n\t"                                                    \
        "1:\n\t"                                                            \
        "vadd.vv v8, v8, v8\n\t"                                            \
        "vadd.vv v8, v8, v8\n\t"                                            \
        "addi t1, t1, -1\n\t"                                               \
        "bnez t1, 1b\n\t"                                                   \
        : : "r"(n * PASSES) : "t0", "t1", %s, "memory")

/* The thread's last instruction: exit(2) itself, not glibc's teardown; the kernel (QEMU) then
 * clears ctid[k] and wakes its futex. */
static void exit_thread(void) {
    register long a0 __asm__("a0") = 0, a7 __asm__("a7") = SYS_exit;
    __asm__ volatile("ecall" : : "r"(a0), "r"(a7) : "memory");
    __builtin_unreachable();
}

/* Returns once worker k has exited: blocks while ctid[k] still holds its tid, returns at once
 * if it was cleared already; either way the same instructions (no branch on the result). */
static void wait_exit(int k) {
    register long a0 __asm__("a0") = (long)&ctid[k], a1 __asm__("a1") = 0 /* FUTEX_WAIT */,
        a2 __asm__("a2") = tids[k], a3 __asm__("a3") = 0, a7 __asm__("a7") = SYS_futex;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a2), "r"(a3), "r"(a7) : "memory");
}

static void *worker(void *arg) {
    long k = (long)arg;
    char c;
    tids[k] = ctid[k] = (int)syscall(SYS_set_tid_address, &ctid[k]);
    if (write(ready[1], "x", 1) != 1 || read(go[0], &c, 1) != 1) abort();
    switch (k %% 3) {
    case 0: LOOP("m%d", %d); break;
    case 1: LOOP("m%d", %d); break;
    default: LOOP("m%d", %d); break;
    }
    exit_thread();
    return NULL;
}

int main(int argc, char **argv) {
    n = atol(argv[1]);
    int threads = atoi(argv[2]);
    char c;
    if (n < 1 || threads > MAX_THREADS || pipe(ready) || pipe(go)) return 2;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 16);
    for (long k = 0; k < threads; k++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, (void *)k)) return 3;
    }
    for (int k = 0; k < threads; k++)  /* all exist and know their ctid ... */
        if (read(ready[0], &c, 1) != 1) return 4;
    for (int k = 0; k < threads; k++)  /* ... so let them work */
        if (write(go[1], "x", 1) != 1) return 5;
    for (int k = 0; k < threads; k++)
        wait_exit(k);
    return 0;
}
""" % (_VREGS, LMULS[0], PASSES[0], LMULS[1], PASSES[1], LMULS[2], PASSES[2])

THREAD_FLAGS = [*CLANG_FLAGS, "-pthread", "-Wl,-z,now"]


def worker_counts(k: int, n: int) -> dict:
    """The vector counts worker k must have, exactly (libc and ld.so run no vector code)."""
    passes, lmul = n * PASSES[k % 3], LMULS[k % 3]
    return {"vector_insns": 1 + VECTOR_PER_PASS * passes, "vsetvl": 1,
            "lmul_weighted_vector_ops": 1 + VECTOR_PER_PASS * passes * lmul,
            "vector_insns_unknown_lmul": 0}


def vector_part(entry: dict) -> dict:
    return {k: entry[k] for k in icount.COUNT_KEYS if k != "insns"}


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    if not CLANG:
        pytest.skip("clang-16 not installed")
    root = tmp_path_factory.mktemp("icount-threads")
    (root / "threads.c").write_text(THREADS_C)
    subprocess.run([CLANG, *THREAD_FLAGS, str(root / "threads.c"), "-o", str(root / "threads")],
                   check=True, capture_output=True)
    return str(root / "threads")


@needs_qemu
@needs_clang
def test_each_thread_counts_its_own_work(prog):
    # Long enough that the workers overlap on two host cores: a vtype shared between vCPUs
    # then mis-weighs some worker's vadds (caught 10 runs in 10 at this n, 7 in 10 at 30000).
    n, workers = 100_000, 3
    by_mode = {mode: counts(prog, n, workers, mode=mode) for mode in icount.MODES}
    assert by_mode["insn"] == by_mode["tb"], by_mode  # per thread too, insns included
    c = by_mode["tb"]
    threads = c["per_thread"]
    assert [t["vcpu"] for t in threads] == [0, 1, 2, 3], threads
    assert c["per_thread_overflow"] is None
    for key in icount.COUNT_KEYS:
        assert c[key] == sum(t[key] for t in threads), key
    main, *work = threads
    assert vector_part(main) == dict.fromkeys(vector_part(main), 0)
    for k, t in enumerate(work):
        assert vector_part(t) == worker_counts(k, n), (k, t)
    # more passes, more instructions: worker 2 > worker 1 > worker 0
    assert work[2]["insns"] > work[1]["insns"] > work[0]["insns"] > INSNS_PER_PASS * n


@needs_qemu
@needs_clang
def test_per_run_subtracts_per_thread(prog):
    lo, hi = counts(prog, 1000, 3), counts(prog, 2000, 3)  # same argv length
    d = icount.per_run(hi, lo, 1, whole=True)
    assert [t["vcpu"] for t in d["per_thread"]] == [0, 1, 2, 3]
    main, *work = d["per_thread"]
    assert main == dict(vcpu=0, **dict.fromkeys(icount.COUNT_KEYS, 0))  # its work is fixed
    for k, t in enumerate(work):
        passes, lmul = 1000 * PASSES[k], LMULS[k]
        assert t == {"vcpu": k + 1, "insns": INSNS_PER_PASS * passes,
                     "vector_insns": VECTOR_PER_PASS * passes, "vsetvl": 0,
                     "lmul_weighted_vector_ops": VECTOR_PER_PASS * passes * lmul,
                     "vector_insns_unknown_lmul": 0}, (k, t)
    assert d["insns"] == sum(t["insns"] for t in d["per_thread"])
    assert d["per_thread_overflow"] is None


@needs_qemu
@needs_clang
def test_vcpus_past_the_table_are_counted_in_overflow(prog, tmp_path):
    # 260 workers: vCPUs 1..260, of which 256..260 (workers 255..259) share the overflow slot,
    # which tracks no vtype: their vadds count at LMUL 1, as unknown.
    n, workers, table = 1, 260, 256
    out = tmp_path / "c.json"
    for mode in icount.MODES:
        proc = subprocess.run([*qemu_prefix(), *icount.qemu_plugin_args(out, mode=mode), prog,
                               str(n), str(workers)], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "counted together in per_thread_overflow" in proc.stderr
        c = icount.read_counts(out)  # also checks that the parts add up to the totals
        assert [t["vcpu"] for t in c["per_thread"]] == list(range(table))
        for k, t in enumerate(c["per_thread"][1:]):
            assert vector_part(t) == worker_counts(k, n), (mode, k, t)
        extra = [worker_counts(k, n) for k in range(table - 1, workers)]
        vector = sum(w["vector_insns"] for w in extra)
        assert vector_part(c["per_thread_overflow"]) == {
            "vector_insns": vector, "vsetvl": len(extra), "lmul_weighted_vector_ops": vector,
            "vector_insns_unknown_lmul": vector - len(extra)}, mode
