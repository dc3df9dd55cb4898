/*
 * qemu_icount.c - QEMU TCG plugin: exact dynamic instruction counts for riscv64 guests,
 * per guest thread.
 *
 * Counts, over the whole emulated program and for each vCPU (qemu-user runs every guest
 * thread on a vCPU of its own, numbered by vcpu_index):
 *   insns         every executed guest instruction (compressed ones included)
 *   vector_insns  executed RVV instructions: major opcode OP-V (0x57, which includes the
 *                 vsetvl family), and LOAD-FP (0x07) / STORE-FP (0x27) whose width field
 *                 (bits 14:12) is 0, 5, 6 or 7 (widths 1-4 are scalar flh/flw/fld/flq)
 *   vsetvl        executed vsetvli / vsetivli / vsetvl (OP-V with funct3 == 7), a subset
 *                 of vector_insns
 *   lmul_weighted_vector_ops
 *                 the sum, over executed RVV instructions, of the register-group size of the
 *                 vtype in force when each executes, i.e. the LMUL set by the last
 *                 vsetvli/vsetivli of the same thread: LMUL 2, 4, 8 count 2, 4, 8; LMUL 1 and
 *                 the fractional LMULs mf2, mf4, mf8 count 1. Exceptions, whose size does not
 *                 come from vtype: vsetvli/vsetivli/vsetvl themselves count 1; whole-register
 *                 loads, stores and moves (vl<nf>re<eew>.v, vs<nf>r.v, vmv<nr>r.v) count their
 *                 NFIELDS/NREG register count (1, 2, 4, 8) whatever vtype says; mask loads
 *                 and stores (vlm.v, vsm.v) count 1. Every other instruction counts vtype's
 *                 LMUL as it stands, so widening and narrowing instructions count the LMUL of
 *                 their single-width source group (not the 2*LMUL destination or source),
 *                 loads and stores of another element width count vtype's LMUL (not their
 *                 EMUL), and mask-register and scalar-move instructions count it too. A
 *                 vector instruction at LMUL 8 does eight registers' work, so this figure,
 *                 not vector_insns, is the one to compare across code that picks different
 *                 LMULs.
 *   vector_insns_unknown_lmul
 *                 executed vector instructions whose weight depends on vtype (all but the
 *                 three exceptions above) that ran while vtype was unknown to the plugin:
 *                 set by vsetvl (register form: its vtype comes from a register, which a
 *                 QEMU 7.2 plugin cannot read), or not set since the thread started, or on a
 *                 vCPU past the per-vCPU table (below). They are counted at LMUL 1 in
 *                 lmul_weighted_vector_ops, which is therefore a lower bound when this is
 *                 non-zero. rvvkit's generated code uses vsetvli only: 0 there.
 * and writes one JSON line at exit: the totals over all vCPUs under the keys above, then
 *     "per_thread": [{"vcpu": I, "insns": .., "vector_insns": .., "vsetvl": ..,
 *                     "lmul_weighted_vector_ops": .., "vector_insns_unknown_lmul": ..}, ...]
 * one entry per vCPU index below MAX_VCPUS that executed anything, in index order, and
 *     "per_thread_overflow": null, or {"first_vcpu": MAX_VCPUS, <the five counts>}
 * the counts of all vCPUs with an index >= MAX_VCPUS together (also reported on stderr).
 * The totals equal the sum of per_thread and per_thread_overflow, key by key. qemu-user
 * gives a new thread the lowest index above those of the live vCPUs, so an index freed by
 * an ended thread can be reused: an entry is per index, not per thread ever started (a
 * persistent thread pool keeps one index per worker).
 *
 * Build (host compiler; the plugin runs inside the host's qemu-riscv64, not in the guest):
 *     make -C toolchain/qemu_plugin
 *     (or: cc -O2 -shared -fPIC qemu_icount.c -o libqemu_icount.so)
 * Use:
 *     qemu-riscv64 -plugin ./libqemu_icount.so,out=/tmp/counts.json -cpu rv64,v=true,... prog
 *   arguments (QEMU 7.2 also accepts the deprecated "arg=out=PATH", passed on identically):
 *     out=PATH      write the JSON line to PATH (default: qemu_plugin_outs, i.e. the QEMU log,
 *                   visible only with "-d plugin")
 *     mode=tb       (default) counts per translation block: fastest
 *     mode=insn     one callback per instruction: slower, kept to cross-check mode=tb
 *     blocks=PATH   (mode=tb) also write a profile to PATH: the lines of /proc/self/maps that
 *                   map files ("M <line>"; qemu-user on a 64-bit host maps the guest at its
 *                   own addresses, so they give each block's file and offset), then one line
 *                   per translated block that ran: "B <guest vaddr hex> <executions> <insns>
 *                   <vector insns> <LMUL-weighted ops>", the last three summed over its
 *                   executions (rvvkit/runtime/counting/iprofile.py attributes them to functions)
 *   A comma inside PATH must be doubled (QEMU's option syntax).
 *
 * Why it is written this way:
 * - Debian ships no qemu-plugin.h, so the handful of API v1 entry points used are declared
 *   below by hand; they resolve against the qemu executable when it dlopen()s the plugin.
 *   No glib is needed: the plugin uses only libc.
 * - QEMU 7.2's disassembler does not know RVV, so instructions are classified from their
 *   encoding bytes, once, at translation time; execution then only adds up.
 * - Per vCPU, because guest threads run in parallel on host threads: shared counters would
 *   race, and a thread pool's critical path needs each thread's own count. Each vCPU has a
 *   slot (its counters and its vtype) on a cache line of its own, so threads neither race
 *   nor share lines; only the thread of a vCPU writes its slot (a freed index is reused only
 *   after its thread has gone). vCPUs past the table share the overflow slot, which is
 *   added to atomically and tracks no vtype (their vtype-dependent instructions count as
 *   unknown LMUL): a count is never dropped, and never guessed.
 * - mode=tb has two ways of adding a block's totals. QEMU 7.2's inline add
 *   (QEMU_PLUGIN_INLINE_ADD_U64) targets one fixed address, so it cannot be per vCPU; a
 *   callback receives vcpu_index but costs a helper call per executed block. So: while the
 *   guest has one thread, blocks add inline into that vCPU's slot; once it starts a second
 *   (a clone with CLONE_VM, seen by the syscall callback before QEMU carries it out, or a
 *   second vCPU appearing), blocks translated from then on add through one exec callback
 *   whose userdata holds the block's totals. No inline block is ever run by another thread:
 *   QEMU marks every vCPU CF_PARALLEL at the first clone, before the new vCPU exists, and
 *   never runs a block translated without that flag on a vCPU that has it. A
 *   single-threaded program therefore counts at the old inline speed.
 * - mode=tb adds a block's totals when the block starts. That equals the retired count unless
 *   a block is left half-way by a synchronous fault (a guest SIGSEGV etc.), which a program
 *   that runs to a normal exit does not do. mode=insn counts each instruction as it
 *   starts, always through a callback (no inline adds, no static knowledge of the block), so
 *   the two are independent; they agree, per thread, on every normal run
 *   (tests/qemu/test_icount*.py check this).
 * - LMUL weighting. The vtype immediate of vsetvli (bits 30:20) and vsetivli (bits 29:20) is
 *   decoded at translation time (vlmul = its bits 2:0). A vector instruction that follows a
 *   vtype setter in the same block has a weight known then, part of the block's totals. One
 *   before the block's first setter depends on the vtype at block entry, which the plugin
 *   tracks per vCPU: in mode=tb a block with such instructions, or with a setter, gets an
 *   exec callback (userdata: the number of those leading instructions and the LMUL its last
 *   setter leaves) that adds count * that vCPU's LMUL and then moves it on; blocks without
 *   either get no callback while single-threaded. (QEMU 7.2 ends a block at every vsetvl*,
 *   since vtype is part of its translation state, so in practice every vector instruction
 *   is such a leading one and every setter is its block's last instruction; the same-block
 *   path is kept for QEMUs that do otherwise.) mode=insn sets the vCPU's LMUL at each setter
 *   and adds it at each vtype-dependent vector instruction. A new vCPU starts with its vtype
 *   unknown: code that uses vectors sets vtype first (the calling convention does not
 *   preserve it), so this costs nothing in practice.
 * - The exec callback's userdata is allocated at translation and never freed: QEMU 7.2 tells
 *   a plugin nothing when a block is discarded, and QEMU's own cost per translation is far
 *   larger, so memory grows only as fast as QEMU translates.
 */
