/*
 * qemu_vcount.c - QEMU TCG plugin (plugin API 4, QEMU 10): the counts of qemu_icount.c and
 * qemu_iclass.c together, per thread, and the elements each vector instruction processes
 * (vl_weighted_vector_ops), which needs the vl register: QEMU 7.2's plugin API cannot read
 * registers, so this plugin is built against the qemu-plugin.h of the QEMU that
 * scripts/qemu_plugins.sh builds with plugins, and runs there only.
 *
 * Counts, per vCPU (qemu-user runs each guest thread on one) and in total:
 *   insns, vector_insns, vsetvl, lmul_weighted_vector_ops, vector_insns_unknown_lmul
 *       as qemu_icount.c defines them (same figures for code whose vtype comes from
 *       vsetvli/vsetivli; after a register-form vsetvl this plugin reads vtype, so its LMUL is
 *       known here and unknown_lmul stays 0 where qemu_icount.c counts it)
 *   work_weighted_vector_ops   as qemu_iclass.c defines it
 *   vl_weighted_vector_ops     the elements each vector instruction processes: vl at its
 *       execution for every instruction that works on vl elements (arithmetic, loads and
 *       stores of every addressing mode, reductions, permutes, mask logic, masked ones too:
 *       a mask does not shorten the work); a fault-only-first load the vl it leaves (the
 *       elements it loaded); vlm/vsm ceil(vl / 8) (their byte elements); whole-register
 *       loads NREG x VLENB / EEW (the encoding's element width), whole-register stores and
 *       moves NREG x VLENB / SEW (vtype's; they have no element width of their own); scalar
 *       moves (vmv.x.s, vmv.s.x, vfmv.*) 1; setters 0 (they process no element)
 * and by class x LMUL x SEW (rvv_classes.h; keys as qemu_iclass.c's): instructions, their
 * LMUL-weighted sum and their elements.
 *
 * Reading vl cheaply. vl changes only at a setter (vset{i}vl{i}) or a fault-only-first load.
 * Scalar instructions are counted by inline per-vCPU adds per block (no callback); each
 * vector instruction has a callback that adds its counts under the vCPU's vtype and vl. A
 * setter's or ff load's callback (before it runs) marks the vCPU's vl stale; the callback of
 * the next vector instruction to run reads vl (and vtype, after a register-form vsetvl)
 * before counting. Only callbacks that can be that "next" one are registered with
 * QEMU_PLUGIN_CB_R_REGS (which makes TCG write the registers back first): the first vector
 * instruction of each block, and one that follows a setter or ff load in its block. (QEMU 10
 * ends a block at every vset*; an ff load does not end one.) So a register read happens once
 * per setter, not per vector instruction. An ff load's elements are added when that read
 * happens (the vl it left); if the program exits before any later vector instruction, its
 * elements are counted at the vl before it (an upper bound; real code uses what it loaded).
 *
 * Use: qemu-riscv64 -plugin ./libqemu_vcount.so,out=PATH -cpu rv64,v=true,... prog; at exit
 * PATH (default: the QEMU log) gets one JSON line:
 *   {<the seven counts>, "per_thread": [{"vcpu": i, <the seven counts>}, ...],
 *    "per_thread_overflow": null, "classes": {"vfma": {"m4.e32": n, ...}, "int": {"-": n}},
 *    "lmul_weighted": {<same keys>}, "vl_weighted": {<same keys, vector classes only>}}
 * (per_thread_overflow is always null: scoreboards grow with the vCPUs; kept for readers of
 * qemu_icount.c's line).
 */
#define _POSIX_C_SOURCE 200809L
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

#include "plugin_out.h"
#include "rvv_classes.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* One vCPU's counts and its vector state, an entry of a scoreboard. */
typedef struct {
    uint64_t n[N_CLS][9][5];   /* instructions */
    uint64_t lw[N_CLS][9][5];  /* LMUL-weighted */
    uint64_t el[N_CLS][9][5];  /* elements */
    uint64_t work, unknown_lmul;
    uint64_t vl, vlenb;
    uint8_t lmul, sew;         /* vtype in force (LMUL_UNKNOWN / SEW_UNKNOWN: not yet read) */
    bool vl_stale, vtype_stale;
    bool ff_pending;           /* an ff load waits for the vl it leaves */
    uint8_t ff_lmul, ff_eew;
} vstate;

