/* rvk_generate.h - the runner's generation loop (runner --generate): a decoder artifact's plan
 * run once per token on the target, its key/value caches staying in the arena between runs,
 * so that a board or QEMU generates a whole answer in one process rather than one round trip
 * per token. Greedy: each next token is the argmax of the last logits row (the lowest index
 * wins a tie, as numpy.argmax), or sampled (--temperature T [--top-k K] [--top-p P] [--seed S]).
 *
 * The caller names the roles of the graph's inputs and output by index (--roles
 * IDS,SEQLENS,TOTAL,LOGITS,MASK,POSITIONS; -1 for an input the model lacks): the token ids
 * (int64 [1, 1]), the tokens already in the cache (int32 [1], seqlens_k = position), the
 * total length (int32 scalar, position + 1), the logits (float32 [1, 1, vocab]), an
 * attention mask over the cache (int64 [1, max_seq], 1 at positions 0 .. position) and the
 * position ids of RoPE (int64 [1, 1]). Tokens are printed to stdout
 * one per line as they come; DIR/generate.json gets the tokens, the prefill and decode
 * seconds and why generation stopped ("max_new_tokens", "eos" or "bound": the cache is
 * full); --eos takes the ids that end a reply (a model may have several: Qwen2.5's
 * <|im_end|> and <|endoftext|>); --logits-out writes every generated step's logits row as one float32 .npy.
 *
 * A decoder artifact with a prefill plan (rvvkit_prefill_tokens() = C > 0) runs the prompt's
 * tokens before the last through it, C per call (the same roles, ids and positions C long);
 * a short last chunk is padded after its real tokens when the padding fits in the cache
 * (causal attention keeps it out of theirs, and what it writes lies past the live length
 * until a later token overwrites it), and one token left over goes through the plan alone.
 * rvvkit/llm/generate.py splits a prompt the same way.
 *
 * Valid as C11 and as C++11; included by runner.c after its helpers (die, now, xalloc64). */
#ifndef RVK_GENERATE_H
#define RVK_GENERATE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    long new_tokens;      /* --generate N: at most N generated tokens (N >= 1) */
    long max_seq;         /* --max-seq: the cache bound (positions) */
    const char *eos;      /* --eos "E1,E2": stop after any of these tokens (NULL: none) */
    long cache_steps;     /* --cache-steps: the steps a prompt token before the last needs
                             (those up to the last cache write; 0: every step) */
    int roles[6];         /* inputs ids, seqlens (-1), total (-1), output logits, inputs
                             mask (-1: an int64 mask over the cache, 1 at live positions)
                             and positions (-1: int64 [1, 1], the token's position) */
    const char *prompt;   /* --prompt-ids "1,2,3" */
    const char *logits_out;
    double temperature;   /* --temperature (0: greedy), --top-k (0: all), --top-p (1: all) */
    long top_k;
    double top_p;
    unsigned long long seed;   /* --seed: the sampler's generator */
} rvk_gen_args;

/* Parses "a,b,c" of non-negative integers into a malloc'd array; returns the count or -1. */
static long rvk_gen_list(const char *text, long **out) {
    long n = 1;
    for (const char *p = text; *p; ++p) n += *p == ',';
    long *v = (long *)malloc((size_t)n * sizeof(long));
    if (!v) return -1;
    const char *p = text;
    for (long i = 0; i < n; ++i) {
        char *end = NULL;
        errno = 0;
        v[i] = strtol(p, &end, 10);
        if (errno || end == p || v[i] < -1 || (*end && *end != ',')) {
            free(v);
            return -1;
        }
        p = *end ? end + 1 : end;
    }
    *out = v;
    return n;
}

/* The first index of the largest logit, NaNs passed over (a NaN first logit wins, as it did
 * in a one-pass scan). Two passes that compilers vectorise, where the one-pass scan is a chain
 * of compares and branches: over a 151,936-token vocabulary it was ~0.8 M instructions of the
 * calling thread per token, which no other thread shares. */
