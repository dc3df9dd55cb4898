/*
 * qemu_icount.c - QEMU TCG plugin: exact dynamic instruction counts for riscv64 guests.
 *
 * Counts, over the whole emulated program:
 *   insns         every executed guest instruction (compressed ones included)
 *   vector_insns  executed RVV instructions: major opcode OP-V (0x57, which includes the
 *                 vsetvl family), and LOAD-FP (0x07) / STORE-FP (0x27) whose width field
 *                 (bits 14:12) is 0, 5, 6 or 7 (widths 1-4 are scalar flh/flw/fld/flq)
 *   vsetvl        executed vsetvli / vsetivli / vsetvl (OP-V with funct3 == 7), a subset
 *                 of vector_insns
 *   lmul_weighted_vector_ops
 *                 the sum, over executed RVV instructions, of the register-group size of the
 *                 vtype in force when each executes, i.e. the LMUL set by the last
 *                 vsetvli/vsetivli: LMUL 2, 4, 8 count 2, 4, 8; LMUL 1 and the fractional
 *                 LMULs mf2, mf4, mf8 count 1. Exceptions, whose size does not come from
 *                 vtype: vsetvli/vsetivli/vsetvl themselves count 1; whole-register loads,
 *                 stores and moves (vl<nf>re<eew>.v, vs<nf>r.v, vmv<nr>r.v) count their
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
 *                 QEMU 7.2 plugin cannot read) or never set. They are counted at LMUL 1 in
 *                 lmul_weighted_vector_ops, which is therefore a lower bound when this is
 *                 non-zero. rvvkit's generated code uses vsetvli only: 0 there.
 * and writes one JSON line {"insns": N, "vector_insns": V, "vsetvl": S,
 * "lmul_weighted_vector_ops": W, "vector_insns_unknown_lmul": U} at exit.
 *
 * Build (host compiler; the plugin runs inside the host's qemu-riscv64, not in the guest):
 *     make -C toolchain/qemu_plugin
 *     (or: cc -O2 -shared -fPIC qemu_icount.c -o libqemu_icount.so)
 * Use:
 *     qemu-riscv64 -plugin ./libqemu_icount.so,out=/tmp/counts.json -cpu rv64,v=true,... prog
 *   arguments (QEMU 7.2 also accepts the deprecated "arg=out=PATH", passed on identically):
 *     out=PATH      write the JSON line to PATH (default: qemu_plugin_outs, i.e. the QEMU log,
 *                   visible only with "-d plugin")
 *     mode=tb       (default) one inline add per translation block per counter, and one
 *                   callback per executed block that holds vector instructions: fastest
 *     mode=insn     one inline add or callback per instruction: slower, kept to cross-check
 *                   mode=tb
 *   A comma inside PATH must be doubled (QEMU's option syntax).
 *
 * Why it is written this way:
 * - Debian ships no qemu-plugin.h, so the handful of API v1 entry points used are declared
 *   below by hand; they resolve against the qemu executable when it dlopen()s the plugin.
 *   No glib is needed: the plugin uses only libc.
 * - QEMU 7.2's disassembler does not know RVV, so instructions are classified from their
 *   encoding bytes, once, at translation time. Execution then costs inline counter
 *   additions generated into the translated code (QEMU_PLUGIN_INLINE_ADD_U64), plus, for the
 *   LMUL weighting only, a cheap callback on blocks that hold vector instructions (below).
 * - mode=tb adds a block's totals when the block starts. That equals the retired count unless
 *   a block is left half-way by a synchronous fault (a guest SIGSEGV etc.), which a program
 *   that runs to a normal exit does not do. mode=insn counts each instruction as it
 *   starts; the two agree on every normal run (tests/qemu/test_icount.py checks this).
 * - LMUL weighting. The vtype immediate of vsetvli (bits 30:20) and vsetivli (bits 29:20) is
 *   decoded at translation time (vlmul = its bits 2:0). A vector instruction that follows a
 *   vtype setter in the same block has a weight known then, added inline. One before the
 *   block's first setter depends on the vtype at block entry, which the plugin tracks in
 *   cur_lmul: in mode=tb a block with such instructions, or with a setter, gets one exec
 *   callback (userdata: the number of those leading instructions and the LMUL its last setter
 *   leaves) that adds count * cur_lmul and then moves cur_lmul on; blocks without either get
 *   no callback. (QEMU 7.2 ends a block at every vsetvl*, since vtype is part of its
 *   translation state, so in practice every vector instruction is such a leading one and
 *   every setter is its block's last instruction; the same-block path is kept for QEMUs that
 *   do otherwise.) mode=insn uses no static knowledge: every setter gets a callback that sets
 *   cur_lmul and every vtype-dependent vector instruction one that adds it, so the two modes
 *   check each other.
 * - The counters are plain uint64_t, not per-vCPU: qemu-user runs a single-threaded guest on
 *   one vCPU. A guest that starts threads (OpenMP) would race on them; count with 1 thread.
 */
#define _POSIX_C_SOURCE 200809L /* strdup under -std=c11 */
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
extern void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
                                                       enum qemu_plugin_op op, void *ptr,
                                                       uint64_t imm);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
                                                        size_t idx);
extern const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                           void *userdata);
extern void qemu_plugin_outs(const char *string);

PLUGIN_EXPORT int qemu_plugin_version = 1;

/* ---- state ----------------------------------------------------------------------------- */
/* incremented by generated code and by the callbacks below */
static uint64_t n_insns, n_vector, n_vsetvl, n_weighted, n_unknown;
/* Register-group size of the vtype in force (1, 2, 4, 8); LMUL_UNKNOWN after a vsetvl (register
 * form) and before any setter has run. Only the callbacks read or write it. */
