/* The runner's artifact reader: checks the container the way rvvkit/artifact/container.py does (the
 * check -> meta -> section checksum chain, with rvk64 instead of sha256) and reads the facts of
 * the meta the runner must compare with the compiled kernels before it sizes a buffer: graph
 * inputs and outputs (element counts, types), arena size, step count, the weights section.
 *
 * Why the runner needs this although the kernels declare their sizes: the kernels and the
 * .npy outputs are read back by rvvkit with the meta's shapes, and a runner started by hand on a
 * board may be given an artifact and kernels of different builds; a bit flip in the weights
 * would otherwise run silently with wrong numbers.
 *
 * Every field is range-checked; any violation is one message in `err`. `verify` = 0 skips the
 * checksums only (runner --no-verify, for boards that must start fast).
 * Header-only, valid as C11 and C++11. */
#ifndef RVK_ARTIFACT_H
#define RVK_ARTIFACT_H

#include "rvk_elf.h"
#include "rvk_hash.h"
#include "rvk_json.h"

#define RVK_MAX_IO 256
#define RVK_MAX_ELEMS 2147483647ll /* the frontend's limit: rvvkit/artifact/meta.py */
#define RVK_MAX_SECTIONS 64

typedef struct {
    long long elems;
    int dtype; /* ONNX TensorProto code */
} rvk_io_fact;

typedef struct {
    uint64_t weights_off, weights_len;
    long long arena_floats, steps, abi; /* abi -1: not recorded */
    int nin, nout;
    rvk_io_fact in[RVK_MAX_IO], out[RVK_MAX_IO];
    /* a decoder's prefill plan ("prefill" in the meta; tokens 0: none): tokens per call, its
     * steps and its inputs (the plan's, sized for the chunk) */
    long long prefill_tokens, prefill_steps;
    int npre;
    rvk_io_fact pre[RVK_MAX_IO];
} rvk_facts;

static const struct { const char *name; int code; } rvk_dtype_names[] = {
    {"float32", 1}, {"int64", 7}, {"int32", 6}, {"int8", 3}, {"uint8", 2}, {"bool", 9},
    {"float16", 10}, {"float64", 11}};

/* Compares string token `t` (16 hex digits) with a computed rvk64. */
static int rvk_hex_matches(const rvk_json *j, long t, uint64_t h) {
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)h);
    return rvk_json_str_is(j, t, want);
}

static int rvk_io_facts(const rvk_json *m, long parent, const char *key, rvk_io_fact *io,
                        int *count, char *err, size_t cap) {
    const long arr = rvk_json_get(m, parent, key);
    if (!rvk_json_is(m, arr, RVK_J_ARR) || m->tok[arr].size > RVK_MAX_IO) {
        snprintf(err, cap, "section .rvvkit.meta is invalid: '%s' is not a list of at most %d "
                 "tensors", key, RVK_MAX_IO);
        return -1;
    }
    *count = (int)m->tok[arr].size;
    long t = rvk_json_first(m, arr);
    for (int i = 0; i < *count; ++i, t = rvk_json_next(m, t)) {
        const long shape = rvk_json_get(m, t, "shape"), dtype = rvk_json_get(m, t, "dtype");
        long long n = 1, d = 0;
        int ok = rvk_json_is(m, shape, RVK_J_ARR) && m->tok[shape].size <= 64;
        long e = ok ? rvk_json_first(m, shape) : 0;
        for (uint32_t k = 0; ok && k < m->tok[shape].size; ++k, e = rvk_json_next(m, e)) {
            ok = rvk_json_int(m, e, 0, RVK_MAX_ELEMS, &d) == 0;
            n = ok && d && n > RVK_MAX_ELEMS / d ? RVK_MAX_ELEMS + 1 : n * d;
            ok = ok && n <= RVK_MAX_ELEMS;
        }
        io[i].dtype = dtype < 0 ? 1 : 0; /* artifacts before typed I/O: float32 */
        for (size_t k = 0; dtype >= 0 && k < sizeof rvk_dtype_names / sizeof *rvk_dtype_names; ++k)
            if (rvk_json_str_is(m, dtype, rvk_dtype_names[k].name)) io[i].dtype = rvk_dtype_names[k].code;
        if (!ok || io[i].dtype == 0) {
            snprintf(err, cap, "section .rvvkit.meta is invalid: %s[%d] has no valid shape "
                     "(non-negative integers, at most %lld elements) or dtype", key, i,
                     RVK_MAX_ELEMS);
            return -1;
        }
        io[i].elems = n;
    }
    return 0;
}

