"""The artifact meta's schema, checked before anything uses it, and the check of a compiled
kernel library against it.

The section hashes only prove that the meta is what its writer wrote; an edited meta with
recomputed hashes (or a buggy writer) must still never reach an executor that sizes buffers from
it. So every field an executor, `inspect` or `compare` reads is checked here for type, range
and consistency (counts, element totals, offsets inside their buffers), and every violation is
one ArtifactError naming the field. Optional fields of older artifacts may be absent.

`check_library` then compares the meta with what the compiled object itself declares (ABI
version, step/input/output counts, element counts and types, arena and weights sizes): the
buffers are allocated from the meta but written by the object, so the two must agree exactly."""
from __future__ import annotations

import math
from typing import Any, Dict, Mapping

from ..dtypes import TABLE as BY_NAME
from ..errors import ArtifactError

META = ".rvvkit.meta"
MAX_IO = 256           # what the C runner accepts (runtime_c/runner.c MAX_IO)
MAX_RANK = 64
MAX_ELEMS = 2 ** 31 - 1  # the frontend's limit: kernels index with 32-bit loops in places
MAX_FLOATS = 2 ** 40     # an arena of 4 TiB is no real model: a corrupt count
ARG_KINDS = ("input", "output", "arena", "weights")


def _fail(where: str, why: str) -> ArtifactError:
    return ArtifactError(f"section {META} is invalid: {where} {why}", META)


def _int(obj: Any, where: str, lo: int = 0, hi: int = MAX_FLOATS) -> int:
    if isinstance(obj, bool) or not isinstance(obj, int):
        raise _fail(where, f"is {type(obj).__name__} {_short(obj)}, not an integer")
    if not lo <= obj <= hi:
        raise _fail(where, f"is {obj}, outside [{lo}, {hi}]")
    return obj


def _str(obj: Any, where: str) -> str:
    if not isinstance(obj, str):
        raise _fail(where, f"is {type(obj).__name__} {_short(obj)}, not a string")
    return obj


def _list(obj: Any, where: str, most: int = 1 << 24) -> list:
    if not isinstance(obj, list):
        raise _fail(where, f"is {type(obj).__name__}, not a list")
    if len(obj) > most:
        raise _fail(where, f"has {len(obj)} entries, more than {most}")
    return obj


def _dict(obj: Any, where: str) -> dict:
    if not isinstance(obj, dict):
        raise _fail(where, f"is {type(obj).__name__}, not an object")
    return obj


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 40 else text[:37] + "..."


def _tensor(t: Any, where: str) -> int:
    """Checks one graph input/output entry; returns its element count."""
    t = _dict(t, where)
    _str(t.get("name"), f"{where}.name")
    dtype = t.get("dtype", "float32")  # artifacts before typed I/O were float32 throughout
    if not isinstance(dtype, str) or dtype not in BY_NAME:
        raise _fail(f"{where}.dtype", f"is {_short(dtype)}, not one of {', '.join(BY_NAME)}")
    shape = _list(t.get("shape"), f"{where}.shape", MAX_RANK)
    dims = [_int(d, f"{where}.shape[{i}]", 0, MAX_ELEMS) for i, d in enumerate(shape)]
    n = math.prod(dims)
    if n > MAX_ELEMS:
        raise _fail(f"{where}.shape", f"{dims} has {n} elements, more than {MAX_ELEMS}")
    return n


def _io(meta: dict, key: str) -> list:
    items = _list(meta.get(key), key, MAX_IO)
    names = [(_tensor(t, f"{key}[{i}]"), t["name"]) for i, t in enumerate(items)]
    seen = set()
    for _, name in names:
        if name in seen:
            raise _fail(key, f"names {name!r} twice")
        seen.add(name)
    return items


def _arg(arg: Any, where: str, limits: Mapping[str, int], counts: Mapping[str, int]) -> None:
    arg = _dict(arg, where)
    kind = arg.get("kind")
    if kind not in ARG_KINDS:
        raise _fail(f"{where}.kind", f"is {_short(kind)}, not one of {', '.join(ARG_KINDS)}")
    if kind in ("input", "output"):
        if not counts[kind]:
            raise _fail(f"{where}.kind", f"is {kind!r}, but the plan has no {kind}s")
        _int(arg.get("index", 0), f"{where}.index", 0, max(counts[kind] - 1, 0))
    # an offset in 4-byte words from the start of its buffer: it must lie inside it
    _int(arg.get("offset", 0), f"{where}.offset", 0, max(limits.get(kind, MAX_FLOATS), 0))


