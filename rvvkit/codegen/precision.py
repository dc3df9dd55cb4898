"""The arithmetic precision a build asks for (`rvvkit build --precision`), read by the
lowerings that have a float16 form while a plan is built.

  fp32  float32 everywhere (the default).
  fp16  the float16 forms, and nothing else: the C source refuses to compile (#error) for a
        target without Zvfh, so a run never silently computes something else.
  auto  the float16 forms where the compiler targets Zvfh (a K1 profile), float32 elsewhere:
        one artifact for both, as ncnn picks float16 on a core that has it. Such a kernel
        carries both forms and both layouts of its weights; the compiler's target keeps one.

A float16 form rounds its inputs and weights to float16 and accumulates in float32
(`vfwmacc`), so only the rounding of the operands differs from float32; what that costs in
accuracy is stated in docs/guide/precision.md."""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional, Tuple

from .rvv import FP16_GUARD

PRECISIONS: Tuple[str, ...] = ("fp32", "fp16", "auto")

_PRECISION: contextvars.ContextVar = contextvars.ContextVar("rvvkit_precision", default="fp32")


@contextlib.contextmanager
def fixed_precision(precision: Optional[str]) -> Iterator[None]:
    """Within the block, lowerings emit the forms `precision` asks for (None: fp32)."""
    precision = precision or "fp32"
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    token = _PRECISION.set(precision)
    try:
        yield
    finally:
        _PRECISION.reset(token)


def precision() -> str:
    """The precision of the plan being built."""
    return _PRECISION.get()


def wants_half() -> bool:
    """Whether lowerings should emit their float16 forms."""
    return precision() != "fp32"


# The C of the two forms, for every kernel that has a float16 one: `fp16` compiles only where
# Zvfh is; `auto` keeps both branches compiled everywhere (a constant picks one, so neither's
# helpers go unused), the float16 one's intrinsics under the guard.
NO_FP16 = ('#error "this artifact was built with --precision fp16: compile it for a core with '
           'Zvfh (e.g. rvvkit run --on qemu --isa k1), or rebuild with --precision auto"')


def fp16_only(half: str) -> str:
    """C statements: `half` where the code is compiled for Zvfh, else a compile error."""
    return f"{FP16_GUARD}\n{half.rstrip()}\n#else\n{NO_FP16}\n#endif\n"


def fp16_or(half: str, other: str) -> str:
    """C statements: `half` where the code is compiled for Zvfh, `other` elsewhere."""
    return (f"{FP16_GUARD}\nconst int half = 1;\n#else\nconst int half = 0;\n#endif\n"
            f"if (half) {{\n{FP16_GUARD}\n{half.rstrip()}\n#endif\n}} else {{\n"
            f"{other.rstrip()}\n}}\n")
