"""Precompiling an artifact: its C compiled, per target arch, into the kernels and the C
runner that precompiled.py reads back where there is no compiler (`rvvkit build --precompile`,
`rvvkit pack`). The build side only: executors import precompiled.py, never this module, which
needs the compiler driver and the runner's build."""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple

from .artifact.container import Artifact
from .errors import RvvkitError
from .jit import cache_key, compile_flags, compile_source, resolve_compiler
from .artifact.precompiled import KERNELS_PREFIX, RUNNER_PREFIX, arch_of
from .runtime.runner import LINK_FLAGS, RUNNER_NAME, build_runner, runner_source


def parse_targets(text: str) -> Tuple[str, ...]:
    archs = tuple(dict.fromkeys(arch_of(t) for t in text.split(",") if t.strip()))
    if not archs:
        raise RvvkitError("--precompile needs a target: riscv64, x86_64 or both, comma-separated")
    return archs


def pack(art: Artifact, archs: Sequence[str], *, compiler: Optional[str] = None,
         progress: Optional[Callable[[str], None]] = None) -> Artifact:
    """`art` with kernels and runner compiled for each arch added (replacing older ones)."""
    entries: Dict[str, dict] = dict(art.meta.get("precompiled") or {})
    extra = dict(art.extra)
    for arch in archs:
        if arch != "riscv64" and arch != arch_of("host"):
            raise RvvkitError(f"cannot precompile for {arch} here: rvvkit cross-compiles for "
                              f"riscv64 only; build on a {arch} machine")
        comp = resolve_compiler(compiler, target="rvv" if arch == "riscv64" else "host")
        # native=False: the board's CPU is unknown here, so no -march=native for x86 either
        flags = compile_flags(comp, native=False)
        so = compile_source(art.c_source, comp, flags, name="model", kind="so")
        runner = build_runner(comp)
        triple = comp.machine or f"{arch}-linux-gnu"
        for old in [t for t, e in entries.items() if e.get("arch") == arch]:
            entries.pop(old)
            extra.pop(KERNELS_PREFIX + old, None)
            extra.pop(RUNNER_PREFIX + old, None)
        extra[KERNELS_PREFIX + triple] = so.read_bytes()
        extra[RUNNER_PREFIX + triple] = runner.read_bytes()
        entries[triple] = {
            "arch": arch, "compiler": comp.identity(), "flags": flags,
            "key": cache_key(art.c_source, comp, flags, name="model", kind="so"),
            "runner_key": cache_key(runner_source(), comp, compile_flags(comp, shared=False),
                                    name=RUNNER_NAME, kind="exe", link_flags=LINK_FLAGS),
            "vlen": art.meta.get("target_vlen")}
        if progress:
            progress(f"precompiled kernels and runner for {triple} "
                     f"({comp.identity().splitlines()[1][:60]})")
    meta = dict(art.meta, precompiled=entries)
    return Artifact(meta, art.c_source, art.weights, art.cu_source, extra)