#define _POSIX_C_SOURCE 200809L /* strdup, open_memstream under -std=c11 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- QEMU plugin API, version 1 (the subset this plugin uses) -------------------------- */
#define PLUGIN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;

/* Only the leading members are read; QEMU owns the struct and its full layout. */
typedef struct {
    const char *target_name;
    struct { int min; int cur; } version;
} qemu_info_t;

enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 }; /* R_REGS, RW_REGS follow; unused */

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index,
                                              int64_t num, uint64_t a1, uint64_t a2,
                                              uint64_t a3, uint64_t a4, uint64_t a5,
                                              uint64_t a6, uint64_t a7, uint64_t a8);

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  qemu_plugin_vcpu_tb_trans_cb_t cb);
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
                                                     enum qemu_plugin_op op, void *ptr,
                                                     uint64_t imm);
extern void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
                                                 qemu_plugin_vcpu_udata_cb_t cb,
                                                 enum qemu_plugin_cb_flags flags,
                                                 void *userdata);
extern void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                                   qemu_plugin_vcpu_udata_cb_t cb,
                                                   enum qemu_plugin_cb_flags flags,
                                                   void *userdata);
extern void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id,
                                              qemu_plugin_vcpu_simple_cb_t cb);
extern void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id,
                                                 qemu_plugin_vcpu_syscall_cb_t cb);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
                                                        size_t idx);