enum { RVK_ARGMAX_LANES = 16, RVK_ARGMAX_BLOCK = 64 };

static long rvk_gen_argmax(const float *row, long n) {
    float m = row[0];
    float lane[RVK_ARGMAX_LANES];
    long i = 0;
    if (m != m)
        return 0;
    for (int j = 0; j < RVK_ARGMAX_LANES; ++j) lane[j] = m;
    for (; i + RVK_ARGMAX_LANES <= n; i += RVK_ARGMAX_LANES)
        for (int j = 0; j < RVK_ARGMAX_LANES; ++j)
            lane[j] = row[i + j] > lane[j] ? row[i + j] : lane[j];
    for (int j = 0; j < RVK_ARGMAX_LANES; ++j) m = lane[j] > m ? lane[j] : m;
    for (; i < n; ++i) m = row[i] > m ? row[i] : m;
    /* the first block holding m, then its first element equal to it */
    for (i = 0; i + RVK_ARGMAX_BLOCK <= n; i += RVK_ARGMAX_BLOCK) {
        int hit = 0;
        for (int j = 0; j < RVK_ARGMAX_BLOCK; ++j) hit |= row[i + j] == m;
        if (hit)
            break;
    }
    for (; i < n; ++i)
        if (row[i] == m)
            return i;
    return 0;   /* not reached: m is one of the logits */
}

/* Sampling: the generator is xorshift64* (seeded, reproducible on every target; not the
 * host's numpy draws), candidates are the top-k logits (all when 0) in descending order,
 * cut where their softmax mass at the temperature reaches top-p. */