#define F_REFRESH 1            /* facts.flags: registered with R_REGS, may read vl */

static struct qemu_plugin_scoreboard *board;
static struct qemu_plugin_register *reg_vl, *reg_vtype, *reg_vlenb;
static char *out_path;
static __thread GByteArray *regbuf;

static uint64_t read_reg(struct qemu_plugin_register *reg)
{
    if (!regbuf)
        regbuf = g_byte_array_new();
    g_byte_array_set_size(regbuf, 0);
    int n = qemu_plugin_read_register(reg, regbuf);
    uint64_t v = 0;
    for (int i = n < 8 ? n - 1 : 7; i >= 0; i--)   /* the guest's byte order: little-endian */
        v = v << 8 | regbuf->data[i];
    return v;
}

/* Read what the last setter or ff load left: vl, and vtype after a register-form vsetvl. */
static void refresh(vstate *s)
{
    s->vl = read_reg(reg_vl);
    if (!s->vlenb)
        s->vlenb = read_reg(reg_vlenb);
    if (s->ff_pending) {
        s->el[C_VLOAD_UNIT][s->ff_lmul][s->ff_eew] += s->vl;
        s->ff_pending = false;
    }
    if (s->vtype_stale) {
        uint64_t vtype = read_reg(reg_vtype);
        bool vill = vtype >> 63, known = !vill && ((vtype >> 3) & 7) < 4;
        s->lmul = known ? (uint8_t)(vtype & 7) : LMUL_UNKNOWN;
        s->sew = known ? (uint8_t)((vtype >> 3) & 7) : SEW_UNKNOWN;
        s->vtype_stale = false;
    }
    s->vl_stale = false;
}

/* Register bytes over an element width code (0..3; unknown: bytes). */
static uint64_t whole_elems(const vstate *s, unsigned nreg, unsigned width)
{
    return (uint64_t)nreg * s->vlenb >> (width < 4 ? width : 0);
}

static uint64_t elems_of(const facts *f, const vstate *s, unsigned sew)
{
    switch (f->f.cls) {
    case C_VSET:
        return 0;
    case C_VMOVE_SCALAR:
        return 1;
    case C_VMEM_MASK:
        return (s->vl + 7) / 8;
    case C_VMEM_WHOLE:
        return whole_elems(s, f->f.fixed, f->f.store ? sew : f->f.eew);
    case C_VMOVE_WHOLE:
        return whole_elems(s, f->f.fixed, sew);
    default:
        return s->vl;
    }
}

static void on_vector(unsigned int vcpu, void *userdata)
{
    facts f = { .u = (uintptr_t)userdata };
    vstate *s = qemu_plugin_scoreboard_find(board, vcpu);
    if ((f.f.flags & F_REFRESH) && s->vl_stale)
        refresh(s);
    unsigned c = f.f.cls, lmul = s->lmul, sew = s->sew;
    if (c == C_VSET) {              /* counted under the vtype it sets */
        lmul = f.f.set_lmul;
        sew = f.f.set_sew;
        s->lmul = (uint8_t)lmul;
        s->sew = (uint8_t)sew;
        s->vtype_stale = lmul == LMUL_UNKNOWN;   /* vsetvl: read at the next refresh */
        s->vl_stale = true;
    }
    unsigned k = f.f.eew != 0xff ? f.f.eew : sew;
    s->n[c][lmul][k] += 1;
    s->lw[c][lmul][k] += lmul_weight_of(&f, lmul);
    if (!f.f.fixed && c != C_VSET && c != C_VMEM_MASK && lmul == LMUL_UNKNOWN)
        s->unknown_lmul += 1;
    s->work += work_of(&f, lmul, sew);
    if (f.f.ff) {                   /* its elements: the vl it leaves, read at the refresh */
        if (s->ff_pending)          /* two in a row: the first loaded at most the vl before */
            s->el[C_VLOAD_UNIT][s->ff_lmul][s->ff_eew] += s->vl;
        s->ff_pending = true;
        s->ff_lmul = (uint8_t)lmul;
        s->ff_eew = (uint8_t)k;
        s->vl_stale = true;
    } else {
        s->el[c][lmul][k] += elems_of(&f, s, sew);
    }
}

