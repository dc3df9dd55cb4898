/* rvvkit runner: runs an rvvkit artifact's plan with no Python on the machine (an RVV board,
 * or qemu-riscv64). The kernels are the artifact's C source compiled into a shared object
 * beforehand (rvvkit does it; on a board: cc -O3 -shared -fPIC model.c -o model.so -lm).
 * Build the runner itself without Python: make -C runtime_c [CC=riscv64-linux-gnu-gcc].
 *
 *   runner ARTIFACT KERNELS.so [--inputs in0.npy in1.npy ...] [--outdir DIR] [--repeat N]
 *          [--warmup W] [--timings FILE] [--untimed] [--no-verify] [--threads T]
 *   runner ARTIFACT KERNELS.so --generate N --prompt-ids 1,2,3 --roles I,S,T,L,M,P --max-seq M
 *          [--cache-steps C] [--eos E[,E...]] [--temperature T --top-k K --top-p P --seed S]
 *          [--logits-out FILE] [--outdir DIR] [--threads T] [--no-verify]
 *
 * --generate runs a decoder's plan once per token in this process (rvk_generate.h), the
 * key/value caches staying in the arena: the prompt (in chunks through the artifact's prefill
 * plan when it has one), then up to N greedy tokens.
 *
 * --threads T runs the kernels on T threads (default: $RVVKIT_NUM_THREADS, else the online
 * cores; outputs are bit-identical for every T). Checks ARTIFACT first (rvk_artifact.h: every section against the checksums of its meta, unless
 * --no-verify; the meta's sizes against the kernels'), then reads the weights from its
 * .rvvkit.weights section (mapped, used in place: the section is 64-byte aligned in the file), inputs from .npy files (float32, C order, graph input order),
 * runs W warm-up and N timed inferences and writes outputs as DIR/out<i>.npy (1-D; reshape from
 * the artifact's meta). --repeat 0 loads everything but never infers, so that instruction
 * counts of a --repeat 0 run measure start-up alone and can be subtracted. --timings writes
 * JSON: per-step mean seconds over the N runs and total wall time. --untimed skips per-step
 * clocks (rvvkit_run instead of rvvkit_run_timed) so that nothing but the kernels runs between
 * steps, e.g. while counting instructions.
 *
 * Exit codes: 0 ok, 2 usage, 3 bad artifact, 4 bad inputs, 5 kernel load failure,
 * 6 runtime failure (out of memory, a kernel reports an error, outputs cannot be written).
 * Every message goes to stderr, prefixed "rvvkit-runner:".
 *
 * Valid as C11 and as C++11 (the one compiler rvvkit picks may be g++), hence the explicit
 * casts from void *. Assumes a little-endian target, as RISC-V Linux and x86 are. */
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* posix_memalign, clock_gettime */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rvk_artifact.h"
#include "rvk_npy.h"
/* The plan ABI: the kernels' functions and their pointer types. */
#include "rvvkit_abi.h"

#define MAX_IO 256

enum { EXIT_USAGE = 2, EXIT_ARTIFACT = 3, EXIT_INPUTS = 4, EXIT_KERNELS = 5, EXIT_RUNTIME = 6,
       EXIT_DATA = 7 };

static void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("rvvkit-runner: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc64(size_t bytes, const char *what) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        die(EXIT_RUNTIME, "out of memory allocating %zu bytes for %s", bytes, what);
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

static long parse_count(const char *opt, const char *text) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || !*text || *end || v < 0)
        die(EXIT_USAGE, "%s expects a non-negative integer, got '%s'", opt, text);
    return v;
}

static double parse_real(const char *opt, const char *text, double lo, double hi) {
    char *end = NULL;
    errno = 0;
    const double v = strtod(text, &end);
    if (errno || !*text || *end || !(v >= lo && v <= hi))
        die(EXIT_USAGE, "%s expects a number in [%g, %g], got '%s'", opt, lo, hi, text);
    return v;
}

/* dlsym through memcpy: converting void * to a function pointer directly is not portable C. */
static void sym(void *lib, const char *path, const char *name, void *fn_out, size_t fn_size) {
    void *p = dlsym(lib, name);
    if (!p) die(EXIT_KERNELS, "%s lacks symbol %s: not rvvkit kernels, or kernels from an older "
                  "rvvkit (rebuild the artifact with rvvkit build)", path, name);
    memcpy(fn_out, &p, fn_size);
}
#define SYM(lib, path, name, var) sym(lib, path, name, &(var), sizeof(var))

#include "rvk_generate.h"
#include "rvk_prefill.h"