extern const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                           void *userdata);
extern void qemu_plugin_outs(const char *string);
extern uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

#include "plugin_out.h"

PLUGIN_EXPORT int qemu_plugin_version = 1;

/* ---- state ----------------------------------------------------------------------------- */
enum { K_INSNS, K_VECTOR, K_VSETVL, K_WEIGHTED, K_UNKNOWN, N_KEYS };
static const char *const KEY_NAMES[N_KEYS] = {
    "insns", "vector_insns", "vsetvl", "lmul_weighted_vector_ops", "vector_insns_unknown_lmul",
};

/* Register-group size of the vtype in force (1, 2, 4, 8); LMUL_UNKNOWN after a vsetvl
 * (register form), before the vCPU's first setter, and always in the overflow slot. */
#define LMUL_UNKNOWN 0

/* One vCPU's counters and vtype, alone on its 64-byte cache line (no false sharing between
 * threads that count side by side). */
typedef struct {
    _Alignas(64) uint64_t n[N_KEYS];
    uint64_t lmul;
} vcpu_slot;

#define MAX_VCPUS 256
static vcpu_slot slots[MAX_VCPUS + 1]; /* [MAX_VCPUS]: every vCPU with a larger index */
#define OVERFLOW (&slots[MAX_VCPUS])

static char *out_path;          /* NULL: qemu_plugin_outs */
static bool per_insn;           /* mode=insn */
static char *blocks_path;       /* blocks=PATH: the per-block profile */
static bool threaded;           /* a second guest thread exists or is being started */
static unsigned int first_vcpu; /* the vCPU of the guest's first thread (inline adds) */
static unsigned int vcpus_seen;

static inline vcpu_slot *slot_of(unsigned int vcpu)
{
    return vcpu < MAX_VCPUS ? &slots[vcpu] : OVERFLOW;
}