static qemu_plugin_u64 scalar_cell(unsigned c)
{
    qemu_plugin_u64 e = { board, offsetof(vstate, n) +
                                 sizeof(uint64_t) * ((c * 9 + LMUL_UNKNOWN) * 5 + SEW_UNKNOWN) };
    return e;
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    uint64_t scalar[N_CLS] = { 0 };
    bool next_may_read = true;      /* the block's first vector instruction */
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint8_t bytes[4] = { 0 };
        size_t size = qemu_plugin_insn_data(insn, bytes, sizeof bytes);
        facts f = rvv_classify(bytes, size);
        if (f.f.cls >= FIRST_SCALAR) {
            scalar[f.f.cls]++;
            continue;
        }
        if (next_may_read)
            f.f.flags |= F_REFRESH;
        qemu_plugin_register_vcpu_insn_exec_cb(insn, on_vector, next_may_read ?
                                               QEMU_PLUGIN_CB_R_REGS : QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)f.u);
        next_may_read = f.f.cls == C_VSET || f.f.ff;
    }
    for (unsigned c = FIRST_SCALAR; c < N_CLS; c++) {
        if (scalar[c])
            qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                                              scalar_cell(c), scalar[c]);
    }
}

static struct qemu_plugin_register *find_reg(GArray *regs, const char *name)
{
    for (guint i = 0; i < regs->len; i++) {
        qemu_plugin_reg_descriptor *d = &g_array_index(regs, qemu_plugin_reg_descriptor, i);
        if (strcmp(d->name, name) == 0)
            return d->handle;
    }
    fprintf(stderr, "qemu_vcount: this QEMU exposes no register %s to plugins\n", name);
    abort();    /* counts without vl would be wrong: no output rather than a false one */
}

/* A new (or reused) vCPU: its vl and vtype are read before its first vector count. */
static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (!reg_vl) {  /* handles are register numbers, the same on every vCPU */
        GArray *regs = qemu_plugin_get_registers();
        reg_vl = find_reg(regs, "vl");
        reg_vtype = find_reg(regs, "vtype");
        reg_vlenb = find_reg(regs, "vlenb");
        g_array_free(regs, true);
    }
    vstate *s = qemu_plugin_scoreboard_find(board, vcpu);
    s->lmul = LMUL_UNKNOWN;
    s->sew = SEW_UNKNOWN;
    s->vl_stale = s->vtype_stale = true;
    s->ff_pending = false;
}

/* ---- output ------------------------------------------------------------------------------ */
enum { K_INSNS, K_VECTOR, K_VSET, K_LMUL, K_UNKNOWN, K_VL, K_WORK, N_KEYS };
static const char *const KEY_NAMES[N_KEYS] = {
    "insns", "vector_insns", "vsetvl", "lmul_weighted_vector_ops", "vector_insns_unknown_lmul",
    "vl_weighted_vector_ops", "work_weighted_vector_ops",
};

static void totals_of(vstate *s, uint64_t *t)
{
    if (s->ff_pending) {            /* no vector instruction after it: the vl before it */
        s->el[C_VLOAD_UNIT][s->ff_lmul][s->ff_eew] += s->vl;
        s->ff_pending = false;
    }
    memset(t, 0, N_KEYS * sizeof *t);
    for (int c = 0; c < N_CLS; c++)
        for (int l = 0; l < 9; l++)
            for (int e = 0; e < 5; e++) {
                t[K_INSNS] += s->n[c][l][e];
                if (c < FIRST_SCALAR) {
                    t[K_VECTOR] += s->n[c][l][e];
                    t[K_LMUL] += s->lw[c][l][e];
                    t[K_VL] += s->el[c][l][e];
                }
                if (c == C_VSET)
                    t[K_VSET] += s->n[c][l][e];
            }
    t[K_UNKNOWN] = s->unknown_lmul;
    t[K_WORK] = s->work;
}

