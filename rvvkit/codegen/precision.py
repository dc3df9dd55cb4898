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