/* Only a vCPU's own thread writes its slot; the shared overflow slot needs atomic adds. */
static inline void add(vcpu_slot *s, int key, uint64_t n)
{
    if (s == OVERFLOW)
        __atomic_fetch_add(&s->n[key], n, __ATOMIC_RELAXED);
    else
        s->n[key] += n;
}

static inline void set_lmul(vcpu_slot *s, uint64_t lmul)
{
    if (s != OVERFLOW) /* shared by several vCPUs: no one vtype to track */
        s->lmul = lmul;
}

/* Add n vtype-dependent vector instructions executed under the slot's current vtype. */
static inline void add_under_cur(vcpu_slot *s, uint64_t n)
{
    if (s->lmul == LMUL_UNKNOWN) {
        add(s, K_WEIGHTED, n);
        add(s, K_UNKNOWN, n);
    } else {
        add(s, K_WEIGHTED, n * s->lmul);
    }
}

/* What one instruction is, and how it weighs. */
enum {
    CLASS_SCALAR = 0,
    CLASS_VECTOR,   /* weight = LMUL of the vtype in force */
    CLASS_FIXED,    /* vector, weight fixed by the encoding (whole-register, mask ld/st) */
    CLASS_VSETVL,   /* vsetvli/vsetivli/vsetvl: weight 1; sets the vtype (lmul below) */
};

typedef struct {
    int cls;
    uint64_t weight; /* CLASS_FIXED: the weight */
    uint64_t lmul;   /* CLASS_VSETVL: the group size it sets, or LMUL_UNKNOWN (vsetvl) */
} insn_info;