/* Each section listed in the meta: present, of its size, and (verify) of its checksum. */
static int rvk_check_sections(const unsigned char *data, uint64_t size, const char *src,
                              const rvk_json *m, int verify, char *err, size_t cap) {
    const long secs = rvk_json_get(m, 0, "sections");
    if (!rvk_json_is(m, secs, RVK_J_OBJ)) {
        snprintf(err, cap, "section .rvvkit.meta has no 'sections' table");
        return -1;
    }
    long k = secs + 1;
    for (uint32_t i = 0; i < m->tok[secs].size; ++i, k = rvk_json_next(m, k + 1)) {
        char name[128];
        const uint32_t n = m->tok[k].end - m->tok[k].start;
        if (n >= sizeof name || memchr(m->text + m->tok[k].start, '\\', n)) {
            snprintf(err, cap, "section .rvvkit.meta is invalid: a section name is too long or "
                     "escaped");
            return -1;
        }
        memcpy(name, m->text + m->tok[k].start, n);
        name[n] = 0;
        uint64_t off = 0, len = 0;
        long long want = -1;
        if (rvk_elf_find(data, size, src, name, &off, &len, err, cap)) return -1;
        if (rvk_json_int(m, rvk_json_get(m, k + 1, "size"), 0, (long long)size, &want) ||
            (uint64_t)want != len) {
            snprintf(err, cap, "section %s is corrupt: size %llu does not match .rvvkit.meta",
                     name, (unsigned long long)len);
            return -1;
        }
        const long sum = rvk_json_get(m, k + 1, "rvk64");
        if (verify && !rvk_hex_matches(m, sum, rvk64(data + off, len))) {
            snprintf(err, cap, "section %s is corrupt: checksum mismatch%s", name,
                     sum < 0 ? " (no rvk64 recorded: rebuild the artifact, or --no-verify)" : "");
            return -1;
        }
    }
    /* and every section of the file is accounted for (as rvvkit/artifact/container.py requires) */
    const int count = rvk_elf_count(data);
    if (count > RVK_MAX_SECTIONS) {
        snprintf(err, cap, "%s: %d sections, more than an artifact has (%d)", src, count,
                 RVK_MAX_SECTIONS);
        return -1;
    }
    for (int i = 1; i < count; ++i) {
        const char *name = NULL;
        uint64_t off, len;
        if (rvk_elf_section(data, size, i, &name, &off, &len) || !name) {
            snprintf(err, cap, "%s: section %d is corrupt (name or extent outside the file)",
                     src, i);
            return -1;
        }
        for (int j = 1; j < i; ++j) {
            const char *other = NULL;
            if (!rvk_elf_section(data, size, j, &other, &off, &len) && other &&
                !strcmp(other, name)) {
                snprintf(err, cap, "%s: duplicate section '%.64s'", src, name);
                return -1;
            }
        }
        if (strcmp(name, ".rvvkit.meta") && strcmp(name, ".rvvkit.check") &&
            strcmp(name, ".shstrtab") && strcmp(name, ".rvvkit.sig") &&
            rvk_json_get(m, secs, name) < 0) {
            snprintf(err, cap, "section '%.64s' has no checksum in .rvvkit.meta", name);
            return -1;
        }
    }
    return 0;
}

/* A section's JSON, parsed, after (verify) checking it against checksum token `sum`. */
static int rvk_section_json(const unsigned char *data, uint64_t size, const char *src,
                            const char *name, rvk_json *out, const rvk_json *check, long sum,
                            int verify, char *err, size_t cap) {
    uint64_t off = 0, len = 0;
    if (rvk_elf_find(data, size, src, name, &off, &len, err, cap)) return -1;
    if (verify && !rvk_hex_matches(check, sum, rvk64(data + off, len))) {
        snprintf(err, cap, "section %s is corrupt: checksum mismatch%s", name,
                 sum < 0 ? " (no rvk64 recorded: rebuild the artifact, or --no-verify)" : "");
        return -1;
    }
    char jerr[160];
    const int bad = rvk_json_parse(out, (const char *)data + off, len, jerr, sizeof jerr);
    if (bad || !rvk_json_is(out, 0, RVK_J_OBJ)) {
        snprintf(err, cap, "section %s is corrupt: %s", name, bad ? jerr : "not a JSON object");
        rvk_json_free(out);
        return -1;
    }
    if (!rvk_json_str_is(out, rvk_json_get(out, 0, "format"), "rvvkit")) {
        snprintf(err, cap, "not an rvvkit artifact: %s: %s lacks format=\"rvvkit\"", src, name);
        rvk_json_free(out);
        return -1;
    }
    long long version = 0;
    if (rvk_json_int(out, rvk_json_get(out, 0, "format_version"), 0, 1 << 30, &version) ||
        version != 1) {
        snprintf(err, cap, "%s: artifact format version (in %s) is not 1: rebuild it with this "
                 "rvvkit", src, name);
        rvk_json_free(out);
        return -1;
    }
    return 0;
}