def _plan(meta: dict, limits: Mapping[str, int], counts: Mapping[str, int],
          field: str = "plan", plan=None) -> None:
    plan = _list(meta.get("plan") if plan is None else plan, field)
    kernels = {k.get("name") for k in _list(meta.get("kernels", []), "kernels")
               if isinstance(k, dict) and isinstance(k.get("name"), str)}
    for i, step in enumerate(plan):
        where = f"{field}[{i}]"
        step = _dict(step, where)
        for key in ("op", "node", "kernel"):
            _str(step.get(key), f"{where}.{key}")
        if kernels and step["kernel"] not in kernels:
            raise _fail(f"{where}.kernel", f"{step['kernel']!r} is not in 'kernels'")
        _int(step.get("macs", 0), f"{where}.macs", 0, 2 ** 62)
        for j, arg in enumerate(_list(step.get("args", []), f"{where}.args", 4096)):
            _arg(arg, f"{where}.args[{j}]", limits, counts)
        if step.get("workspace") is not None:
            _arg(step["workspace"], f"{where}.workspace", limits, counts)


def _prefill(meta: dict, limits: Mapping[str, int]) -> None:
    """meta["prefill"] (rvvkit/llm/prefill.py), absent or null without one: the prompt tokens per
    call, its inputs (the plan's names, types and order; other sizes) and its steps, which have
    no outputs to write."""
    pre = meta.get("prefill")
    if pre is None:
        return
    pre = _dict(pre, "prefill")
    _int(pre.get("tokens"), "prefill.tokens", 2, MAX_ELEMS)
    _int(pre.get("arena_floats"), "prefill.arena_floats", 0, limits["arena"])
    ins = _list(pre.get("inputs"), "prefill.inputs", MAX_IO)
    for i, t in enumerate(ins):
        _tensor(t, f"prefill.inputs[{i}]")
    want = [(t["name"], t.get("dtype", "float32")) for t in meta["inputs"]]
    if [(t["name"], t.get("dtype", "float32")) for t in ins] != want:
        raise _fail("prefill.inputs", f"are not the plan's inputs {[n for n, _ in want]} "
                    "in order and type")
    _plan(meta, limits, {"input": len(ins), "output": 0}, "prefill.plan",
          _list(pre.get("plan"), "prefill.plan"))


def _codegen_keys(meta: dict) -> None:
    """The optional code-generation facts: the VLEN the RVV code was built for, and the nodes
    fused into each plan step."""
    vlen = meta.get("target_vlen")
    if vlen is not None and not (isinstance(vlen, int) and not isinstance(vlen, bool)
                                 and vlen >= 128 and not vlen & (vlen - 1)):
        raise _fail("target_vlen", f"{_short(vlen)} is not a power of two >= 128")
    for i, step in enumerate(meta["plan"]):
        fused = step.get("fused", [])
        if not (isinstance(fused, list) and all(
                isinstance(f, dict) and set(f) == {"op", "name"}
                and all(isinstance(v, str) for v in f.values()) for f in fused)):
            raise _fail(f"plan[{i}].fused", "is not a list of {op, name}")


def _precompiled(meta: dict) -> None:
    """meta["precompiled"]: {triple: {arch, compiler, flags, key, ...}}
    (rvvkit/artifact/precompiled.py); the objects themselves are sections, checksummed like every
    other."""
    entries = _dict(meta.get("precompiled", {}), "precompiled")
    for triple, entry in entries.items():
        where = f"precompiled[{_short(triple)}]"
        if not triple or not all(c.isalnum() or c in "-_." for c in triple):
            raise _fail(where, "is not a target triple")
        entry = _dict(entry, where)
        for key in ("arch", "compiler", "key"):
            _str(entry.get(key), f"{where}.{key}")
        if not all(isinstance(f, str) for f in _list(entry.get("flags"), f"{where}.flags")):
            raise _fail(f"{where}.flags", "is not a list of strings")


