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
 * and writes one JSON line {"insns": N, "vector_insns": V, "vsetvl": S} at exit.
 *
 * Build (host compiler; the plugin runs inside the host's qemu-riscv64, not in the guest):
 *     make -C toolchain/qemu_plugin
 *     (or: cc -O2 -shared -fPIC qemu_icount.c -o libqemu_icount.so)
 * Use:
 *     qemu-riscv64 -plugin ./libqemu_icount.so,out=/tmp/counts.json -cpu rv64,v=true,... prog
 *   arguments (QEMU 7.2 also accepts the deprecated "arg=out=PATH", passed on identically):
 *     out=PATH      write the JSON line to PATH (default: qemu_plugin_outs, i.e. the QEMU log,
 *                   visible only with "-d plugin")
 *     mode=tb       (default) one inline add per translation block per counter: fastest
 *     mode=insn     one inline add per instruction: slower, kept to cross-check mode=tb
 *   A comma inside PATH must be doubled (QEMU's option syntax).
 *
 * Why it is written this way:
 * - Debian ships no qemu-plugin.h, so the handful of API v1 entry points used are declared
 *   below by hand; they resolve against the qemu executable when it dlopen()s the plugin.
 *   No glib is needed: the plugin uses only libc.
 * - QEMU 7.2's disassembler does not know RVV, so instructions are classified from their
 *   encoding bytes, once, at translation time. Execution then costs only inline counter
 *   additions generated into the translated code (QEMU_PLUGIN_INLINE_ADD_U64), no callbacks.
 * - mode=tb adds a block's totals when the block starts. That equals the retired count unless
 *   a block is left half-way by a synchronous fault (a guest SIGSEGV etc.), which a program
 *   that runs to a normal exit does not do. mode=insn counts each instruction as it
 *   starts; the two agree on every normal run (tests/qemu/test_icount.py checks this).
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

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  qemu_plugin_vcpu_tb_trans_cb_t cb);
extern void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
                                                     enum qemu_plugin_op op, void *ptr,
                                                     uint64_t imm);
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
static uint64_t n_insns, n_vector, n_vsetvl;   /* incremented by generated code */
static char *out_path;                         /* NULL: qemu_plugin_outs */
static bool per_insn;                          /* mode=insn */

enum { CLASS_SCALAR = 0, CLASS_VECTOR = 1, CLASS_VSETVL = 2 };

/* Classify one instruction from its bytes (RISC-V is little-endian in memory). */
static int classify(const struct qemu_plugin_insn *insn)
{
    if (qemu_plugin_insn_size(insn) != 4) /* 16-bit compressed: never vector */
        return CLASS_SCALAR;
    const uint8_t *b = qemu_plugin_insn_data(insn);
    uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 24;
    uint32_t opcode = w & 0x7f, funct3 = (w >> 12) & 7;
    switch (opcode) {
    case 0x57: /* OP-V; funct3 7 is OP-CFG: vsetvli, vsetivli, vsetvl */
        return funct3 == 7 ? CLASS_VSETVL : CLASS_VECTOR;
    case 0x07: /* LOAD-FP  */
    case 0x27: /* STORE-FP */
        return (funct3 == 0 || funct3 >= 5) ? CLASS_VECTOR : CLASS_SCALAR;
    default:
        return CLASS_SCALAR;
    }
}

static void add_inline_tb(struct qemu_plugin_tb *tb, uint64_t *ctr, uint64_t n)
{
    if (n)
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, ctr, n);
}

static void add_inline_insn(struct qemu_plugin_insn *insn, uint64_t *ctr)
{
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, ctr, 1);
}

/* Called once per translation (not per execution): decide what the block adds. */
static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t vec = 0, vset = 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        int c = classify(insn);
        vec += c != CLASS_SCALAR;
        vset += c == CLASS_VSETVL;
        if (per_insn) {
            add_inline_insn(insn, &n_insns);
            if (c != CLASS_SCALAR)
                add_inline_insn(insn, &n_vector);
            if (c == CLASS_VSETVL)
                add_inline_insn(insn, &n_vsetvl);
        }
    }
    if (!per_insn) {
        add_inline_tb(tb, &n_insns, n);
        add_inline_tb(tb, &n_vector, vec);
        add_inline_tb(tb, &n_vsetvl, vset);
    }
}

static void write_counts(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    char line[160];
    snprintf(line, sizeof line,
             "{\"insns\": %" PRIu64 ", \"vector_insns\": %" PRIu64 ", \"vsetvl\": %" PRIu64
             "}\n", n_insns, n_vector, n_vsetvl);
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