struct args {
    const char *artifact, *kernels, *outdir, *timings;
    const char *inputs[MAX_IO];
    int ninputs, untimed, no_verify;
    long repeat, warmup, threads;
    rvk_gen_args gen;   /* gen.new_tokens > 0: --generate */
    const char *roles;
};

static const char USAGE[] =
    "usage: runner ARTIFACT KERNELS.so [--inputs IN.npy ...] [--outdir DIR] [--repeat N]\n"
    "              [--warmup W] [--timings FILE] [--untimed] [--no-verify] [--threads T]\n"
    "       runner ARTIFACT KERNELS.so --generate N --prompt-ids 1,2,3 --roles I,S,T,L,M,P\n"
    "              --max-seq M [--cache-steps C] [--eos E[,E...]] [--temperature T]\n"
    "              [--top-k K] [--top-p P] [--seed S] [--logits-out FILE] [--outdir DIR]\n"
    "              [--threads T]";

static struct args parse_args(int argc, char **argv) {
    struct args a;
    memset(&a, 0, sizeof a);
    a.outdir = ".";
    a.repeat = 1;
    a.gen.top_p = 1.0;
    int positional = 0;
    for (int i = 1; i < argc; ++i) {
        const char *s = argv[i];
        const int has_value = i + 1 < argc;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            puts(USAGE);
            exit(0);
        } else if (!strcmp(s, "--inputs")) {
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                if (a.ninputs == MAX_IO) die(EXIT_USAGE, "more than %d inputs", MAX_IO);
                a.inputs[a.ninputs++] = argv[++i];
            }
        } else if (!strcmp(s, "--untimed")) {
            a.untimed = 1;
        } else if (!strcmp(s, "--no-verify")) {
            a.no_verify = 1;
        } else if (!strncmp(s, "--", 2)) {
            if (!has_value) die(EXIT_USAGE, "%s needs a value\n%s", s, USAGE);
            const char *v = argv[++i];
            if (!strcmp(s, "--outdir")) a.outdir = v;
            else if (!strcmp(s, "--timings")) a.timings = v;
            else if (!strcmp(s, "--repeat")) a.repeat = parse_count(s, v);
            else if (!strcmp(s, "--warmup")) a.warmup = parse_count(s, v);
            else if (!strcmp(s, "--threads")) a.threads = parse_count(s, v);
            else if (!strcmp(s, "--generate")) a.gen.new_tokens = parse_count(s, v);
            else if (!strcmp(s, "--max-seq")) a.gen.max_seq = parse_count(s, v);
            else if (!strcmp(s, "--eos")) a.gen.eos = v;
            else if (!strcmp(s, "--cache-steps")) a.gen.cache_steps = parse_count(s, v);
            else if (!strcmp(s, "--top-k")) a.gen.top_k = parse_count(s, v);
            else if (!strcmp(s, "--seed")) a.gen.seed = (unsigned long long)parse_count(s, v);
            else if (!strcmp(s, "--temperature")) a.gen.temperature = parse_real(s, v, 0.0, 1e6);
            else if (!strcmp(s, "--top-p")) a.gen.top_p = parse_real(s, v, 1e-9, 1.0);
            else if (!strcmp(s, "--prompt-ids")) a.gen.prompt = v;
            else if (!strcmp(s, "--roles")) a.roles = v;
            else if (!strcmp(s, "--logits-out")) a.gen.logits_out = v;
            else die(EXIT_USAGE, "unknown option %s\n%s", s, USAGE);
        } else if (positional == 0) {
            a.artifact = s, positional = 1;
        } else if (positional == 1) {
            a.kernels = s, positional = 2;
        } else {
            die(EXIT_USAGE, "unexpected argument '%s'\n%s", s, USAGE);
        }
    }
    if (positional != 2) die(EXIT_USAGE, "ARTIFACT and KERNELS.so are required\n%s", USAGE);
    if (a.gen.new_tokens > 0 || a.gen.prompt || a.roles) {
        long *r = NULL;
        if (a.gen.new_tokens < 1 || !a.gen.prompt || !a.roles || a.gen.max_seq < 1)
            die(EXIT_USAGE, "--generate N (N >= 1) needs --prompt-ids, --roles and --max-seq\n%s",
                USAGE);
        if (rvk_gen_list(a.roles, &r) != 6)
            die(EXIT_USAGE, "--roles expects six indices IDS,SEQLENS,TOTAL,LOGITS,MASK,POSITIONS "
                "(-1: none), got '%s'", a.roles);
        for (int i = 0; i < 6; ++i) a.gen.roles[i] = (int)r[i];
        free(r);
    }
    return a;
}

