"""Kernel plan → one C translation unit, valid as C11 and C++11.

Layout of the source: prelude, static support helpers (each once), kernel functions (each
distinct kernel once, exported so it can be called alone for profiling), then the plan entry
points that call kernels with pointers into the weights blob `w`, the arena `a` and the graph's
input/output buffers."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .. import dtypes
from ..version import __version__
from ..artifact import abi
from ..resources import runtime_c_file
from .cfmt import indent
from .kernel import Kernel
from .loops import loop
from .parallel import definition
from .plan import Plan

ABI_VERSION = abi.ABI_VERSION  # declared in runtime_c/rvvkit_abi.h

# The thread pool kernels split their work on, embedded like the ABI header (below).
POOL = "/* runtime_c/rvk_pool.h, embedded */\n" + runtime_c_file("rvk_pool.h").read_text("utf-8")

# The call-free math helpers, one text for the C unit and the CUDA one (RVK_HD: __host__
# __device__ there), so that an activation computes the same floats on every executor.
MATH = """\
/* e^x and tanh for the activations (sigmoid, SiLU, Swish, tanh): branch-free and call-free,
 * so that compilers vectorise the loops around them (libm's expf is a call per element).
 * x = n ln2 + r, |r| <= ln2/2, e^r - 1 by a degree-7 polynomial (<= 2 ulp), 2^n built in the
 * exponent field. Clamped to [-87.3, 88] (results stay normal); NaN in, NaN out. tanh is within
 * 4 ulp (tests/host/test_prelude_math.py measures all three). */
static RVK_UNUSED RVK_HD inline float rvk_expf(float x) {
    x = x > 88.0f ? 88.0f : x;
    x = x < -87.3f ? -87.3f : x;
    const float t = x * 1.442695f + 12582912.0f;  /* 1.5 * 2^23: round(x/ln2) in t's bits */
    const float n = t - 12582912.0f;
    float r = x - n * 0.6933594f;
    r = r + n * 2.1219444e-4f;
    float p = 1.9875691e-4f;
    p = p * r + 1.3981999e-3f;
    p = p * r + 8.333452e-3f;
    p = p * r + 4.1665796e-2f;
    p = p * r + 0.16666666f;
    p = p * r + 0.5f;
    const float q = r + r * r * p;                  /* e^r - 1 */
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits - 0x4B400000u + 127u) << 23;       /* 2^n */
    float s;
    memcpy(&s, &bits, sizeof s);
    return s + s * q;
}