static uint32_t insn_word(const struct qemu_plugin_insn *insn)
{
    const uint8_t *b = qemu_plugin_insn_data(insn);  /* RISC-V is little-endian in memory */
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Group size from a vtype immediate's vlmul (bits 2:0): 000 m1, 001 m2, 010 m4, 011 m8;
 * 101/110/111 are mf8/mf4/mf2 and count 1; 100 is reserved (QEMU sets vill and every later
 * vector instruction traps) and counts 1 too. */
static uint64_t lmul_of_vtypei(uint32_t vtypei)
{
    uint32_t vlmul = vtypei & 7;
    return vlmul <= 3 ? (uint64_t)1 << vlmul : 1;
}

/* Classify one instruction from its encoding. */
static insn_info classify(const struct qemu_plugin_insn *insn)
{
    insn_info r = { CLASS_SCALAR, 0, 0 };
    if (qemu_plugin_insn_size(insn) != 4) /* 16-bit compressed: never vector */
        return r;
    uint32_t w = insn_word(insn);
    uint32_t opcode = w & 0x7f, funct3 = (w >> 12) & 7;
    uint32_t nf = w >> 29, mop = (w >> 26) & 3, umop = (w >> 20) & 0x1f;
    switch (opcode) {
    case 0x57: /* OP-V; funct3 7 is OP-CFG: vsetvli, vsetivli, vsetvl */
        if (funct3 == 7) {
            r.cls = CLASS_VSETVL;
            if (!(w >> 31))                  /* vsetvli: 0 zimm[10:0] rs1 111 rd */
                r.lmul = lmul_of_vtypei((w >> 20) & 0x7ff);
            else if ((w >> 30) == 3)         /* vsetivli: 11 zimm[9:0] uimm 111 rd */
                r.lmul = lmul_of_vtypei((w >> 20) & 0x3ff);
            else                             /* vsetvl: vtype from rs2, unknown here */
                r.lmul = LMUL_UNKNOWN;
        } else if (funct3 == 3 && (w >> 26) == 0x27) {
            /* OPIVI funct6 100111: vmv<nr>r.v, simm5 (bits 19:15) = nr - 1 */
            r.cls = CLASS_FIXED;
            r.weight = ((w >> 15) & 0x1f) + 1;
        } else {
            r.cls = CLASS_VECTOR;
        }
        return r;
    case 0x07: /* LOAD-FP  */
    case 0x27: /* STORE-FP */
        if (funct3 != 0 && funct3 < 5)
            return r; /* scalar flh/flw/fld/flq, fsh/fsw/fsd/fsq */
        if (mop == 0 && umop == 0x08) {        /* vl<nf>re<eew>.v / vs<nf>r.v */
            r.cls = CLASS_FIXED;
            r.weight = (uint64_t)nf + 1;
        } else if (mop == 0 && umop == 0x0b) { /* vlm.v / vsm.v */
            r.cls = CLASS_FIXED;
            r.weight = 1;
        } else {
            r.cls = CLASS_VECTOR;
        }
        return r;
    default:
        return r;
    }
}

/* ---- mode=tb ----------------------------------------------------------------------------- */
/* What one translated block adds each time it runs (exec callback userdata). A block holds
 * at most 512 instructions (TCG_MAX_INSNS), so 32-bit fields suffice. */
typedef struct tb_info {
    uint32_t n[N_KEYS];  /* the block's static totals; added here unless added inline */
    uint32_t leading;    /* vtype-dependent vector insns before its first setter */
    bool add_totals;     /* false: n[] is added inline (single-threaded guest) */
    bool has_setter;
    uint8_t setter_lmul; /* the LMUL its last setter leaves (LMUL_UNKNOWN: a vsetvl) */
    /* blocks=PATH only: where it is, and what it added over its executions */
    uint64_t vaddr, execs, weighted;
    struct tb_info *next;
} tb_info;

static tb_info *profiled; /* blocks=PATH: every instrumented block, newest first */

static void on_tb_exec(unsigned int vcpu_index, void *userdata)
{
    tb_info *t = userdata;
    vcpu_slot *s = slot_of(vcpu_index);
    if (t->add_totals) {
        for (int k = 0; k < N_KEYS; k++)
            add(s, k, t->n[k]);
    }
    if (blocks_path) { /* the weight of its leading instructions is the vtype at entry */
        uint64_t lead = t->leading * (s->lmul == LMUL_UNKNOWN ? 1 : s->lmul);
        __atomic_fetch_add(&t->execs, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->weighted, t->n[K_WEIGHTED] + lead, __ATOMIC_RELAXED);
    }
    if (t->leading)
        add_under_cur(s, t->leading);
    if (t->has_setter)
        set_lmul(s, t->setter_lmul);
}

/* A block's static totals, and what its callback must do at run time. */
static tb_info summarise_tb(struct qemu_plugin_tb *tb)
{
    tb_info t = { { 0 }, 0, false, false, LMUL_UNKNOWN, 0, 0, 0, NULL };
    size_t n = qemu_plugin_tb_n_insns(tb);
    t.n[K_INSNS] = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        insn_info c = classify(qemu_plugin_tb_get_insn(tb, i));
        if (c.cls == CLASS_SCALAR)
            continue;
        t.n[K_VECTOR]++;
        switch (c.cls) {
        case CLASS_VSETVL:
            t.n[K_VSETVL]++;
            t.n[K_WEIGHTED] += 1;
            t.has_setter = true;
            t.setter_lmul = (uint8_t)c.lmul;
            break;
        case CLASS_FIXED:
            t.n[K_WEIGHTED] += (uint32_t)c.weight;
            break;
        default:
            if (!t.has_setter) {
                t.leading++;                     /* vtype at block entry: the callback's */
            } else if (t.setter_lmul == LMUL_UNKNOWN) {
                t.n[K_WEIGHTED] += 1;            /* after a vsetvl in this block */
                t.n[K_UNKNOWN] += 1;
            } else {
                t.n[K_WEIGHTED] += t.setter_lmul; /* after a vsetvli/vsetivli here */
            }
        }
    }
    return t;
}