/* meta["prefill"]: absent or null, or {tokens >= 2, plan: [...], inputs: [the plan's inputs
 * in order and type]} (rvvkit/artifact/meta.py checks the same). */
static int rvk_prefill_facts(const rvk_json *m, rvk_facts *f, char *err, size_t cap) {
    const long pre = rvk_json_get(m, 0, "prefill");
    if (pre < 0 || rvk_json_is(m, pre, RVK_J_LIT)) return 0;
    const long plan = rvk_json_get(m, pre, "plan");
    int ok = rvk_json_is(m, pre, RVK_J_OBJ) && rvk_json_is(m, plan, RVK_J_ARR) &&
             rvk_json_int(m, rvk_json_get(m, pre, "tokens"), 2, RVK_MAX_ELEMS,
                          &f->prefill_tokens) == 0;
    if (ok && rvk_io_facts(m, pre, "inputs", f->pre, &f->npre, err, cap)) return -1;
    ok = ok && f->npre == f->nin;
    for (int i = 0; ok && i < f->npre; ++i) ok = f->pre[i].dtype == f->in[i].dtype;
    if (!ok) {
        snprintf(err, cap, "section .rvvkit.meta is invalid: 'prefill' is not {tokens >= 2, "
                 "plan, inputs: the plan's inputs in order and type}");
        return -1;
    }
    f->prefill_steps = m->tok[plan].size;
    return 0;
}

/* Reads and checks the artifact image data[0..size) named `src`; 0 and `f` filled, or -1. */
static int rvk_artifact_read(const unsigned char *data, uint64_t size, const char *src,
                             int verify, rvk_facts *f, char *err, size_t cap) {
    rvk_json check, meta;
    memset(f, 0, sizeof *f);
    if (rvk_section_json(data, size, src, ".rvvkit.check", &check, NULL, -1, 0, err, cap))
        return -1;
    int rc = -1;
    uint64_t off = 0, len = 0;
    if (verify) { /* .shstrtab: names decide which bytes are which section */
        if (rvk_elf_find(data, size, src, ".shstrtab", &off, &len, err, cap)) goto out_check;
        if (!rvk_hex_matches(&check, rvk_json_get(&check, 0, "shstrtab_rvk64"),
                             rvk64(data + off, len))) {
            snprintf(err, cap, "section .shstrtab is corrupt: checksum mismatch (or no rvk64 "
                     "recorded: rebuild the artifact, or --no-verify)");
            goto out_check;
        }
    }
    if (rvk_section_json(data, size, src, ".rvvkit.meta", &meta, &check,
                         rvk_json_get(&check, 0, "meta_rvk64"), verify, err, cap))
        goto out_check;
    if (rvk_check_sections(data, size, src, &meta, verify, err, cap) ||
        rvk_io_facts(&meta, 0, "inputs", f->in, &f->nin, err, cap) ||
        rvk_io_facts(&meta, 0, "outputs", f->out, &f->nout, err, cap) ||
        rvk_prefill_facts(&meta, f, err, cap))
        goto out_meta;
    {
        const long plan = rvk_json_get(&meta, 0, "plan");
        const long abi = rvk_json_get(&meta, 0, "abi_version");
        if (!rvk_json_is(&meta, plan, RVK_J_ARR) ||
            rvk_json_int(&meta, rvk_json_get(&meta, rvk_json_get(&meta, 0, "memory"),
                                             "arena_floats"), 0, 1ll << 40, &f->arena_floats) ||
            (abi >= 0 && rvk_json_int(&meta, abi, 1, 1 << 20, &f->abi))) {
            snprintf(err, cap, "section .rvvkit.meta is invalid: 'plan', 'memory.arena_floats' "
                     "or 'abi_version' missing or out of range");
            goto out_meta;
        }
        f->steps = meta.tok[plan].size;
        if (abi < 0) f->abi = -1;
    }
    if (rvk_elf_find(data, size, src, ".rvvkit.weights", &f->weights_off, &f->weights_len, err,
                     cap) == 0)
        rc = 0;
out_meta:
    rvk_json_free(&meta);
out_check:
    rvk_json_free(&check);
    return rc;
}

#endif /* RVK_ARTIFACT_H */
