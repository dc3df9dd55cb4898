/* rvvkit_abi.h - the plan ABI: the functions every rvvkit kernel object exports. This is its
 * one declaration: the C emitter embeds this file in each generated translation unit (the
 * artifact's source must compile on a board alone, so it cannot #include it), the standalone
 * runner includes it, and the Python executors read their cffi declarations from it.
 *
 * Contract (version RVVKIT_ABI_VERSION):
 * - rvvkit_abi_version() returns the version the object was generated for; a caller speaking
 *   another version must refuse the object (the runner exits 5, the executors raise).
 * - Buffers are 64-byte aligned and owned by the caller:
 *     w    the artifact's .rvvkit.weights section, rvvkit_weights_floats() 4-byte words
 *          (float32 weights, and the raw bytes of integer and bool constants);
 *     a    the arena (all intermediate tensors), rvvkit_arena_floats() 4-byte words;
 *     in   rvvkit_num_inputs() pointers, input i holding rvvkit_input_elems(i) elements of
 *          the type rvvkit_input_dtype(i) names;
 *     out  rvvkit_num_outputs() pointers, likewise (rvvkit_output_elems, _dtype).
 *   Element types are ONNX TensorProto codes: 1 float32, 7 int64, 6 int32, 3 int8, 2 uint8,
 *   9 bool (one byte, 0 or 1). The sizes and types return -1 for an index out of range. Graph
 *   inputs and outputs are in graph order, C order (row-major), shapes as in the meta.
 * - rvvkit_step(i, ...) runs step i of the plan: 0, 1 when its kernel found run-time data out
 *   of range (a Gather index, say), -1 when i is out of range.
 *   rvvkit_run_timed(..., seconds) runs every step in order and, when `seconds` is not NULL,
 *   adds step i's wall time to seconds[i] (rvvkit_num_steps() entries); rvvkit_run(...) is
 *   rvvkit_run_timed(..., NULL). They return 0, or non-zero on failure: the C dialect returns
 *   1 + the index of the step that failed a check (and runs no later step); the CUDA dialect a
 *   cudaError_t, or RVVKIT_STATUS_DATA + step when a kernel found data out of range. The CUDA
 *   dialect exports the same functions on device pointers.
 * - A decoder artifact may hold a second plan, the prefill plan, run on the same weights and
 *   arena: rvvkit_prefill_tokens() is the number of prompt tokens it takes per call (0: no
 *   such plan, and no other rvvkit_prefill_* function is exported). It reads the same graph
 *   inputs in the same order as the plan (sized for that many tokens: rvvkit_prefill_input_
 *   elems), writes the key/value caches the plan keeps in the arena at the same offsets, and
 *   has no outputs. Its rvvkit_prefill_{num_steps, num_inputs, num_outputs, input_elems,
 *   output_elems, input_dtype, output_dtype, step, run_timed, run} behave as the plan's
 *   functions of the same name without "prefill_". The arena holds the larger of the two.
 * - rvvkit_set_num_threads(n) sets the threads later runs use (n <= 0: the default, which is
 *   $RVVKIT_NUM_THREADS, else the online cores) and returns the count set; outputs are
 *   bit-identical for every count. The CUDA dialect accepts and ignores it (returns 1).
 * - A new or changed function raises RVVKIT_ABI_VERSION. History:
 *     1  the plan entry points;
 *     2  rvvkit_input_floats / rvvkit_output_floats;
 *     3  typed graph inputs/outputs: void pointers, rvvkit_{input,output}_{elems,dtype}
 *        replace the _floats pair, steps return a status;
 *     4  rvvkit_set_num_threads;
 *     5  the prefill plan (rvvkit_prefill_tokens and the rvvkit_prefill_* functions).
 *
 * Valid as C (C99 and later) and as C++ (C++11 and later). The function-pointer types are
 * for callers that look the functions up with dlsym. */
#ifndef RVVKIT_ABI_H
#define RVVKIT_ABI_H

#define RVVKIT_ABI_VERSION 5
/* CUDA dialect: base of the status for a kernel that found its data out of range */
#define RVVKIT_STATUS_DATA 100000

#ifdef __cplusplus
extern "C" {
#endif

int rvvkit_abi_version(void);
int rvvkit_num_steps(void);
long rvvkit_arena_floats(void);
long rvvkit_weights_floats(void);
int rvvkit_num_inputs(void);
int rvvkit_num_outputs(void);
long rvvkit_input_elems(int i);
long rvvkit_output_elems(int i);
int rvvkit_input_dtype(int i);
int rvvkit_output_dtype(int i);
int rvvkit_step(int i, const float *w, float *a, const void *const *in, void *const *out);
int rvvkit_run_timed(const float *w, float *a, const void *const *in, void *const *out,
                     double *seconds);
int rvvkit_run(const float *w, float *a, const void *const *in, void *const *out);
int rvvkit_set_num_threads(int n);
int rvvkit_prefill_tokens(void);
int rvvkit_prefill_num_steps(void);
int rvvkit_prefill_num_inputs(void);
int rvvkit_prefill_num_outputs(void);
long rvvkit_prefill_input_elems(int i);
long rvvkit_prefill_output_elems(int i);
int rvvkit_prefill_input_dtype(int i);
int rvvkit_prefill_output_dtype(int i);
int rvvkit_prefill_step(int i, const float *w, float *a, const void *const *in,
                        void *const *out);
int rvvkit_prefill_run_timed(const float *w, float *a, const void *const *in,
                             void *const *out, double *seconds);
int rvvkit_prefill_run(const float *w, float *a, const void *const *in, void *const *out);

typedef int (*rvvkit_count_fn)(void);      /* abi_version, num_steps, num_inputs/outputs,
                                              prefill_tokens */
typedef long (*rvvkit_floats_fn)(void);    /* arena_floats, weights_floats */
typedef long (*rvvkit_io_elems_fn)(int);   /* input_elems, output_elems */
typedef int (*rvvkit_io_dtype_fn)(int);    /* input_dtype, output_dtype */
typedef int (*rvvkit_step_fn)(int, const float *, float *, const void *const *,
                              void *const *);
typedef int (*rvvkit_run_timed_fn)(const float *, float *, const void *const *,
                                   void *const *, double *);
typedef int (*rvvkit_run_fn)(const float *, float *, const void *const *, void *const *);
typedef int (*rvvkit_set_num_threads_fn)(int);

#ifdef __cplusplus
}
#endif

#endif /* RVVKIT_ABI_H */