def validate_meta(meta: Dict[str, Any], weights_bytes: int) -> None:
    """Raises ArtifactError unless `meta` is well-formed and consistent with a weights section
    of `weights_bytes` bytes."""
    ins, outs = _io(meta, "inputs"), _io(meta, "outputs")
    if not outs:
        raise _fail("outputs", "is empty: the model would compute nothing")
    mem = _dict(meta.get("memory"), "memory")
    arena = _int(mem.get("arena_floats"), "memory.arena_floats")
    if "abi_version" in meta:
        _int(meta["abi_version"], "abi_version", 1, 1 << 20)
    for key in ("model", "producer"):
        if key in meta:
            _str(meta[key], key)
    if "macs" in meta:
        _int(meta["macs"], "macs", 0, 2 ** 62)
    for i, k in enumerate(_list(meta.get("kernels", []), "kernels")):
        k = _dict(k, f"kernels[{i}]")
        _str(k.get("name"), f"kernels[{i}].name")
        _int(k.get("workspace_floats", 0), f"kernels[{i}].workspace_floats", 0, arena)
    limits = {"arena": arena, "weights": weights_bytes // 4, "input": MAX_ELEMS,
              "output": MAX_ELEMS}
    _plan(meta, limits, {"input": len(ins), "output": len(outs)})
    _prefill(meta, limits)
    _codegen_keys(meta)
    _precompiled(meta)


def declared(lib) -> Dict[str, Any]:
    """What a loaded kernel object says of itself (cffi lib of the plan ABI)."""
    n_in, n_out = lib.rvvkit_num_inputs(), lib.rvvkit_num_outputs()
    if not (0 <= n_in <= MAX_IO and 0 <= n_out <= MAX_IO):
        raise ArtifactError(f"the compiled kernels report {n_in} inputs and {n_out} outputs")
    tokens = lib.rvvkit_prefill_tokens()
    pre_in = lib.rvvkit_prefill_num_inputs() if tokens > 0 else 0
    if not 0 <= pre_in <= MAX_IO:
        raise ArtifactError(f"the compiled kernels report {pre_in} prefill inputs")
    return {"steps": lib.rvvkit_num_steps(), "arena_floats": lib.rvvkit_arena_floats(),
            "weights_floats": lib.rvvkit_weights_floats(),
            "inputs": [(lib.rvvkit_input_elems(i), lib.rvvkit_input_dtype(i))
                       for i in range(n_in)],
            "outputs": [(lib.rvvkit_output_elems(i), lib.rvvkit_output_dtype(i))
                        for i in range(n_out)],
            "prefill_tokens": tokens,
            "prefill_steps": lib.rvvkit_prefill_num_steps() if tokens > 0 else 0,
            "prefill_inputs": [(lib.rvvkit_prefill_input_elems(i),
                                lib.rvvkit_prefill_input_dtype(i)) for i in range(pre_in)],
            "prefill_outputs": lib.rvvkit_prefill_num_outputs() if tokens > 0 else 0}


def expected(meta: Mapping[str, Any], weights_bytes: int) -> Dict[str, Any]:
    """The same facts from a validated meta."""
    def io(items):
        return [(math.prod(t["shape"]), BY_NAME[t.get("dtype", "float32")].onnx)
                for t in items]
    pre = meta.get("prefill") or {}
    return {"steps": len(meta["plan"]), "arena_floats": meta["memory"]["arena_floats"],
            "weights_floats": weights_bytes // 4, "inputs": io(meta["inputs"]),
            "outputs": io(meta["outputs"]), "prefill_tokens": pre.get("tokens", 0),
            "prefill_steps": len(pre.get("plan", [])),
            "prefill_inputs": io(pre.get("inputs", [])), "prefill_outputs": 0}


def check_library(meta: Mapping[str, Any], weights_bytes: int, lib, what: str) -> None:
    """ArtifactError naming every fact on which `lib` (described as `what`) and the meta
    disagree: the object would otherwise read or write past buffers sized from the meta."""
    want, got = expected(meta, weights_bytes), declared(lib)
    diffs = [f"{key}: meta {want[key]} vs kernels {got[key]}"
             for key in ("steps", "arena_floats", "weights_floats", "prefill_tokens",
                         "prefill_steps", "prefill_outputs")
             if want[key] != got[key]]
    for key in ("inputs", "outputs", "prefill_inputs"):
        if len(want[key]) != len(got[key]):
            diffs.append(f"{key}: meta has {len(want[key])}, kernels {len(got[key])}")
            continue
        for i, (w, g) in enumerate(zip(want[key], got[key])):
            if w != g:
                diffs.append(f"{key}[{i}] (elements, ONNX type): meta {w} vs kernels {g}")
    if diffs:
        raise ArtifactError(f"{what} disagree with the artifact's meta ("
                            + "; ".join(diffs[:6]) + (" ..." if len(diffs) > 6 else "")
                            + "): the artifact was edited or its parts come from different "
                            "builds", META)