static void put_counts(FILE *m, const uint64_t *t)
{
    for (int k = 0; k < N_KEYS; k++)
        fprintf(m, "%s\"%s\": %" PRIu64, k ? ", " : "", KEY_NAMES[k], t[k]);
}

/* {"cls": {"m4.e32": x, ...}, ...} of one table summed over vCPUs; zero cells left out. */
static void put_table(FILE *m, uint64_t (*sum)[9][5])
{
    const char *sep = "";
    fputc('{', m);
    for (int c = 0; c < N_CLS; c++) {
        const char *inner = "";
        for (int l = 0; l < 9; l++)
            for (int e = 0; e < 5; e++) {
                if (!sum[c][l][e])
                    continue;
                if (!*inner)
                    fprintf(m, "%s\"%s\": {", sep, CLS_NAMES[c]);
                if (c >= FIRST_SCALAR)
                    fprintf(m, "%s\"-\": %" PRIu64, inner, sum[c][l][e]);
                else
                    fprintf(m, "%s\"%s.%s\": %" PRIu64, inner, LMUL_NAMES[l], SEW_NAMES[e],
                            sum[c][l][e]);
                inner = ", ";
                sep = ", ";
            }
        if (*inner)
            fputc('}', m);
    }
    fputc('}', m);
}

static void write_out(qemu_plugin_id_t id, void *userdata)
{
    (void)id, (void)userdata;
    static uint64_t sums[3][N_CLS][9][5];
    uint64_t total[N_KEYS] = { 0 }, t[N_KEYS];
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    GString *threads = g_string_new("");
    int vcpus = qemu_plugin_num_vcpus();
    for (int v = 0; v < vcpus; v++) {
        vstate *s = qemu_plugin_scoreboard_find(board, v);
        totals_of(s, t);
        if (!t[K_INSNS])
            continue;
        for (int k = 0; k < N_KEYS; k++)
            total[k] += t[k];
        for (int c = 0; c < N_CLS; c++)
            for (int l = 0; l < 9; l++)
                for (int e = 0; e < 5; e++) {
                    sums[0][c][l][e] += s->n[c][l][e];
                    sums[1][c][l][e] += s->lw[c][l][e];
                    sums[2][c][l][e] += s->el[c][l][e];
                }
        g_string_append_printf(threads, "%s{\"vcpu\": %d, ", threads->len ? ", " : "", v);
        char *one = NULL;
        size_t one_len = 0;
        FILE *o = open_memstream(&one, &one_len);
        if (o) {
            put_counts(o, t);
            fclose(o);
            g_string_append(threads, one);
            free(one);
        }
        g_string_append_c(threads, '}');
    }
    fputc('{', m);
    put_counts(m, total);
    fprintf(m, ", \"per_thread\": [%s], \"per_thread_overflow\": null, \"classes\": ",
            threads->str);
    put_table(m, sums[0]);
    fputs(", \"lmul_weighted\": ", m);
    put_table(m, sums[1]);
    fputs(", \"vl_weighted\": ", m);
    put_table(m, sums[2]);
    fputs("}\n", m);
    fclose(m);
    g_string_free(threads, true);
    plugin_emit("qemu_vcount", out_path, buf);
    free(buf);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    if (!info->target_name || strncmp(info->target_name, "riscv", 5) != 0) {
        fprintf(stderr, "qemu_vcount: target %s is not RISC-V\n",
                info->target_name ? info->target_name : "?");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0 && argv[i][4]) {
            free(out_path);
            out_path = strdup(argv[i] + 4);
        } else {
            fprintf(stderr, "qemu_vcount: unknown argument '%s' (expected out=PATH)\n",
                    argv[i]);
            return -1;
        }
    }
    board = qemu_plugin_scoreboard_new(sizeof(vstate));
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, write_out, NULL);
    return 0;
}
