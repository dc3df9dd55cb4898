"""rvvkit's side of the peer benchmarks: build at a requested precision (a benchmark tool).

`rvvkit build --precision fp16|fp32|auto` is being added; until every checkout has it, the peer
scripts pass the precision through only where rvvkit's builder takes it, and refuse anything
but fp32 where it does not (rather than measure fp32 under another name).
"""
from __future__ import annotations

import inspect

PRECISIONS = ("fp32", "fp16", "auto")


class PrecisionUnsupported(Exception):
    """This rvvkit cannot build at the requested precision."""


def supports_precision() -> bool:
    from rvvkit import builder
    return "precision" in inspect.signature(builder.build_model).parameters


def build_kwargs(precision: str) -> dict:
    """The keyword arguments rvvkit.build needs for `precision` ({} for fp32 on a builder
    without the option)."""
    if precision not in PRECISIONS:
        raise PrecisionUnsupported(f"precision {precision!r}: expected one of "
                                   f"{', '.join(PRECISIONS)}")
    if supports_precision():
        return {"precision": precision}
    if precision != "fp32":
        raise PrecisionUnsupported(f"this rvvkit's build has no precision option: only fp32, "
                                   f"not {precision}")
    return {}


def build(model, precision: str = "fp32", **kwargs):
    import rvvkit
    return rvvkit.build(model, **build_kwargs(precision), **kwargs)