/* Maps the artifact (it stays mapped until exit) and checks it: rvk_artifact.h. */
static const unsigned char *map_artifact(const char *path, int verify, rvk_facts *facts,
                                         uint64_t *size_out) {
    char err[8192]; /* room for two 4096-byte paths: no truncation warnings */
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(EXIT_ARTIFACT, "cannot open artifact %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) die(EXIT_ARTIFACT, "cannot stat %s: %s", path, strerror(errno));
    const uint64_t size = (uint64_t)st.st_size;
    static const unsigned char empty[1] = {0};
    const unsigned char *data = empty;
    if (size > 0) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) die(EXIT_ARTIFACT, "cannot map %s: %s", path, strerror(errno));
        data = (const unsigned char *)m;
    }
    close(fd);
    if (rvk_artifact_read(data, size, path, verify, facts, err, sizeof err) != 0)
        die(EXIT_ARTIFACT, "%s", err);
    *size_out = size;
    return data;
}

/* The kernels write buffers sized from what they declare, and rvvkit reads the outputs back
 * with the meta's shapes: artifact and kernels must agree on every size, or nothing runs. */
static void check_kernels(const char *kpath, const rvk_facts *f, int abi, int nsteps, int nin,
                          int nout, long arena, long weights, rvvkit_io_elems_fn in_elems,
                          rvvkit_io_elems_fn out_elems, rvvkit_io_dtype_fn in_dtype,
                          rvvkit_io_dtype_fn out_dtype) {
    const char *what = NULL;
    int idx = -1;
    if (f->abi >= 0 && f->abi != abi) what = "ABI version";
    else if (f->steps != nsteps) what = "step count";
    else if (f->nin != nin) what = "input count";
    else if (f->nout != nout) what = "output count";
    else if (f->arena_floats != arena) what = "arena size";
    else if (f->weights_len != (uint64_t)weights * sizeof(float)) what = "weights size";
    for (int i = 0; !what && i < nin; ++i)
        if (f->in[i].elems != in_elems(i) || f->in[i].dtype != in_dtype(i)) what = "input", idx = i;
    for (int i = 0; !what && i < nout; ++i)
        if (f->out[i].elems != out_elems(i) || f->out[i].dtype != out_dtype(i))
            what = "output", idx = i;
    if (what) {
        char at[32] = "";
        if (idx >= 0) snprintf(at, sizeof at, " %d (size or type)", idx);
        die(EXIT_ARTIFACT, "the artifact's meta and the kernels %s disagree on the %s%s: they "
            "come from different builds, or the artifact was edited", kpath, what, at);
    }
}

/* The weights, 64-byte aligned: in place when the section is (the writer aligns it), else a
 * copy. */
static const float *weights_of(const unsigned char *data, const rvk_facts *f) {
    const unsigned char *w = data + f->weights_off;
    if (f->weights_len == 0 || ((uintptr_t)w % 64) != 0) {
        void *copy = xalloc64((size_t)f->weights_len, "weights");
        if (f->weights_len) memcpy(copy, w, (size_t)f->weights_len);
        return (const float *)copy;
    }
    return (const float *)w;
}

static void write_timings(const struct args *a, int nsteps, const double *secs, double load_s,
                          double warm_s, double total_s) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", a->timings) >= (int)sizeof tmp)
        die(EXIT_RUNTIME, "timings path too long");
    FILE *f = fopen(tmp, "w");
    if (!f) die(EXIT_RUNTIME, "cannot write %s: %s", tmp, strerror(errno));
    const double n = a->repeat ? (double)a->repeat : 1.0;
    fprintf(f, "{\"abi_version\": %d, \"num_steps\": %d, \"repeat\": %ld, \"warmup\": %ld, "
            "\"timed_steps\": %s,\n \"load_seconds\": %.9g, \"warmup_seconds\": %.9g, "
            "\"total_seconds\": %.9g, \"mean_seconds\": %.9g,\n \"step_seconds\": [",
            RVVKIT_ABI_VERSION, nsteps, a->repeat, a->warmup, a->untimed ? "false" : "true",
            load_s, warm_s, total_s, total_s / n);
    for (int i = 0; i < nsteps; ++i) fprintf(f, "%s%.9g", i ? ", " : "", secs[i] / n);
    fputs("]}\n", f);
    if (fclose(f) != 0 || rename(tmp, a->timings) != 0)
        die(EXIT_RUNTIME, "cannot write %s: %s", a->timings, strerror(errno));
}

