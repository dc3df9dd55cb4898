"""Kernels whose work splits into independent parts (rows, channels, blocks, heads) run them
on the thread pool of the generated C (runtime_c/rvk_pool.h).

A lowering opts in with `Kernel.split = Split(units, work)` and writes its body over the parts
rvk_lo <= u < rvk_hi. The emitter then defines three functions: `<name>_rows` (the body, on a
range of parts), `<name>_task` (one task's range of a region) and `<name>` itself, which hands
its arguments to the pool. A task calls `<name>_rows` once per part: were it called on a
task's whole range, a compiler vectorising across parts (gcc does, over short rows) would
compute a part one way or another depending on where the range starts and ends. Part bounds
are the lowering's own, so each output is computed alike for every thread count: outputs are
bit-identical.
Workspace is per thread (the caller's region of the arena, a worker's own scratch), so a
split kernel may use it only within one part."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .cfmt import indent
from .loops import loop


@dataclass(frozen=True)
class Split:
    """`units` independent parts; `work`: operations in all, so the pool leaves small kernels
    on one thread (a task below its grain costs more to hand over than it saves)."""
    units: int
    work: int


def define(name: str, kernel, body: str) -> str:
    """The C definitions of a split kernel called `name`, with `body` over [rvk_lo, rvk_hi)."""
    split, params = kernel.split, kernel.params
    decls = [p.decl() for p in params] + (["float *__restrict ws"] if kernel.workspace else [])
    casts = [f"({'const ' if p.const else ''}{p.ctype} *)p[{i}]" for i, p in enumerate(params)]
    casts += ["ws"] if kernel.workspace else []
    names = ", ".join(p.name for p in params)
    scratch = ("ws", kernel.workspace) if kernel.workspace else ("(float *)0", 0)
    unused = "" if kernel.workspace else "\n    (void)ws;"
    prologue = ""
    if kernel.prologue:   # by the parameters' names, as where the kernel runs whole
        named = "".join(f"\n        {p.decl()} = {c};\n        (void){p.name};"
                        for p, c in zip(params, casts))
        prologue = f"\n    {{{named}\n{indent(kernel.prologue.strip(), 2, directives=True)}\n    }}"
    return f"""static void {name}_rows({', '.join(decls + ['int rvk_lo', 'int rvk_hi'])}) {{
{body.rstrip()}
}}

static void {name}_task(void *ctx, int task, int ntasks, float *ws) {{
    const void *const *p = (const void *const *)ctx;
    int lo, hi;{unused}
    rvk_split({split.units}, task, ntasks, &lo, &hi);{prologue}
    for (int u = lo; u < hi; ++u)   /* a call per part: its code never depends on the range */
        {name}_rows({', '.join(casts + ['u', 'u + 1'])});
}}

{kernel.signature(name)} {{
    const void *p[] = {{{names}}};
    rvk_parallel({split.units}, {split.work}L, {scratch[1]}L, {scratch[0]}, {name}_task,
                 (void *)p);
}}
"""


def plain(name: str, kernel, body: str, extra: str = "", prologue: bool = True) -> str:
    """The definition of a kernel that runs on its caller's thread alone (its prologue unless
    `prologue` is False, then `body`)."""
    pro = indent(kernel.prologue.strip(), directives=True) + "\n" \
        if kernel.prologue and prologue else ""
    return f"{kernel.signature(name)} {{{extra}\n{pro}{body.rstrip()}\n}}\n"


def definition(name: str, kernel, body: str, extra: str = "", threads: bool = True,
               prologue: bool = True) -> str:
    """`kernel` defined as `name`: split across the pool when it says so and the dialect runs
    C threads, else plain (with its prologue unless `prologue` is False)."""
    if threads and kernel.split is not None and kernel.split.units > 1 and not kernel.status:
        return define(name, kernel, body)
    return plain(name, kernel, body, extra, prologue)


def split_of(count: int, work: int) -> Optional[Split]:
    """The Split of `count` parts doing `work` in all; None (one thread) for a single part."""
    return Split(count, work) if count > 1 else None


def parts_loop(var: str, count: int, body: str, ty: str = "long", flat: bool = False):
    """(loop over `var` in [0, count) as a split kernel's parts, its Split factory): the loop
    runs rvk_lo..rvk_hi when there is more than one part, else `body` once, as loops.loop."""
    if count <= 1:
        return loop(var, 0, count, body, ty, flat), lambda work: None
    return loop(var, "rvk_lo", "rvk_hi", body, ty, flat), lambda work: split_of(count, work)
