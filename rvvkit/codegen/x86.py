"""x86 intrinsic forms: the guard and header that the kernels with an AVX2 branch share.

The host JIT compiles with -march=native (toolchain/targets/x86_64-linux-gnu.toml) on the very
machine that runs the code, so the compiler's own feature macros are the run-time dispatch:
a CPU with AVX2, FMA and F16C compiles the AVX2 branch, any other (or another architecture)
the portable C. The CUDA unit and the CUDA emulator always take the portable branch: they
must compile the same statements everywhere.

Order inside a kernel: `#if RVV ... #elif AVX2 ... #else portable #endif` (rvv.guarded around
x86.guarded), so a riscv64 compile never sees an intrinsic of the other ISA."""
from __future__ import annotations

GUARD = ("#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && "
         "!defined(__CUDACC__) && !defined(RVK_CUDA_EMU)")

# vpdpbusd (u8 x s8, four products into each int32 lane, no saturation) where the CPU has
# it: AVX512-VNNI with VL (its 256-bit form), or the VEX-encoded AVX-VNNI
VNNI_GUARD = "#if defined(RVK_DPBUSD)"

HEADER_KEY = "0_rvk_x86_header"
HEADER = f"""{GUARD}
#include <immintrin.h>
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define RVK_DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#elif defined(__AVXVNNI__)
#define RVK_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#endif
#endif
"""


def header() -> dict:
    """A support dict holding the x86 header (an #include under the guard)."""
    return {HEADER_KEY: HEADER}


def guarded(avx2: str, portable: str) -> str:
    """`avx2` under the AVX2 guard, `portable` otherwise: statement blocks, the directives on
    their own lines."""
    return f"{GUARD}\n{avx2.rstrip()}\n#else\n{portable.rstrip()}\n#endif\n"