#define LMUL_UNKNOWN 0
static uint64_t cur_lmul = LMUL_UNKNOWN;
static char *out_path;                         /* NULL: qemu_plugin_outs */
static bool per_insn;                          /* mode=insn */

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

/* Add n vtype-dependent vector instructions executed under the current vtype. */
static inline void add_under_cur(uint64_t n)
{
    if (cur_lmul == LMUL_UNKNOWN) {
        n_weighted += n;
        n_unknown += n;
    } else {
        n_weighted += n * cur_lmul;
    }
}

/* mode=tb, once per execution of a block that has leading vtype-dependent vector
 * instructions or a setter. userdata: leading count << 8 | has-setter << 4 | last setter's
 * LMUL (0 unknown, 1, 2, 4, 8); a block holds at most 512 instructions, so it fits. */
#define TB_HAS_SETTER 0x10u
static void on_tb_exec(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    uintptr_t u = (uintptr_t)userdata;
    if (u >> 8)
        add_under_cur(u >> 8);
    if (u & TB_HAS_SETTER)
        cur_lmul = u & 0xf;
}

/* mode=insn: every setter, as it executes (userdata: the LMUL it sets) ... */
static void on_setter_exec(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    cur_lmul = (uintptr_t)userdata;
}

/* ... and every vtype-dependent vector instruction. */
static void on_vector_exec(unsigned int vcpu_index, void *userdata)
{
    (void)vcpu_index;
    (void)userdata;
    add_under_cur(1);
}

static void add_inline_tb(struct qemu_plugin_tb *tb, uint64_t *ctr, uint64_t n)
{
    if (n)
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, ctr, n);
}

static void add_inline_insn(struct qemu_plugin_insn *insn, uint64_t *ctr, uint64_t n)
{
    if (n)
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, ctr, n);
}

/* mode=insn: each instruction counts itself as it starts; the vtype is tracked dynamically. */
static void instrument_insn(struct qemu_plugin_insn *insn, insn_info c)
{
    add_inline_insn(insn, &n_insns, 1);
    if (c.cls == CLASS_SCALAR)
        return;
    add_inline_insn(insn, &n_vector, 1);
    switch (c.cls) {
    case CLASS_VSETVL:
        add_inline_insn(insn, &n_vsetvl, 1);
        add_inline_insn(insn, &n_weighted, 1);
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_setter_exec, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)c.lmul);
        break;
    case CLASS_FIXED:
        add_inline_insn(insn, &n_weighted, c.weight);
        break;
    default:
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_vector_exec, QEMU_PLUGIN_CB_NO_REGS,
                                               NULL);
    }
}

/* Called once per translation (not per execution): decide what the block adds. */
static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t vec = 0, vset = 0, weighted = 0, unknown = 0, leading = 0;
    bool seen_setter = false;
    uint64_t lmul = LMUL_UNKNOWN; /* the last setter's, once seen_setter */
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        insn_info c = classify(insn);
        if (per_insn) {
            instrument_insn(insn, c);
            continue;
        }
        if (c.cls == CLASS_SCALAR)
            continue;
        vec++;
        switch (c.cls) {
        case CLASS_VSETVL:
            vset++;
            weighted += 1;
            seen_setter = true;
            lmul = c.lmul;
            break;
        case CLASS_FIXED:
            weighted += c.weight;
            break;
        default:
            if (!seen_setter) {
                leading++;               /* vtype at block entry: the callback weighs it */
            } else if (lmul == LMUL_UNKNOWN) {
                weighted += 1;           /* after a vsetvl in this block */
                unknown += 1;
            } else {
                weighted += lmul;        /* after a vsetvli/vsetivli in this block */
            }
        }
    }
    if (per_insn)
        return;
    add_inline_tb(tb, &n_insns, n);
    add_inline_tb(tb, &n_vector, vec);
    add_inline_tb(tb, &n_vsetvl, vset);
    add_inline_tb(tb, &n_weighted, weighted);
    add_inline_tb(tb, &n_unknown, unknown);
    if (leading || seen_setter) {
        uintptr_t u = (uintptr_t)leading << 8 | (seen_setter ? TB_HAS_SETTER | lmul : 0);
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)u);
    }
}

static void write_counts(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    char line[320];
    snprintf(line, sizeof line,
             "{\"insns\": %" PRIu64 ", \"vector_insns\": %" PRIu64 ", \"vsetvl\": %" PRIu64
             ", \"lmul_weighted_vector_ops\": %" PRIu64 ", \"vector_insns_unknown_lmul\": %"
             PRIu64 "}\n", n_insns, n_vector, n_vsetvl, n_weighted, n_unknown);
    if (!out_path) {
        qemu_plugin_outs(line);
        return;
    }
    FILE *f = fopen(out_path, "w");
    if (!f || fputs(line, f) < 0 || fclose(f) != 0) {
        /* stderr is shared with the guest, but a lost count must not pass silently */
        fprintf(stderr, "qemu_icount: cannot write %s: %s\n", out_path, strerror(errno));
    }
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
        } else if (strcmp(a, "mode=tb") == 0) {
            per_insn = false;
        } else if (strcmp(a, "mode=insn") == 0) {
            per_insn = true;
        } else {
            fprintf(stderr, "qemu_icount: unknown argument '%s' (expected out=PATH, "
                            "mode=tb or mode=insn)\n", argv[i]);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, write_counts, NULL);
    return 0;
}