static void instrument_tb(struct qemu_plugin_tb *tb)
{
    tb_info t = summarise_tb(tb);
    /* a profiled block counts in its callback: the profile needs its executions anyway */
    t.add_totals = blocks_path || __atomic_load_n(&threaded, __ATOMIC_ACQUIRE);
    if (!t.add_totals) {
        vcpu_slot *s = slot_of(first_vcpu);
        for (int k = 0; k < N_KEYS; k++) {
            if (t.n[k])
                qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                                         &s->n[k], t.n[k]);
        }
        if (!t.leading && !t.has_setter)
            return; /* nothing depends on the vtype at run time */
    }
    tb_info *heap = malloc(sizeof *heap);
    if (!heap) { /* uncounted blocks would make every figure wrong: stop instead */
        fputs("qemu_icount: out of memory\n", stderr);
        abort();
    }
    *heap = t;
    if (blocks_path) {
        heap->vaddr = qemu_plugin_tb_vaddr(tb);
        heap->next = __atomic_load_n(&profiled, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&profiled, &heap->next, heap, true,
                                            __ATOMIC_RELEASE, __ATOMIC_RELAXED))
            ;
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, heap);
}

/* ---- mode=insn --------------------------------------------------------------------------- */
/* userdata: the class in bits 3:0, and above them the weight (CLASS_FIXED) or the LMUL set
 * (CLASS_VSETVL). */
static void on_insn_exec(unsigned int vcpu_index, void *userdata)
{
    uintptr_t u = (uintptr_t)userdata, arg = u >> 4;
    vcpu_slot *s = slot_of(vcpu_index);
    add(s, K_INSNS, 1);
    switch (u & 0xf) {
    case CLASS_SCALAR:
        return;
    case CLASS_VSETVL:
        add(s, K_VSETVL, 1);
        add(s, K_WEIGHTED, 1);
        set_lmul(s, arg);
        break;
    case CLASS_FIXED:
        add(s, K_WEIGHTED, arg);
        break;
    default:
        add_under_cur(s, 1);
    }
    add(s, K_VECTOR, 1);
}

static void instrument_insns(struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        insn_info c = classify(insn);
        uintptr_t arg = c.cls == CLASS_FIXED ? c.weight : c.cls == CLASS_VSETVL ? c.lmul : 0;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn_exec, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(arg << 4 | (uintptr_t)c.cls));
    }
}

/* Called once per translation (not per execution): decide what the block adds. */
static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    if (per_insn)
        instrument_insns(tb);
    else
        instrument_tb(tb);
}

/* ---- threads ------------------------------------------------------------------------------ */
/* A new vCPU: the first names the slot of inline adds; any other means threads. A reused
 * index starts with the vtype unknown, not the ended thread's. */
static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    if (__atomic_fetch_add(&vcpus_seen, 1, __ATOMIC_ACQ_REL) == 0)
        first_vcpu = vcpu_index;
    else
        __atomic_store_n(&threaded, true, __ATOMIC_RELEASE);
    set_lmul(slot_of(vcpu_index), LMUL_UNKNOWN);
}

/* Runs before QEMU carries the syscall out, so blocks translated after a thread-creating
 * clone (and so every block a second thread can run) count per vCPU. */
#define NR_CLONE 220  /* riscv64 (asm-generic numbers) */
#define NR_CLONE3 435 /* its flags are in memory: treated as a thread, the safe side */
#define CLONE_VM 0x100
static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num,
                       uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
                       uint64_t a6, uint64_t a7, uint64_t a8)
{
    (void)id, (void)vcpu_index, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7,
        (void)a8;
    if (num == NR_CLONE3 || (num == NR_CLONE && (a1 & CLONE_VM)))
        __atomic_store_n(&threaded, true, __ATOMIC_RELEASE);
}

/* ---- output ------------------------------------------------------------------------------ */
static void put_counts(FILE *f, const uint64_t *n)
{
    for (int k = 0; k < N_KEYS; k++)
        fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", KEY_NAMES[k], n[k]);
}

