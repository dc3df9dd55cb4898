/*
 * qemu_iclass.c - QEMU TCG plugin: dynamic instruction counts of a riscv64 guest by class,
 * register-group size (LMUL) and element width (SEW), and a work-weighted vector figure.
 * A companion of qemu_icount.c (which counts totals fast, per thread); this one calls back
 * on every instruction, so it is slower, and is loaded only when a breakdown is asked for.
 *
 * Classes, decoded from the encoding (QEMU 7.2's disassembler knows no RVV):
 *   vector  vset; vload.unit/.strided/.indexed, vstore.unit/.strided/.indexed; vmem.whole
 *           (vl<n>re / vs<n>r), vmem.mask (vlm / vsm); vfma (float multiply-add), vima
 *           (integer multiply-add), vwfma (widening multiply-add, float and integer), vwiden
 *           (other widening arithmetic and conversions), vnarrow (narrowing shifts, clips,
 *           conversions), vred (reductions, widening ones too), vperm (gathers, slides,
 *           compress), vmove.scalar (vmv.x.s, vfmv.f.s, vmv.s.x, vfmv.s.f), vmask (mask
 *           logic, vcpop.m, vfirst.m, vmsbf/vmsif/vmsof), vmove.whole (vmv<n>r.v), valu (the
 *           rest: single-width arithmetic, compares, merges, moves)
 *   scalar  int, fp, mem (loads, stores, atomics, scalar FP loads/stores), branch (branches
 *           and jumps), other (system, CSR, fences)
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
 * cannot read: it is not reported.
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

PLUGIN_EXPORT int qemu_plugin_version = 1;

enum cls {
    C_VSET, C_VLOAD_UNIT, C_VLOAD_STRIDED, C_VLOAD_INDEXED, C_VSTORE_UNIT, C_VSTORE_STRIDED,
    C_VSTORE_INDEXED, C_VMEM_WHOLE, C_VMEM_MASK, C_VFMA, C_VIMA, C_VWFMA, C_VWIDEN, C_VNARROW,
    C_VRED, C_VPERM, C_VMOVE_SCALAR, C_VMASK, C_VMOVE_WHOLE, C_VALU,
    C_INT, C_FP, C_MEM, C_BRANCH, C_OTHER, N_CLS
};
static const char *const CLS_NAMES[N_CLS] = {
    "vset", "vload.unit", "vload.strided", "vload.indexed", "vstore.unit", "vstore.strided",
    "vstore.indexed", "vmem.whole", "vmem.mask", "vfma", "vima", "vwfma", "vwiden", "vnarrow",
    "vred", "vperm", "vmove.scalar", "vmask", "vmove.whole", "valu",
    "int", "fp", "mem", "branch", "other",
};
#define FIRST_SCALAR C_INT

/* vtype's vlmul code 0..7 (m1 m2 m4 m8 - mf8 mf4 mf2), 8 = unknown; vsew 0..3 (e8..e64), 4 =
 * unknown */
#define LMUL_UNKNOWN 8
#define SEW_UNKNOWN 4
static const char *const LMUL_NAMES[9] = { "m1", "m2", "m4", "m8", "m?", "mf8", "mf4", "mf2",
                                           "m?" };
static const char *const SEW_NAMES[5] = { "e8", "e16", "e32", "e64", "e?" };

typedef struct {
    uint64_t n[N_CLS][9][5];
    uint64_t work;
    uint8_t lmul, sew;
} vcpu_hist;

#define MAX_VCPUS 256
static vcpu_hist *hists;                 /* MAX_VCPUS + 1; the last one: every larger index */
static char *out_path;

/* Static facts of one instruction, packed in the callback's userdata. */
typedef union {
    struct {
        uint8_t cls;
        uint8_t eew;      /* memory: the encoding's element width code (0..3), else 0xff */
        uint8_t fixed;    /* weight fixed by the encoding (whole-register), else 0 */
        uint8_t set_lmul; /* vset: the vtype it sets (LMUL_UNKNOWN for vsetvl) */
        uint8_t set_sew;
    } f;
    uintptr_t u;
} facts;