static double rvk_gen_uniform(unsigned long long *state) {
    unsigned long long x = *state;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *state = x;
    return (double)((x * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* e^x for x <= 0, to about 1e-15 relative, without libm: the runner links only libdl. */
static double rvk_gen_exp(double x) {
    if (x < -700.0) return 0.0;
    const double ln2 = 0.6931471805599453;
    const int k = (int)(x / ln2 - 0.5);   /* x = k ln2 + r, |r| <= ln2 (k <= 0) */
    const double r = x - k * ln2;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 20; ++i) {
        term *= r / i;
        sum += term;
    }
    const unsigned long long bits = (unsigned long long)(k + 1023) << 52;   /* 2^k */
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return sum * scale;
}

static const float *rvk_gen_row; /* qsort's comparison reads the logits through it */

static int rvk_gen_by_logit(const void *a, const void *b) {
    const float x = rvk_gen_row[*(const long *)a], y = rvk_gen_row[*(const long *)b];
    if (x != y) return x > y ? -1 : 1;
    return *(const long *)a < *(const long *)b ? -1 : 1;   /* ties: the lower id first */
}

static long rvk_gen_sample(const float *row, long n, const rvk_gen_args *g, long *order,
                           double *prob, unsigned long long *state) {
    for (long i = 0; i < n; ++i) order[i] = i;
    rvk_gen_row = row;
    qsort(order, (size_t)n, sizeof(long), rvk_gen_by_logit);
    const long k = g->top_k > 0 && g->top_k < n ? g->top_k : n;
    double total = 0.0;
    for (long i = 0; i < k; ++i)
        total += prob[i] = rvk_gen_exp(((double)row[order[i]] - row[order[0]]) / g->temperature);
    long keep = k;
    if (g->top_p < 1.0) {
        double mass = 0.0;
        for (keep = 0; keep < k && mass < g->top_p * total; ++keep) mass += prob[keep];
        total = mass;
    }
    double u = rvk_gen_uniform(state) * total;
    for (long i = 0; i < keep; ++i) {
        u -= prob[i];
        if (u < 0.0) return order[i];
    }
    return order[keep - 1];
}

/* One plan's inputs by role: token ids and positions `len` long, the lengths and the mask. */
typedef struct {
    const void **ins;
    int64_t *ids, *mask, *positions;
    int32_t *seqlens, *total;
    long len;
} rvk_gen_feeds;

typedef struct {
    rvvkit_run_timed_fn run;
    rvvkit_step_fn step;
    rvvkit_run_timed_fn prefill;   /* NULL: no prefill plan */
    const float *w;
    float *arena;
    void **outs;
    rvk_gen_feeds one, chunk;      /* the plan's inputs, the prefill plan's */
    long mask_len;
    long steps;
} rvk_gen_state;

/* `n` tokens (padded to f->len with token 0) at positions pos, pos + 1, ...: the cache then
 * holds pos + f->len live positions. */
static void rvk_gen_fill(const rvk_gen_state *s, const rvk_gen_feeds *f, long pos,
                         const long *tokens, long n) {
    for (long i = 0; i < f->len; ++i) {
        f->ids[i] = i < n ? (int64_t)tokens[i] : 0;
        if (f->positions) f->positions[i] = (int64_t)(pos + i);
    }
    const long live = pos + f->len;
    if (f->seqlens) f->seqlens[0] = (int32_t)(live - 1);
    if (f->total) f->total[0] = (int32_t)live;
    for (long i = 0; f->mask && i < s->mask_len; ++i) f->mask[i] = i < live;
}

static void rvk_gen_check(const rvk_gen_state *s, int rc, const char *plan) {
    if (rc > 0)
        die(EXIT_DATA, "%sstep %d: an index in its run-time data is out of range (run %ld); "
            "nothing outside the tensor was read", plan, rc - 1, s->steps);
    if (rc != 0) die(EXIT_RUNTIME, "the %splan reported error %d (run %ld)", plan, rc, s->steps);
}

/* The prompt chunk tokens[0 .. n) (n <= the chunk) at position `pos` through the prefill plan. */
static void rvk_gen_chunk(rvk_gen_state *s, long pos, const long *tokens, long n) {
    rvk_gen_fill(s, &s->chunk, pos, tokens, n);
    rvk_gen_check(s, s->prefill(s->w, s->arena, s->chunk.ins, NULL, NULL), "prefill ");
    ++s->steps;
}

/* One token through the plan: every step, or the first `steps` (> 0: a prompt token whose
 * logits nobody reads needs only the steps up to the last cache write). */
static void rvk_gen_step(rvk_gen_state *s, long pos, long token, long steps) {
    rvk_gen_fill(s, &s->one, pos, &token, 1);
    int rc = 0;
    if (steps > 0) {
        for (long i = 0; i < steps && rc == 0; ++i)
            if (s->step((int)i, s->w, s->arena, s->one.ins, s->outs) != 0) rc = (int)i + 1;
    } else {
        rc = s->run(s->w, s->arena, s->one.ins, s->outs, NULL);
    }
    rvk_gen_check(s, rc, "");
    ++s->steps;
}

/* The prompt: its tokens before the last in chunks where a prefill plan allows (see the top
 * of this file), the rest a token at a time; the last one leaves its logits in the outputs. */
static void rvk_gen_prompt(rvk_gen_state *s, const rvk_gen_args *g, const long *prompt,
                           long np) {
    long pos = 0;
    const long c = s->prefill ? s->chunk.len : 0;
    while (c >= 2 && (np - 1) - pos >= 2 && pos + c <= g->max_seq) {
        const long n = (np - 1) - pos < c ? (np - 1) - pos : c;
        rvk_gen_chunk(s, pos, prompt + pos, n);
        pos += n;
    }
    for (; pos < np; ++pos) rvk_gen_step(s, pos, prompt[pos], pos + 1 < np ? g->cache_steps : 0);
}

static void rvk_gen_json(const char *dir, const long *tokens, long n, double prefill,
                         double decode, const char *stopped) {
    char path[4096], tmp[4200];
    if (snprintf(path, sizeof path, "%s/generate.json", dir) >= (int)sizeof path)
        die(EXIT_RUNTIME, "--outdir path too long");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) die(EXIT_RUNTIME, "cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "{\"tokens\": [");
    for (long i = 0; i < n; ++i) fprintf(f, "%s%ld", i ? ", " : "", tokens[i]);
    fprintf(f, "], \"prefill_seconds\": %.9g, \"decode_seconds\": %.9g, \"stopped\": \"%s\"}\n",
            prefill, decode, stopped);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        die(EXIT_RUNTIME, "cannot write %s: %s", path, strerror(errno));
}

/* Runs the loop; `out_elems`/`in_elems` check the roles' sizes. */
static void rvk_generate(const rvk_gen_args *g, rvk_gen_state *s, const char *outdir,
                         long vocab) {
    long *prompt = NULL, *eos = NULL;
    const long np = rvk_gen_list(g->prompt, &prompt);
    const long neos = g->eos ? rvk_gen_list(g->eos, &eos) : 0;
    if (neos < 0) die(EXIT_USAGE, "--eos expects token ids like 2 or 2,7, got '%s'", g->eos);
    if (np < 1) die(EXIT_USAGE, "--prompt-ids expects token ids like 1,2,3, got '%s'", g->prompt);
    for (long i = 0; i < np; ++i)
        if (prompt[i] < 0 || prompt[i] >= vocab)
            die(EXIT_INPUTS, "token id %ld is outside the vocabulary (0 .. %ld)", prompt[i],
                vocab - 1);
    if (np > g->max_seq)
        die(EXIT_INPUTS, "the prompt has %ld tokens; the artifact's cache holds %ld", np,
            g->max_seq);
    long *tokens = (long *)malloc((size_t)g->new_tokens * sizeof(long));
    float *kept = NULL;
    if (!tokens) die(EXIT_RUNTIME, "out of memory");
    if (g->logits_out) {
        kept = (float *)malloc((size_t)g->new_tokens * (size_t)vocab * sizeof(float));
        if (!kept) die(EXIT_RUNTIME, "out of memory for --logits-out");
    }
    const float *logits = (const float *)s->outs[g->roles[3]];
    long *order = NULL;
    double *prob = NULL;
    unsigned long long state = g->seed * 2654435761ULL + 0x9E3779B97F4A7C15ULL;
    if (g->temperature > 0.0) {
        order = (long *)malloc((size_t)vocab * sizeof(long));
        prob = (double *)malloc((size_t)vocab * sizeof(double));
        if (!order || !prob) die(EXIT_RUNTIME, "out of memory for sampling");
    }
    const double t0 = now();
    rvk_gen_prompt(s, g, prompt, np);
    const double t1 = now();
    long pos = np, n = 0;
    const char *stopped = "max_new_tokens";
    for (;;) {
        const long token = g->temperature > 0.0
                               ? rvk_gen_sample(logits, vocab, g, order, prob, &state)
                               : rvk_gen_argmax(logits, vocab);
        if (kept) memcpy(kept + n * vocab, logits, (size_t)vocab * sizeof(float));
        tokens[n++] = token;
        printf("%ld\n", token);
        fflush(stdout);
        int at_eos = 0;
        for (long i = 0; i < neos; ++i) at_eos |= token == eos[i];
        if (at_eos) { stopped = "eos"; break; }
        if (n >= g->new_tokens) break;
        if (pos >= g->max_seq) { stopped = "bound"; break; }
        rvk_gen_step(s, pos++, token, 0);
    }
    const double t2 = now();
    if (kept) {
        char err[8192];
        if (rvk_npy_write(g->logits_out, kept, n * vocab, 1, err, sizeof err) != 0)
            die(EXIT_RUNTIME, "%s", err);
    }
    rvk_gen_json(outdir, tokens, n, t1 - t0, t2 - t1, stopped);
    free(prompt);
    free(eos);
    free(order);
    free(prob);
    free(tokens);
    free(kept);
}

#endif /* RVK_GENERATE_H */