/* A run's status (rvvkit_abi.h): 1 + the step whose kernel found its data out of range. */
static void check_run(int rc, long run) {
    if (rc > 0)
        die(EXIT_DATA, "step %d: an index in its run-time data is out of range (run %ld); "
            "nothing outside the tensor was read", rc - 1, run);
    if (rc != 0) die(EXIT_RUNTIME, "the plan reported error %d (run %ld)", rc, run);
}

/* --generate: the roles' buffers made here, every output allocated, then the loop. */
static int generate(const struct args *a, int nin, int nout, rvvkit_io_elems_fn in_elems,
                    rvvkit_io_elems_fn out_elems, rvvkit_io_dtype_fn in_dtype,
                    rvvkit_io_dtype_fn out_dtype, rvvkit_run_timed_fn run,
                    rvvkit_step_fn step, const rvk_prefill_plan *pre, const float *w,
                    long arena_words) {
    /* ids, seqlens, total, logits, mask, positions (-1: absent) */
    const int *r = a->gen.roles;
    const int in_roles[5] = {r[0], r[1], r[2], r[4], r[5]};
    int given = 0, fits = r[0] >= 0 && (r[1] >= 0 || r[4] >= 0) && r[3] >= 0 && r[3] < nout;
    for (int i = 0; i < 5; ++i) {
        if (in_roles[i] < 0) continue;
        ++given;
        fits = fits && in_roles[i] < nin;
        for (int j = 0; j < i; ++j) fits = fits && in_roles[j] != in_roles[i];
    }
    if (!fits || given != nin)
        die(EXIT_USAGE, "--roles %s does not fit a decoder with %d inputs and %d outputs",
            a->roles, nin, nout);
    if (in_dtype(r[0]) != 7 || (r[1] >= 0 && in_dtype(r[1]) != 6) ||
        (r[2] >= 0 && in_dtype(r[2]) != 6) || (r[4] >= 0 && in_dtype(r[4]) != 7) ||
        (r[5] >= 0 && in_dtype(r[5]) != 7) || out_dtype(r[3]) != 1)
        die(EXIT_USAGE, "--roles %s: ids, positions and the mask must be int64, the lengths "
            "int32 and the logits float32", a->roles);
    static const void *ins[MAX_IO + 1], *pre_ins[MAX_IO + 1];
    void *outs[MAX_IO + 1] = {NULL};
    rvk_gen_state s;
    memset(&s, 0, sizeof s);
    rvk_gen_feeds_make(&a->gen, a->roles, &s.one, ins, 1, in_elems, "");
    if (pre->tokens > 0) {
        rvk_gen_feeds_make(&a->gen, a->roles, &s.chunk, pre_ins, pre->tokens, pre->in_elems,
                           "prefill plan's ");
        s.prefill = pre->run;
    }
    s.mask_len = r[4] >= 0 ? a->gen.max_seq : 0;
    for (int i = 0; i < nout; ++i) {
        const rvk_npy_type *type = rvk_npy_type_of(out_dtype(i));
        if (!type) die(EXIT_KERNELS, "the kernels declare output %d of unknown type", i);
        outs[i] = xalloc64((size_t)out_elems(i) * type->size, "outputs");
    }
    s.run = run, s.step = step, s.w = w, s.outs = outs;
    s.arena = (float *)xalloc64((size_t)arena_words * sizeof(float), "the arena");
    rvk_generate(&a->gen, &s, a->outdir, out_elems(r[3]));
    return 0;
}

