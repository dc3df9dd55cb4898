/* rvk_prefill.h - the runner's side of a decoder's prefill plan (rvvkit_abi.h, version 5):
 * its functions looked up in the kernels and checked against the artifact's meta, as the plan's
 * are (check_kernels in runner.c), and the buffers of one plan's generation inputs by role
 * (rvk_gen_feeds: the decoding plan's for one token, the prefill plan's for a chunk).
 *
 * Valid as C11 and as C++11; included by runner.c after rvk_generate.h and its helpers (die,
 * xalloc64, SYM). */
#ifndef RVK_PREFILL_H
#define RVK_PREFILL_H

/* A decoder's prefill plan as the kernels declare it (tokens 0: none), checked against the
 * artifact's meta like the plan (check_kernels). */
typedef struct {
    long tokens;
    rvvkit_io_elems_fn in_elems;
    rvvkit_run_timed_fn run;
} rvk_prefill_plan;

static rvk_prefill_plan rvk_prefill_check(void *lib, const char *kpath, const rvk_facts *f) {
    rvk_prefill_plan p;
    memset(&p, 0, sizeof p);
    rvvkit_count_fn tokens, steps, nin, nout;
    rvvkit_io_dtype_fn dtype;
    SYM(lib, kpath, "rvvkit_prefill_tokens", tokens);
    p.tokens = tokens();
    int ok = p.tokens == f->prefill_tokens;
    if (ok && p.tokens > 0) {
        SYM(lib, kpath, "rvvkit_prefill_num_steps", steps);
        SYM(lib, kpath, "rvvkit_prefill_num_inputs", nin);
        SYM(lib, kpath, "rvvkit_prefill_num_outputs", nout);
        SYM(lib, kpath, "rvvkit_prefill_input_elems", p.in_elems);
        SYM(lib, kpath, "rvvkit_prefill_input_dtype", dtype);
        SYM(lib, kpath, "rvvkit_prefill_run_timed", p.run);
        ok = steps() == f->prefill_steps && nin() == f->npre && nout() == 0;
        for (int i = 0; ok && i < f->npre; ++i)
            ok = p.in_elems(i) == f->pre[i].elems && dtype(i) == f->pre[i].dtype;
    }
    if (!ok)
        die(EXIT_ARTIFACT, "the artifact's meta and the kernels %s disagree on the prefill plan: "
            "they come from different builds, or the artifact was edited", kpath);
    return p;
}

/* One plan's role buffers (rvk_gen_feeds) for `len` tokens, `ins` pointing at them by role;
 * `elems` (the plan's input sizes) checks them. */
static void rvk_gen_feeds_make(const rvk_gen_args *g, const char *roles, rvk_gen_feeds *f,
                               const void **ins, long len, rvvkit_io_elems_fn elems,
                               const char *plan) {
    const int *r = g->roles;
    if (elems(r[0]) != len || (r[5] >= 0 && elems(r[5]) != len) ||
        (r[1] >= 0 && elems(r[1]) != 1) || (r[2] >= 0 && elems(r[2]) != 1) ||
        (r[4] >= 0 && elems(r[4]) != g->max_seq))
        die(EXIT_USAGE, "--roles %s: the %sids and positions must be %ld int64 each, the "
            "lengths one int32 each and the mask --max-seq int64", roles, plan, len);
    f->ins = ins, f->len = len;
    ins[r[0]] = f->ids = (int64_t *)xalloc64((size_t)len * sizeof(int64_t), "the token ids");
    if (r[1] >= 0) ins[r[1]] = f->seqlens = (int32_t *)xalloc64(sizeof(int32_t), "the length");
    if (r[2] >= 0) ins[r[2]] = f->total = (int32_t *)xalloc64(sizeof(int32_t), "the length");
    if (r[4] >= 0)
        ins[r[4]] = f->mask = (int64_t *)xalloc64((size_t)g->max_seq * sizeof(int64_t),
                                                  "the mask");
    if (r[5] >= 0)
        ins[r[5]] = f->positions = (int64_t *)xalloc64((size_t)len * sizeof(int64_t),
                                                       "the positions");
}

#endif /* RVK_PREFILL_H */