static uint32_t word_of(const struct qemu_plugin_insn *insn)
{
    const uint8_t *b = qemu_plugin_insn_data(insn);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Compressed (16-bit) instructions: by quadrant and funct3. */
static int classify_compressed(uint16_t h)
{
    unsigned q = h & 3, f3 = h >> 13;
    if (q == 0)
        return f3 == 0 ? C_INT : C_MEM;                  /* c.addi4spn, else loads/stores */
    if (q == 1)
        return (f3 == 5 || f3 == 6 || f3 == 7) ? C_BRANCH : C_INT;  /* c.j, c.beqz, c.bnez */
    if (f3 == 4)                                         /* c.jr/c.jalr/c.mv/c.add/ebreak */
        return ((h >> 2) & 0x1f) == 0 && ((h >> 7) & 0x1f) != 0 ? C_BRANCH : C_INT;
    return f3 == 0 ? C_INT : C_MEM;                      /* c.slli, else sp loads/stores */
}

/* OP-V by funct3 (the operand kind: OPIVV/OPIVX/OPIVI integer, OPMVV/OPMVX integer multiply
 * and mask, OPFVV/OPFVF float) and funct6 (the operation), per the RVV 1.0 opcode tables. */
static int classify_opv(uint32_t w)
{
    uint32_t f3 = (w >> 12) & 7, f6 = w >> 26, vs1 = (w >> 15) & 0x1f;
    bool opi = f3 == 0 || f3 == 3 || f3 == 4, opm = f3 == 2 || f3 == 6, opf = f3 == 1 || f3 == 5;
    if (f3 == 7)
        return C_VSET;
    if (opi) {
        if (f3 == 3 && f6 == 0x27)
            return C_VMOVE_WHOLE;                          /* vmv<nr>r.v */
        if (f6 == 0x0c || f6 == 0x0e || f6 == 0x0f)
            return C_VPERM;                                /* vrgather(ei16), vslideup/down */
        if (f6 >= 0x2c && f6 <= 0x2f)
            return C_VNARROW;                              /* vnsrl, vnsra, vnclipu, vnclip */
        if (f3 == 0 && (f6 == 0x30 || f6 == 0x31))
            return C_VRED;                                 /* vwredsumu, vwredsum */
        return C_VALU;
    }
    if (opm) {
        if (f6 <= 0x07)
            return C_VRED;                                 /* vredsum ... vredmax */
        if (f6 == 0x0e || f6 == 0x0f || f6 == 0x17)
            return C_VPERM;                                /* vslide1up/down, vcompress */
        if (f6 == 0x10)                                    /* vmv.x.s / vmv.s.x; vcpop, vfirst */
            return (f3 == 2 && vs1 >= 0x10) ? C_VMASK : C_VMOVE_SCALAR;
        if (f6 == 0x12)
            return C_VWIDEN;                               /* vzext, vsext */
        if (f6 == 0x14)                                    /* vmsbf/vmsof/vmsif; viota, vid */
            return vs1 >= 1 && vs1 <= 3 ? C_VMASK : C_VALU;
        if (f6 >= 0x18 && f6 <= 0x1f)
            return C_VMASK;                                /* vmandn ... vmxnor */
        if (f6 == 0x29 || f6 == 0x2b || f6 == 0x2d || f6 == 0x2f)
            return C_VIMA;                                 /* vmadd, vnmsub, vmacc, vnmsac */
        if (f6 >= 0x3c)
            return C_VWFMA;                                /* vwmaccu ... vwmaccsu */
        if (f6 >= 0x30)
            return C_VWIDEN;                               /* vwaddu ... vwmul */
        return C_VALU;
    }
    if (opf) {
        if (f3 == 1 && (f6 == 0x01 || f6 == 0x03 || f6 == 0x05 || f6 == 0x07 || f6 == 0x31 ||
                        f6 == 0x33))
            return C_VRED;                                 /* vfred*, vfwred* */
        if (f6 == 0x0e || f6 == 0x0f)
            return C_VPERM;                                /* vfslide1up/down */
        if (f6 == 0x10)
            return C_VMOVE_SCALAR;                         /* vfmv.f.s / vfmv.s.f */
        if (f3 == 1 && f6 == 0x12)                         /* conversions by vs1 */
            return vs1 >= 0x08 && vs1 <= 0x0f ? C_VWIDEN : vs1 >= 0x10 ? C_VNARROW : C_VALU;
        if (f6 >= 0x28 && f6 <= 0x2f)
            return C_VFMA;                                 /* vfmadd ... vfnmsac */
        if (f6 >= 0x3c)
            return C_VWFMA;                                /* vfwmacc ... vfwnmsac */
        if (f6 >= 0x30)
            return C_VWIDEN;                               /* vfwadd ... vfwmul */
        return C_VALU;
    }
    return C_VALU;
}

static facts classify(const struct qemu_plugin_insn *insn)
{
    facts r = { .u = 0 };
    r.f.eew = 0xff;
    if (qemu_plugin_insn_size(insn) != 4) {
        const uint8_t *b = qemu_plugin_insn_data(insn);
        r.f.cls = (uint8_t)classify_compressed((uint16_t)(b[0] | b[1] << 8));
        return r;
    }
    uint32_t w = word_of(insn), op = w & 0x7f, f3 = (w >> 12) & 7;
    switch (op) {
    case 0x57:
        r.f.cls = (uint8_t)classify_opv(w);
        if (r.f.cls == C_VSET) {
            uint32_t vtypei = (w >> 20) & ((w >> 31) ? 0x3ff : 0x7ff);
            bool reg = (w >> 31) && !((w >> 30) & 1);            /* vsetvl: from a register */
            r.f.set_lmul = reg ? LMUL_UNKNOWN : (uint8_t)(vtypei & 7);
            r.f.set_sew = reg ? SEW_UNKNOWN : (uint8_t)((vtypei >> 3) & 3);
        } else if (r.f.cls == C_VMOVE_WHOLE) {
            r.f.fixed = (uint8_t)(((w >> 15) & 0x1f) + 1);
        }
        return r;
    case 0x07:
    case 0x27: {
        if (f3 != 0 && f3 < 5) {
            r.f.cls = C_MEM;                                      /* scalar FP load/store */
            return r;
        }
        uint32_t mop = (w >> 26) & 3, umop = (w >> 20) & 0x1f, nf = w >> 29;
        bool load = op == 0x07;
        r.f.eew = (uint8_t)(f3 == 0 ? 0 : f3 - 4);               /* 0 e8, 5 e16, 6 e32, 7 e64 */
        if (mop == 0 && umop == 0x08) {
            r.f.cls = C_VMEM_WHOLE;
            r.f.fixed = (uint8_t)(nf + 1);
        } else if (mop == 0 && umop == 0x0b) {
            r.f.cls = C_VMEM_MASK;
        } else if (mop == 0) {
            r.f.cls = load ? C_VLOAD_UNIT : C_VSTORE_UNIT;
        } else if (mop == 2) {
            r.f.cls = load ? C_VLOAD_STRIDED : C_VSTORE_STRIDED;
        } else {
            r.f.cls = load ? C_VLOAD_INDEXED : C_VSTORE_INDEXED;
        }
        return r;
    }
    case 0x03: case 0x23: case 0x2f:
        r.f.cls = C_MEM;
        return r;
    case 0x53: case 0x43: case 0x47: case 0x4b: case 0x4f:
        r.f.cls = C_FP;
        return r;
    case 0x63: case 0x6f: case 0x67:
        r.f.cls = C_BRANCH;
        return r;
    case 0x13: case 0x1b: case 0x33: case 0x3b: case 0x37: case 0x17:
        r.f.cls = C_INT;
        return r;
    default:
        r.f.cls = C_OTHER;
        return r;
    }
}

/* Registers an instruction of class c processes, at vtype (lmul, sew) and memory width eew. */
static uint64_t work_of(const facts *f, unsigned lmul, unsigned sew)
{
    unsigned c = f->f.cls;
    if (f->f.fixed)
        return f->f.fixed;
    if (c == C_VSET || c == C_VMOVE_SCALAR || c == C_VMASK || c == C_VMEM_MASK)
        return 1;
    if (lmul == LMUL_UNKNOWN || lmul == 4)
        return 1;                                /* unknown vtype: a lower bound */
    int l2 = lmul < 4 ? (int)lmul : (int)lmul - 8;             /* log2 LMUL: -3..3 */
    if (c == C_VWFMA || c == C_VWIDEN || c == C_VNARROW)
        l2 += 1;
    else if (f->f.eew != 0xff && sew != SEW_UNKNOWN)
        l2 += (int)f->f.eew - (int)sew;                        /* EMUL = EEW / SEW x LMUL */
    return l2 <= 0 ? 1 : (uint64_t)1 << l2;
}

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
        facts f = classify(insn);
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
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (f) {
            fputs(buf, f);
            fclose(f);
        } else {
            fprintf(stderr, "qemu_iclass: cannot write %s\n", out_path);
        }
    } else {
        qemu_plugin_outs(buf);
    }
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
