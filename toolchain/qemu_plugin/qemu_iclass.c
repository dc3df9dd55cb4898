/*
 * qemu_iclass.c - QEMU TCG plugin: dynamic instruction counts of a riscv64 guest by class,
 * register-group size (LMUL) and element width (SEW), and a work-weighted vector figure.
 * A companion of qemu_icount.c (which counts totals fast, per thread); this one calls back
 * on every instruction, so it is slower, and is loaded only when a breakdown is asked for.
 *
 * Classes: see rvv_classes.h (decoded from the encoding: QEMU 7.2's disassembler knows no
 * RVV).
 * Each vector count is keyed by the vtype in force ("m4.e32"; "m?.e?" after a register-form
 * vsetvl, before the first setter, or past the per-vCPU table), memory operations by their
 * own element width ("m4.e8": vtype's LMUL, the encoding's EEW).
 *
 * work_weighted_vector_ops: each vector instruction weighted by the registers it processes,
 * not the group size alone: single-width ones their LMUL (fractional: 1); widening and
 * narrowing ones 2 x LMUL (the double-width side); loads and stores their EMUL = EEW / SEW x
 * LMUL (at least 1); whole-register ones their register count; setters, scalar moves, mask
 * logic and mask loads/stores 1 (one register, or none, whatever LMUL says). A VL-weighted
 * figure (elements actually processed) needs the vl register, which QEMU 7.2's plugin API
 * cannot read: qemu_vcount.c, under a QEMU 10 built with plugins, reports it.
 *
 * Use: qemu-riscv64 -plugin ./libqemu_iclass.so,out=PATH ...; at exit PATH (default: the
 * QEMU log) gets one JSON line: {"insns": N, "work_weighted_vector_ops": W,
 * "classes": {"valu": {"m4.e32": n, ...}, "int": {"-": n}, ...}}, over all threads.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rvv_classes.h"

#define PLUGIN_EXPORT __attribute__((visibility("default")))
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct {
    const char *target_name;
    struct { int min; int cur; } version;
} qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
extern void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
                                                  qemu_plugin_vcpu_tb_trans_cb_t cb);
extern void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                                   qemu_plugin_vcpu_udata_cb_t cb,
                                                   enum qemu_plugin_cb_flags flags,
                                                   void *userdata);
extern size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
extern struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
                                                        size_t idx);
extern const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
extern size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
extern void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                           void *userdata);
extern void qemu_plugin_outs(const char *string);

#include "plugin_out.h"

PLUGIN_EXPORT int qemu_plugin_version = 1;

typedef struct {
    uint64_t n[N_CLS][9][5];
    uint64_t work;
    uint8_t lmul, sew;
} vcpu_hist;

#define MAX_VCPUS 256
static vcpu_hist *hists;                 /* MAX_VCPUS + 1; the last one: every larger index */
static char *out_path;

static void on_exec(unsigned int vcpu, void *userdata)
{
    facts f = { .u = (uintptr_t)userdata };
    vcpu_hist *h = &hists[vcpu < MAX_VCPUS ? vcpu : MAX_VCPUS];
    bool shared = vcpu >= MAX_VCPUS;
    unsigned c = f.f.cls;
    unsigned lmul = shared ? LMUL_UNKNOWN : h->lmul, sew = shared ? SEW_UNKNOWN : h->sew;
    if (c == C_VSET) {               /* counted under the vtype it sets */
        lmul = f.f.set_lmul;
        sew = f.f.set_sew;
        if (!shared) {
            h->lmul = (uint8_t)lmul;
            h->sew = (uint8_t)sew;
        }
    }
    uint64_t *cell = c >= FIRST_SCALAR ? &h->n[c][LMUL_UNKNOWN][SEW_UNKNOWN]
                     : &h->n[c][lmul][f.f.eew != 0xff ? f.f.eew : sew];
    uint64_t work = c >= FIRST_SCALAR ? 0 : work_of(&f, lmul, sew);
    if (shared) {
        __atomic_fetch_add(cell, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&h->work, work, __ATOMIC_RELAXED);
    } else {
        *cell += 1;
        h->work += work;
    }
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        facts f = rvv_classify(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn));
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_exec, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)f.u);
    }
}

static void write_out(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    static uint64_t total[N_CLS][9][5];
    uint64_t insns = 0, work = 0;
    for (int v = 0; v <= MAX_VCPUS; v++) {
        for (int c = 0; c < N_CLS; c++)
            for (int l = 0; l < 9; l++)
                for (int s = 0; s < 5; s++) {
                    total[c][l][s] += hists[v].n[c][l][s];
                    insns += hists[v].n[c][l][s];
                }
        work += hists[v].work;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    fprintf(m, "{\"insns\": %" PRIu64 ", \"work_weighted_vector_ops\": %" PRIu64
               ", \"classes\": {", insns, work);
    bool first_cls = true;
    for (int c = 0; c < N_CLS; c++) {
        bool first = true;
        for (int l = 0; l < 9; l++)
            for (int s = 0; s < 5; s++) {
                if (!total[c][l][s])
                    continue;
                fprintf(m, "%s", first ? (first_cls ? "" : ", ") : ", ");
                if (first)
                    fprintf(m, "\"%s\": {", CLS_NAMES[c]);
                if (c >= FIRST_SCALAR)
                    fprintf(m, "\"-\": %" PRIu64, total[c][l][s]);
                else
                    fprintf(m, "\"%s.%s\": %" PRIu64, LMUL_NAMES[l], SEW_NAMES[s],
                            total[c][l][s]);
                first = false;
                first_cls = false;
            }
        if (!first)
            fputc('}', m);
    }
    fputs("}}\n", m);
    fclose(m);
    plugin_emit("qemu_iclass", out_path, buf);
    free(buf);
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                      char **argv)
{
    if (!info->target_name || strncmp(info->target_name, "riscv", 5) != 0) {
        fprintf(stderr, "qemu_iclass: target %s is not RISC-V\n",
                info->target_name ? info->target_name : "?");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "arg=", 4) == 0)
            a += 4;
        if (strncmp(a, "out=", 4) == 0 && a[4]) {
            out_path = strdup(a + 4);
        } else {
            fprintf(stderr, "qemu_iclass: unknown argument '%s' (expected out=PATH)\n",
                    argv[i]);
            return -1;
        }
    }
    hists = calloc(MAX_VCPUS + 1, sizeof *hists);
    if (!hists)
        return -1;
    for (int v = 0; v <= MAX_VCPUS; v++) {
        hists[v].lmul = LMUL_UNKNOWN;
        hists[v].sew = SEW_UNKNOWN;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, write_out, NULL);
    return 0;
}