int main(int argc, char **argv) {
    const double t_start = now();
    struct args a = parse_args(argc, argv);
    char err[8192]; /* room for two 4096-byte paths: no truncation warnings */

    /* dlopen searches the library path for a bare name; a file name is meant here. */
    char kpath[4096];
    snprintf(kpath, sizeof kpath, "%s%s", strchr(a.kernels, '/') ? "" : "./", a.kernels);
    void *lib = dlopen(kpath, RTLD_NOW | RTLD_LOCAL);
    if (!lib) die(EXIT_KERNELS, "cannot load kernels %s: %s", a.kernels, dlerror());
    rvvkit_count_fn abi, num_steps, num_in, num_out;
    rvvkit_floats_fn arena_floats, weights_floats;
    rvvkit_io_elems_fn in_elems, out_elems;
    rvvkit_io_dtype_fn in_dtype, out_dtype;
    rvvkit_run_timed_fn run_timed;
    SYM(lib, a.kernels, "rvvkit_abi_version", abi);
    if (abi() != RVVKIT_ABI_VERSION)
        die(EXIT_KERNELS, "%s has kernel ABI version %d; this runner speaks version %d "
            "(rebuild the runner and the kernels with the same rvvkit)", a.kernels, abi(),
            RVVKIT_ABI_VERSION);
    SYM(lib, a.kernels, "rvvkit_num_steps", num_steps);
    SYM(lib, a.kernels, "rvvkit_num_inputs", num_in);
    SYM(lib, a.kernels, "rvvkit_num_outputs", num_out);
    SYM(lib, a.kernels, "rvvkit_arena_floats", arena_floats);
    SYM(lib, a.kernels, "rvvkit_weights_floats", weights_floats);
    SYM(lib, a.kernels, "rvvkit_input_elems", in_elems);
    SYM(lib, a.kernels, "rvvkit_output_elems", out_elems);
    SYM(lib, a.kernels, "rvvkit_input_dtype", in_dtype);
    SYM(lib, a.kernels, "rvvkit_output_dtype", out_dtype);
    SYM(lib, a.kernels, "rvvkit_run_timed", run_timed);
    rvvkit_set_num_threads_fn set_threads;
    SYM(lib, a.kernels, "rvvkit_set_num_threads", set_threads);
    if (a.threads > 0) set_threads(a.threads > 4096 ? 4096 : (int)a.threads);
    const int nin = num_in(), nout = num_out(), nsteps = num_steps();
    if (nin < 0 || nin > MAX_IO || nout < 0 || nout > MAX_IO || nsteps < 0)
        die(EXIT_KERNELS, "%s reports implausible sizes (%d inputs, %d outputs, %d steps)",
            a.kernels, nin, nout, nsteps);

    static rvk_facts facts; /* static: 4 KiB of I/O facts stay off the stack */
    uint64_t art_size = 0;
    const unsigned char *art = map_artifact(a.artifact, !a.no_verify, &facts, &art_size);
    check_kernels(a.kernels, &facts, abi(), nsteps, nin, nout, arena_floats(), weights_floats(),
                  in_elems, out_elems, in_dtype, out_dtype);
    const float *weights = weights_of(art, &facts);

    const rvk_prefill_plan pre = rvk_prefill_check(lib, a.kernels, &facts);
    if (a.gen.new_tokens > 0) {
        rvvkit_step_fn step;
        SYM(lib, a.kernels, "rvvkit_step", step);
        return generate(&a, nin, nout, in_elems, out_elems, in_dtype, out_dtype, run_timed, step,
                        &pre, weights, arena_floats());
    }
    if (a.ninputs != nin)
        die(EXIT_INPUTS, "the model takes %d input(s) but %d .npy file(s) were given "
            "(--inputs, in graph input order)", nin, a.ninputs);
    const void *ins[MAX_IO + 1] = {NULL};
    void *outs[MAX_IO + 1] = {NULL};
    for (int i = 0; i < nin; ++i) {
        void *buf = NULL;
        if (rvk_npy_read(a.inputs[i], in_elems(i), in_dtype(i), &buf, err, sizeof err) != 0)
            die(EXIT_INPUTS, "%s", err);
        ins[i] = buf;
    }
    for (int i = 0; i < nout; ++i) {
        const rvk_npy_type *type = rvk_npy_type_of(out_dtype(i));
        if (!type) die(EXIT_KERNELS, "%s declares output %d of unknown type %d", a.kernels, i,
                       out_dtype(i));
        outs[i] = xalloc64((size_t)out_elems(i) * type->size, "outputs");
    }
    float *arena = (float *)xalloc64((size_t)arena_floats() * sizeof(float), "the arena");
    double *secs = (double *)calloc(nsteps > 0 ? (size_t)nsteps : 1, sizeof(double));
    if (!secs) die(EXIT_RUNTIME, "out of memory");
    const double t_loaded = now();

    for (long r = 0; r < a.warmup; ++r)
        check_run(run_timed(weights, arena, ins, outs, NULL), r);
    const double t_warm = now();
    for (long r = 0; r < a.repeat; ++r)
        check_run(run_timed(weights, arena, ins, outs, a.untimed ? NULL : secs), r);
    const double t_done = now();

    if (a.repeat > 0) {
        char path[4096];
        for (int i = 0; i < nout; ++i) {
            if (snprintf(path, sizeof path, "%s/out%d.npy", a.outdir, i) >= (int)sizeof path)
                die(EXIT_RUNTIME, "--outdir path too long");
            if (rvk_npy_write(path, outs[i], out_elems(i), out_dtype(i), err, sizeof err) != 0)
                die(EXIT_RUNTIME, "%s", err);
        }
    }
    if (a.timings)
        write_timings(&a, nsteps, secs, t_loaded - t_start, t_warm - t_loaded, t_done - t_warm);
    return 0;
}
