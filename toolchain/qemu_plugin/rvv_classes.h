/*
 * rvv_classes.h - what a riscv64 instruction is, from its encoding: its class, the element
 * width of a vector memory operation, the vtype a setter sets, and the weights that follow.
 * Shared by the class-counting plugins: qemu_iclass.c (QEMU 7.2's API) and qemu_vcount.c
 * (QEMU 10's, which also reads vl). Header-only (static functions), included once per plugin;
 * rvvkit/runtime/counting/icount.py pastes it in where a plugin includes it, so the cache key covers it.
 *
 * Classes (QEMU 7.2's disassembler knows no RVV, so they come from the opcode tables):
 *   vector  vset; vload.unit/.strided/.indexed, vstore.unit/.strided/.indexed; vmem.whole
 *           (vl<n>re / vs<n>r), vmem.mask (vlm / vsm); vfma (float multiply-add), vima
 *           (integer multiply-add), vwfma (integer widening multiply-add), vfwfma (float
 *           widening multiply-add: another pipe on some cores, e.g. the X60), vwiden
 *           (other widening arithmetic and conversions), vnarrow (narrowing shifts, clips,
 *           conversions), vred (reductions, widening ones too), vperm (gathers, slides,
 *           compress), vmove.scalar (vmv.x.s, vfmv.f.s, vmv.s.x, vfmv.s.f), vmask (mask
 *           logic, vcpop.m, vfirst.m, vmsbf/vmsif/vmsof), vmove.whole (vmv<n>r.v), valu (the
 *           rest: single-width arithmetic, compares, merges, moves)
 *   scalar  int, fp, mem (loads, stores, atomics, scalar FP loads/stores), branch (branches
 *           and jumps), other (system, CSR, fences)
 */
#ifndef RVV_CLASSES_H
#define RVV_CLASSES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cls {
    C_VSET, C_VLOAD_UNIT, C_VLOAD_STRIDED, C_VLOAD_INDEXED, C_VSTORE_UNIT, C_VSTORE_STRIDED,
    C_VSTORE_INDEXED, C_VMEM_WHOLE, C_VMEM_MASK, C_VFMA, C_VIMA, C_VWFMA, C_VWIDEN, C_VNARROW,
    C_VRED, C_VPERM, C_VMOVE_SCALAR, C_VMASK, C_VMOVE_WHOLE, C_VALU, C_VFWFMA,
    C_INT, C_FP, C_MEM, C_BRANCH, C_OTHER, N_CLS
};
static const char *const CLS_NAMES[N_CLS] = {
    "vset", "vload.unit", "vload.strided", "vload.indexed", "vstore.unit", "vstore.strided",
    "vstore.indexed", "vmem.whole", "vmem.mask", "vfma", "vima", "vwfma", "vwiden", "vnarrow",
    "vred", "vperm", "vmove.scalar", "vmask", "vmove.whole", "valu", "vfwfma",
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

/* Static facts of one instruction, packed in the callback's userdata. */
typedef union {
    struct {
        uint8_t cls;
        uint8_t eew;      /* memory: the encoding's element width code (0..3), else 0xff */
        uint8_t fixed;    /* weight fixed by the encoding (whole-register), else 0 */
        uint8_t set_lmul; /* vset: the vtype it sets (LMUL_UNKNOWN for vsetvl) */
        uint8_t set_sew;
        uint8_t ff;       /* fault-only-first load: it may lower vl */
        uint8_t store;    /* a whole-register store (vs<n>r: its EEW field says e8) */
        uint8_t flags;    /* free for the plugin's own use */
    } f;
    uintptr_t u;
} facts;

static uint32_t word_of(const uint8_t *b)
{
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
            return C_VFWFMA;                               /* vfwmacc ... vfwnmsac */
        if (f6 >= 0x30)
            return C_VWIDEN;                               /* vfwadd ... vfwmul */
        return C_VALU;
    }
    return C_VALU;
}

/* One instruction's facts from its bytes b (size 2 or 4; little-endian, as RISC-V stores it). */
static facts rvv_classify(const uint8_t *b, size_t size)
{
    facts r = { .u = 0 };
    r.f.eew = 0xff;
    if (size != 4) {
        r.f.cls = (uint8_t)classify_compressed((uint16_t)(b[0] | b[1] << 8));
        return r;
    }
    uint32_t w = word_of(b), op = w & 0x7f, f3 = (w >> 12) & 7;
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
            r.f.store = !load;
        } else if (mop == 0 && umop == 0x0b) {
            r.f.cls = C_VMEM_MASK;
        } else if (mop == 0) {
            r.f.cls = load ? C_VLOAD_UNIT : C_VSTORE_UNIT;
            r.f.ff = load && umop == 0x10;                        /* vle<eew>ff.v */
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
static inline uint64_t work_of(const facts *f, unsigned lmul, unsigned sew)
{
    unsigned c = f->f.cls;
    if (f->f.fixed)
        return f->f.fixed;
    if (c == C_VSET || c == C_VMOVE_SCALAR || c == C_VMASK || c == C_VMEM_MASK)
        return 1;
    if (lmul == LMUL_UNKNOWN || lmul == 4)
        return 1;                                /* unknown vtype: a lower bound */
    int l2 = lmul < 4 ? (int)lmul : (int)lmul - 8;             /* log2 LMUL: -3..3 */
    if (c == C_VWFMA || c == C_VFWFMA || c == C_VWIDEN || c == C_VNARROW)
        l2 += 1;
    else if (f->f.eew != 0xff && sew != SEW_UNKNOWN)
        l2 += (int)f->f.eew - (int)sew;                        /* EMUL = EEW / SEW x LMUL */
    return l2 <= 0 ? 1 : (uint64_t)1 << l2;
}

/* The LMUL-weighted figure (qemu_icount.c's definition): setters, mask loads/stores 1;
 * whole-register ones their register count; every other vector instruction the group size of
 * the vtype in force (fractional and unknown: 1). */
static inline uint64_t lmul_weight_of(const facts *f, unsigned lmul)
{
    unsigned c = f->f.cls;
    if (f->f.fixed)
        return f->f.fixed;
    if (c == C_VSET || c == C_VMEM_MASK || lmul >= 4)
        return 1;
    return (uint64_t)1 << lmul;
}

#endif
