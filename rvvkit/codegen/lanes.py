"""Row reductions in portable C that compilers vectorise: LANES running partials combined in a
fixed order at the end.

A single running float sum is a chain of dependent adds (about 4 cycles each on x86), and
without -ffast-math no compiler may reorder it, so a softmax or LayerNorm row ran at ~1.7 ns
per element. Written as LANES independent partials the loop vectorises (one AVX-512 register,
two AVX2 ones), and the result is still the same on every machine and compiler: the order is
in the source. The RVV forms keep their own register-wide partials (vreduce.py, normalize.py).
"""
from __future__ import annotations

from .cfmt import indent
from .loops import loop

LANES = 16


def _step(term: str, step: str, stmt: str, k: str, acc: str) -> str:
    """C: element k's term into `acc`. The term is bound to v only for stmt: gcc 12 leaves a
    max step over a bound v scalar (3x slower), while it vectorises the same step over the
    expression."""
    if not stmt:
        return step.format(acc=acc, v=term.format(k=k))
    return (f"const float v = {term.format(k=k)};\n{stmt.format(k=k)}\n"
            f"{step.format(acc=acc, v='v')}")


def lane_reduce(out: str, n, term: str, *, init: str = "0.0f",
                step: str = "{acc} += {v};", stmt: str = "") -> str:
    """Statements declaring float `out` = the reduction over k in [0, n) of `term` (a C
    expression of the element index "{k}"), combined by `step` ("{acc}" and "{v}" in it);
    `stmt` (also of "{k}", and of `v`, the term's value) runs before the step, e.g. to store
    v. Lane j takes every element k with k % LANES == j below the last full run of LANES; the
    lanes then fold into `out` in order, then the tail. `n`: an int, or a C expression of a
    length known at run time."""
    lane = _step(term, step, stmt, "k + j", "p[j]")
    lanes = f"for (int j = 0; j < {LANES}; ++j) {{\n{indent(lane)}\n}}" if stmt \
        else f"for (int j = 0; j < {LANES}; ++j) {lane}"
    fold = f"for (int j = 0; j < {LANES}; ++j) {step.format(acc=out, v='p[j]')}"
    tail = _step(term, step, stmt, "k", out)
    if not isinstance(n, int):
        return f"""float {out} = {init};
{{
    float p[{LANES}];
    const long full = ({n}) - ({n}) % {LANES};
    for (int j = 0; j < {LANES}; ++j) p[j] = {init};
    for (long k = 0; k < full; k += {LANES}) {{
{indent(lanes, 2)}
    }}
    {fold}
    for (long k = full; k < {n}; ++k) {{
{indent(tail, 2)}
    }}
}}"""
    full = n - n % LANES
    text = f"float {out} = {init};\n"
    if full:
        text += f"""{{
    float p[{LANES}];
    for (int j = 0; j < {LANES}; ++j) p[j] = {init};
{indent(loop("k", 0, full, lanes, "long", step=LANES))}
    {fold}
}}
"""
    if full < n:
        text += loop("k", full, n, tail, "long") + "\n"
    return text.rstrip("\n")