/* The JSON line (see the header), malloc'ed; NULL if out of memory. */
static char *counts_json(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    uint64_t total[N_KEYS] = { 0 };
    for (int i = 0; i <= MAX_VCPUS; i++) {
        for (int k = 0; k < N_KEYS; k++)
            total[k] += slots[i].n[k];
    }
    fputc('{', f);
    put_counts(f, total);
    fputs(", \"per_thread\": [", f);
    const char *sep = "";
    for (int i = 0; i < MAX_VCPUS; i++) {
        if (!slots[i].n[K_INSNS])
            continue;
        fprintf(f, "%s{\"vcpu\": %d, ", sep, i);
        put_counts(f, slots[i].n);
        fputc('}', f);
        sep = ", ";
    }
    fputs("], \"per_thread_overflow\": ", f);
    if (OVERFLOW->n[K_INSNS]) {
        fprintf(f, "{\"first_vcpu\": %d, ", MAX_VCPUS);
        put_counts(f, OVERFLOW->n);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fputs("}\n", f);
    return fclose(f) == 0 ? text : NULL;
}

/* blocks=PATH: the file mappings, then every block that ran (see the header). */
static void write_blocks(void)
{
    FILE *f = fopen(blocks_path, "w");
    FILE *maps = fopen("/proc/self/maps", "r");
    bool ok = f && maps;
    char line[4096];
    while (ok && fgets(line, sizeof line, maps)) {
        if (strchr(line, '/'))
            ok = fprintf(f, "M %s", line) > 0;
    }
    for (const tb_info *t = profiled; ok && t; t = t->next) {
        uint64_t execs = __atomic_load_n(&t->execs, __ATOMIC_RELAXED);
        if (execs)
            ok = fprintf(f, "B %" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
                         t->vaddr, execs, execs * t->n[K_INSNS], execs * t->n[K_VECTOR],
                         __atomic_load_n(&t->weighted, __ATOMIC_RELAXED)) > 0;
    }
    if (maps)
        fclose(maps);
    if (!f || fclose(f) != 0 || !ok)
        fprintf(stderr, "qemu_icount: cannot write %s: %s\n", blocks_path, strerror(errno));
}

static void write_counts(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    if (OVERFLOW->n[K_INSNS]) /* stderr is the guest's too, but this must not go unseen */
        fprintf(stderr, "qemu_icount: %" PRIu64 " instructions ran on vCPUs with index >= %d; "
                "counted together in per_thread_overflow\n", OVERFLOW->n[K_INSNS], MAX_VCPUS);
    if (blocks_path)
        write_blocks();
    char *line = counts_json();
    if (!line) {
        fputs("qemu_icount: out of memory writing the counts\n", stderr);
        return;
    }
    plugin_emit("qemu_icount", out_path, line);
    free(line);
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                      char **argv)
{
    if (!info->target_name || strncmp(info->target_name, "riscv", 5) != 0) {
        /* the opcode classification above is RISC-V's; refuse rather than count nonsense */
        fprintf(stderr, "qemu_icount: target %s is not RISC-V\n",
                info->target_name ? info->target_name : "?");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "arg=", 4) == 0) /* tolerate the pre-7.x spelling arriving verbatim */
            a += 4;
        if (strncmp(a, "out=", 4) == 0 && a[4]) {
            free(out_path);
            out_path = strdup(a + 4);
        } else if (strncmp(a, "blocks=", 7) == 0 && a[7]) {
            free(blocks_path);
            blocks_path = strdup(a + 7);
        } else if (strcmp(a, "mode=tb") == 0) {
            per_insn = false;
        } else if (strcmp(a, "mode=insn") == 0) {
            per_insn = true;
        } else {
            fprintf(stderr, "qemu_icount: unknown argument '%s' (expected out=PATH, "
                            "blocks=PATH, mode=tb or mode=insn)\n", argv[i]);
            return -1;
        }
    }
    if (blocks_path && per_insn) {
        fputs("qemu_icount: blocks=PATH profiles per block: it needs mode=tb\n", stderr);
        return -1;
    }
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