static RVK_UNUSED RVK_HD inline float rvk_tanhf(float x) {
    const float a = x < 0.0f ? -x : x;
    const float e = rvk_expf(-2.0f * a);
    const float a2 = a * a;  /* below 1/16 the series, where 1 - e would cancel */
    const float small = a + a * a2 * (-0.33333334f + a2 * (0.13333334f - a2 * 0.053968254f));
    const float t = a < 0.0625f ? small : (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : t;
}

/* 1 / (1 + e^-x) with the reciprocal by Newton's method from a bit-level first guess (three
 * steps reach float precision, ~2 ulp): a vector division costs 5-10 FMAs on many cores. e^-x
 * is capped at e^80 to keep 1 + e^-x inside the guess's range; the result there, e^-80, is
 * within 2e-35 of the true value. NaN in gives NaN out. */
static RVK_UNUSED RVK_HD inline float rvk_sigmoidf(float x) {
    const float nx = -x;
    const float d = 1.0f + rvk_expf(nx > 80.0f ? 80.0f : nx);
    uint32_t bits;
    memcpy(&bits, &d, sizeof bits);
    bits = 0x7EF311C3u - bits;                      /* ~1/d to within 13 % */
    float r;
    memcpy(&r, &bits, sizeof r);
    r = r * (2.0f - d * r);
    r = r * (2.0f - d * r);
    r = r * (2.0f - d * r);
    r = r + r * (1.0f - d * r);   /* residual form (fused): rounds right, 1 stays exactly 1 */
    return r;
}

/* GELU, x Phi(x) = max(x, 0) - |x|/2 erfc(|x|/sqrt2), erfc by Abramowitz-Stegun 7.1.26 (the
 * same formula as the RVV form, codegen/kernels/math/vgelu.py): erf to within 1.5e-7 absolute, so
 * GELU to within 1e-7 |x| plus a few ulp; libm's erff is a call per element. */
static RVK_UNUSED RVK_HD inline float rvk_geluf(float x) {
    const float ax = x < 0.0f ? -x : x;
    const float a = ax > 10.0f ? 10.0f : ax;   /* erfc(10/sqrt2) < 1e-22: keeps inf * 0 out */
    const float z = a * 0.70710678f;
    const float t = 1.0f / (1.0f + 0.3275911f * z);
    float p = 1.061405429f;
    p = p * t - 1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t - 0.284496736f;
    p = p * t + 0.254829592f;
    const float q = p * t * rvk_expf(-z * z);
    return (x > 0.0f ? x : 0.0f) - 0.5f * a * q;
}
"""

# What kernels rely on: headers, element types, status macros and the call-free math helpers.
# Tests that compile kernels outside a whole plan (tests/kernel_harness.py) take it from here.
KERNEL_PRELUDE = """\
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L  /* pthreads, posix_memalign, clock_gettime */
#endif
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef uint8_t rvk_bool;   /* ONNX bool tensors: one byte, 0 or 1 */
typedef uint16_t rvk_half;  /* ONNX float16 tensors: IEEE binary16 bits, converted by Cast */
/* Kernels that check run-time data (indices) return a status through these; helpers marked
 * RVK_HD are shared with the CUDA unit (where it means __host__ __device__). */
#define RVK_DATA_ERROR return 1
#define RVK_DATA_OK return 0
#define RVK_HD

""" + POOL + """
#if defined(__GNUC__)
#define RVK_UNUSED __attribute__((unused))   /* a model without sigmoid/tanh leaves them */
#else
#define RVK_UNUSED
#endif
""" + MATH

PRELUDE = """\
/* Generated by rvvkit {version} from model "{model}". Rebuild rather than edit.
 * Entry points: rvvkit_run (whole plan), rvvkit_run_timed (per-step seconds),
 * rvvkit_step (one step), and one exported function per distinct kernel. */
""" + KERNEL_PRELUDE.replace("{", "{{").replace("}", "}}") + """
#if defined(__GNUC__)
#define RVK_VISIBLE __attribute__((visibility("default")))
#else
#define RVK_VISIBLE
#endif
#ifdef __cplusplus
#define RVK_API extern "C" RVK_VISIBLE
#else
#define RVK_API RVK_VISIBLE
#endif
"""

# The ABI header goes into the source, not an #include: an artifact's source is compiled on
# boards from the artifact alone. Doubled braces: the templates are str.format()ed.
ABI_DECLARATIONS = ("/* runtime_c/rvvkit_abi.h, embedded */\n" +
                    abi.header_text().replace("{", "{{").replace("}", "}}"))

# Entry points every dialect shares (declared by the ABI header above them): the artifact's
# facts, then (PLAN_ENTRY) each plan's facts and per-step dispatch, its names marked by {p}:
# "" for the plan every artifact has, "_prefill" for a decoder's prompt-chunk plan.
ENTRY = ABI_DECLARATIONS + """
RVK_API int rvvkit_abi_version(void) {{ return RVVKIT_ABI_VERSION; }}
RVK_API long rvvkit_arena_floats(void) {{ return {arena}L; }}
RVK_API long rvvkit_weights_floats(void) {{ return {nweights}L; }}
RVK_API int rvvkit_prefill_tokens(void) {{ return {prefill_tokens}; }}
"""

PLAN_ENTRY = """
/* The {what} */
RVK_API int rvvkit{p}_num_steps(void) {{ return {nsteps}; }}
RVK_API int rvvkit{p}_num_inputs(void) {{ return {ninputs}; }}
RVK_API int rvvkit{p}_num_outputs(void) {{ return {noutputs}; }}
/* Element counts and ONNX dtype codes of input/output i (-1 when out of range): lets a runner
 * size and check its files. */
{io_tables}
/* Runs step `i` of the plan; returns 0, 1 when its kernel found run-time data out of range
 * (an index), or -1 when i is out of range. */
RVK_API int rvvkit{p}_step(int i, const float *__restrict w, float *__restrict a,
                        const void *const *in, void *const *out) {{
    (void)w; (void)a; (void)in; (void)out;
    switch (i) {{
{cases}
    default: return -1;
    }}
    return 0;
}}
"""

# How the C dialect runs the plan: synchronously, timed with the monotonic clock.
RUN_SHARED = """\
static double rvk_now(void) {{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}}

RVK_API int rvvkit_set_num_threads(int n) {{ return rvk_pool_set_threads(n); }}
"""

RUN = """
/* Runs the whole plan; when `seconds` is not NULL, adds each step's wall time to seconds[i].
 * Returns 0, or 1 + the index of the step whose kernel found its data out of range (the
 * steps after it do not run). */
RVK_API int rvvkit{p}_run_timed(const float *__restrict w, float *__restrict a,
                             const void *const *in, void *const *out, double *seconds) {{
{run_steps}
    return 0;
}}

RVK_API int rvvkit{p}_run(const float *__restrict w, float *__restrict a,
                       const void *const *in, void *const *out) {{
    return rvvkit{p}_run_timed(w, a, in, out, NULL);
}}
"""


def step_loops(nsteps: int, p: str = "") -> Dict[str, str]:
    """The C run entry's loop over the steps ({run_steps} of RUN) of the plan named by `p`: a
    plain block for a one-step plan (loops.loop writes no single-trip loop)."""
    if not nsteps:
        return {"run_steps": "    (void)w; (void)a; (void)in; (void)out; (void)seconds;"}
    body = """const double t0 = seconds ? rvk_now() : 0.0;
const int rc = rvvkit""" + p + """_step(i, w, a, in, out);
if (seconds) seconds[i] += rvk_now() - t0;
if (rc != 0) return i + 1;"""
    return {"run_steps": indent(loop("i", 0, nsteps, body, flat=True))}


@dataclass(frozen=True)
class Dialect:
    """What differs between the translation units rendered from one plan: the prelude, how a
    kernel's body and support code are obtained, and how the whole plan runs and is timed
    (templates formatted with the plan facts of `render`, and the loops over the steps that
    `loops` writes for the plan's step count)."""
    prelude: str
    kernel: Callable[[Kernel], Tuple[Dict[str, str], str]]   # -> (support, body)
    run_shared: str          # once per unit
    run: str                 # once per plan ({p} marks its names)
    loops: Callable[[int, str], Dict[str, str]]   # (step count, p) -> the loops `run` places
    extra: str = ""
    threads: bool = True     # split kernels (Kernel.split) run on the C thread pool
    prologue: bool = True    # a kernel's prologue (Kernel.prologue) opens its host function


C = Dialect(PRELUDE, lambda k: (k.support, k.body), RUN_SHARED, RUN, step_loops)


def render(plan: Plan, dialect: Dialect = C, prefill: Optional[Plan] = None) -> str:
    """The whole translation unit for `plan` in `dialect`; with `prefill` (a second plan built
    on `plan`, codegen/plan.py), its kernels and rvvkit_prefill_* entry points too."""
    plans = [plan] + ([prefill] if prefill else [])
    parts: List[str] = [dialect.prelude.format(version=__version__, model=_safe(plan.name))]
    support: Dict[str, str] = {}
    defs: Dict[str, str] = {}
    for name, k in (item for p in plans for item in p.kernels):
        if name in defs:
            continue   # a kernel both plans run
        sup, body = dialect.kernel(k)
        for key, text in sup.items():
            support.setdefault(key, text)
        extra = f" /* {k.macs} MACs */" if k.macs else ""
        defs[name] = definition(name, k, body, extra, dialect.threads, dialect.prologue)
    parts.extend(text.rstrip() + "\n" for text in support.values())
    parts.extend(defs.values())
    parts.append(_weight_table(plans))
    last = plans[-1]   # its blob holds every plan's weights
    shared = dict(arena=max(p.arena_floats for p in plans), nweights=last.weights.size,
                  prefill_tokens=prefill.chunk if prefill else 0)
    parts.append(ENTRY.format(**shared))
    parts.append(dialect.run_shared.format(**shared))
    for p, role in zip(plans, _ROLES):
        facts = _plan_facts(p, dialect, role)
        parts.append(PLAN_ENTRY.format(**facts))
        parts.append(dialect.run.format(**facts))
    if dialect.extra:
        parts.append(dialect.extra.format(**shared))
    return "\n".join(parts)


# ({p}, what the comment above its entry points says) of the first and the second plan
_ROLES = (("", "plan: every step, in order."),
          ("_prefill", "prefill plan: a decoder's prompt chunk of rvvkit_prefill_tokens() "
                       "tokens, which writes the session's key/value caches and makes no "
                       "logits."))


def _io_table(p: str, kind: str, items) -> str:
    """rvvkit{p}_{kind}_elems and _dtype with their tables; a plan without such tensors (the
    prefill plan's outputs) has no tables, whose index check would compare i < 0."""
    if not items:
        return (f"RVK_API long rvvkit{p}_{kind}_elems(int i) {{ (void)i; return -1L; }}\n"
                f"RVK_API int rvvkit{p}_{kind}_dtype(int i) {{ (void)i; return -1; }}")
    n = len(items)
    sizes = ", ".join(f"{math.prod(shape)}L" for _, shape, _ in items)
    codes = ", ".join(str(dtypes.TABLE[dt].onnx) for _, _, dt in items)
    return (f"static const long rvk{p}_{kind}_elems[] = {{ {sizes} }};\n"
            f"static const int rvk{p}_{kind}_dtypes[] = {{ {codes} }};\n"
            f"RVK_API long rvvkit{p}_{kind}_elems(int i) {{ return i >= 0 && i < {n} ? "
            f"rvk{p}_{kind}_elems[i] : -1L; }}\n"
            f"RVK_API int rvvkit{p}_{kind}_dtype(int i) {{ return i >= 0 && i < {n} ? "
            f"rvk{p}_{kind}_dtypes[i] : -1; }}")


def _plan_facts(plan: Plan, dialect: Dialect, role: Tuple[str, str]) -> Dict:
    p, what = role
    cases = []
    for i, s in enumerate(plan.steps):
        args = [a.c() for a in s.args] + ([s.workspace.c()] if s.workspace else [])
        call = f"{s.kernel}({', '.join(args)})"
        if s.status:
            call = f"if ({call} != 0) return 1"
        cases.append(f"    /* {_safe(s.describe())} */\n    case {i}: {call}; break;")
    tables = "\n".join(_io_table(p, kind, items) for kind, items in
                       (("input", plan.inputs), ("output", plan.outputs)))
    return dict(p=p, what=what, nsteps=len(plan.steps), ninputs=len(plan.inputs),
                noutputs=len(plan.outputs), cases="\n".join(cases), io_tables=tables,
                checks=", ".join([str(int(s.status)) for s in plan.steps] + ["0"]),
                **dialect.loops(len(plan.steps), p))


def _weight_table(plans: List[Plan]) -> str:
    """Named offsets into the weights blob `w`, one per entry the steps use, so that a step
    reads `w + W_conv1_weight` rather than a bare number."""
    used = {a.weight: a.symbol for plan in plans for s in plan.steps for a in s.args
            if a.kind == "weights"}
    index = plans[-1].weight_index
    rows = ["/* Offsets in 4-byte words of the weights in `w`, named after their initializers"
            " (packed: stored in the layout its kernel reads). */"]
    for key in sorted(used, key=lambda k: index[k][0]):
        off, size = index[key]
        name, _, node = key.partition("@")
        what = f"{size} words" + (f", packed for {node}" if node else "")
        rows.append(f"static const size_t {used[key]} = {off};  /* {_safe(name)}: {_safe(what)} */")
    return "\n".join(rows) + "\n" if used else ""


def _safe(text: str) -> str:
    """Node and model names go into C comments: keep them from closing the comment."""
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in text).replace("*/", "*_/")
