/* rvvkit_abi.h - the plan ABI: the functions every rvvkit kernel object exports. This is its
 * one declaration: the C emitter embeds this file in each generated translation unit (the
 * artifact's source must compile on a board alone, so it cannot #include it), the standalone
 * runner includes it, and the Python executors read their cffi declarations from it.
 *
 * Contract (version RVVKIT_ABI_VERSION):
 * - rvvkit_abi_version() returns the version the object was generated for; a caller speaking
 *   another version must refuse the object (the runner exits 5, the executors raise).
 * - Buffers are float32, 64-byte aligned, owned by the caller:
 *     w    the artifact's .rvvkit.weights section, rvvkit_weights_floats() floats;
 *     a    the arena (all intermediate tensors), rvvkit_arena_floats() floats;
 *     in   rvvkit_num_inputs() pointers, input i holding rvvkit_input_floats(i) floats;
 *     out  rvvkit_num_outputs() pointers, output i holding rvvkit_output_floats(i) floats.
 *   The sizes return -1 for an index out of range. Graph inputs and outputs are in graph
 *   order, C order (row-major), shapes as in the artifact's meta.
 * - rvvkit_step(i, ...) runs step i of the plan (-1 when i is out of range);
 *   rvvkit_run_timed(..., seconds) runs every step in order and, when `seconds` is not NULL,
 *   adds step i's wall time to seconds[i] (rvvkit_num_steps() entries); rvvkit_run(...) is
 *   rvvkit_run_timed(..., NULL). They return 0, or non-zero on failure (the CUDA dialect: a
 *   cudaError_t). The CUDA dialect exports the same functions on device pointers.
 * - A new or changed function raises RVVKIT_ABI_VERSION. History:
 *     1  the plan entry points;
 *     2  rvvkit_input_floats / rvvkit_output_floats.
 *
 * Valid as C (C99 and later) and as C++ (C++11 and later). The function-pointer types are
 * for callers that look the functions up with dlsym. */
#ifndef RVVKIT_ABI_H
#define RVVKIT_ABI_H

#define RVVKIT_ABI_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

int rvvkit_abi_version(void);
int rvvkit_num_steps(void);
long rvvkit_arena_floats(void);
long rvvkit_weights_floats(void);
int rvvkit_num_inputs(void);
int rvvkit_num_outputs(void);
long rvvkit_input_floats(int i);
long rvvkit_output_floats(int i);
int rvvkit_step(int i, const float *w, float *a, const float *const *in, float *const *out);
int rvvkit_run_timed(const float *w, float *a, const float *const *in, float *const *out,
                     double *seconds);
int rvvkit_run(const float *w, float *a, const float *const *in, float *const *out);

typedef int (*rvvkit_count_fn)(void);      /* abi_version, num_steps, num_inputs/outputs */
typedef long (*rvvkit_floats_fn)(void);    /* arena_floats, weights_floats */
typedef long (*rvvkit_io_floats_fn)(int);  /* input_floats, output_floats */
typedef int (*rvvkit_step_fn)(int, const float *, float *, const float *const *,
                              float *const *);
typedef int (*rvvkit_run_timed_fn)(const float *, float *, const float *const *,
                                   float *const *, double *);
typedef int (*rvvkit_run_fn)(const float *, float *, const float *const *, float *const *);

#ifdef __cplusplus
}
#endif

#endif /* RVVKIT_ABI_H */
