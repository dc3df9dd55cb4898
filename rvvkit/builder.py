"""`rvvkit build`: ONNX model → optimised graph → kernel plan → C source → artifact."""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, Dict, List, Optional, Sequence

from .version import __version__
from .artifact.container import FORMAT_VERSION, TOKENIZER, Artifact
from .errors import ModelError, RvvkitError
from .codegen.c import ABI_VERSION, render
from .codegen.lower.core import unlowerable
from .codegen.cuda.render import render_cuda
from .codegen.plan import Plan, build_plan
from .llm.prefill import prefill_plan
from .frontend.decoder_dims import (Patterns, check_cache_outputs, decoder_shapes,
                                    named_caches, unbounded_caches)
from .frontend.onnx import from_onnx, load_model
from .ops import REGISTRY
from .passes import optimize
from .passes.kv_cache import caches_to_state
from .llm.decoder import PREFILL_TOKENS, decoder_meta
from .llm.model_config import bound_from_folder, eos_from_folder, head_size_from_folder
from .llm import gguf

_LOG = logging.getLogger("rvvkit")


def _need_onnx() -> None:
    """onnx is the `build` extra (the runtime installs without it): say how to get it."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise RvvkitError("building a model needs the onnx package: "
                          "pip install 'rvvkit[build]'") from None


def build_model(model, *, input_shapes: Optional[Dict[str, Sequence[int]]] = None,
                opt_level: int = 2, name: Optional[str] = None, cuda: bool = True,
                vlen: Optional[int] = None, max_seq: Optional[int] = None,
                prefill: int = PREFILL_TOKENS, precision: str = "fp32",
                cache_inputs: Patterns = None, cache_outputs: Patterns = None,
                progress: Optional[Callable[[str], None]] = None) -> Artifact:
    """ONNX model (path, bytes or ModelProto) -> artifact with the C source, the CUDA source of
    the same plan (unless `cuda` is False) and the weights. With `vlen`, the RVV micro-kernels
    are emitted for that VLEN only (smaller source; still correct, only slower, at another
    VLEN); by default the source runs well at every VLEN. `max_seq` bounds a decoder's
    key/value caches (frontend/decoder_dims.py; without it, genai_config.json's search.
    max_length beside the model, where there is one); `input_shapes` still wins per input. A
    decoder so built also gets a prefill plan taking `prefill` prompt tokens per call (0 or 1:
    none; prompts then run a token at a time). `precision` fp16/auto adds the float16 forms
    of the kernels that have one (codegen/precision.py). `cache_inputs`/`cache_outputs`
    (names or shell patterns, a list or comma-separated) say which inputs are the key/value
    caches and which outputs their presents, where the names and the graph's use of them do
    not (frontend/decoder_dims.py)."""
    # from Python without `progress`, the same lines go to the "rvvkit" logger (INFO), so a
    # long build is not silent where logging is on
    say = progress or _LOG.info
    _need_onnx()
    t0 = time.perf_counter()
    path = model if isinstance(model, (str, os.PathLike)) else None
    from_gguf = gguf.load(path, max_seq) if gguf.is_gguf(path) else None
    if from_gguf:
        say(from_gguf.summary)
    model = from_gguf.model if from_gguf else load_model(model)
    caches = named_caches(model, cache_inputs)
    if max_seq is None and path is not None and not from_gguf and \
            unbounded_caches(model, input_shapes, caches):
        max_seq = bound_from_folder(path)
        if max_seq:
            say(f"cache bound {max_seq} positions from genai_config.json (search.max_length; "
                "--max-seq N sets another)")
    if max_seq is not None:
        head = head_size_from_folder(path) if path is not None and not from_gguf else None
        input_shapes = {**decoder_shapes(model, max_seq, given=input_shapes, head_size=head,
                                         names=caches),
                        **dict(input_shapes or {})}
    else:
        _refuse_unbounded(model, input_shapes, caches)
    g = from_onnx(model, input_shapes=input_shapes, name=name, unsupported=unlowerable)
    say(f"parsed {len(g.nodes)} nodes ({time.perf_counter() - t0:.1f}s)")
    before = g.summary()
    optimize(g, opt_level)
    say(f"optimised to {len(g.nodes)} nodes")
    cached = caches_to_state(g, bounded=max_seq is not None)
    check_cache_outputs(model, cache_outputs, [present for _, present in cached])
    if cached:
        say(f"{len(cached)} key/value caches kept in the session (updated in place)")
    plan = build_plan(g, vlen=vlen, precision=precision)
    say(f"planned {len(plan.steps)} steps, {len(plan.kernels)} distinct kernels")
    dec = decoder_meta(plan)
    second = None
    if dec and max_seq is not None:   # a decoder: its caches became state
        second = prefill_plan(model, plan, dec, prefill, input_shapes,
                              opt_level=opt_level, name=name, vlen=vlen, say=say,
                              precision=precision, caches=caches)
    source = render(plan, prefill=second)
    meta = plan_meta(plan, source_ops=before, opt_level=opt_level, vlen=vlen, prefill=second,
                     precision=precision)
    extra = {}
    if from_gguf and meta.get("decoder"):
        extra = _gguf_extras(meta["decoder"], from_gguf, say)
    elif meta.get("decoder") and path is not None:
        _read_eos(meta["decoder"], path, say)
    say(f"generated {len(source.splitlines())} lines of C ({time.perf_counter() - t0:.1f}s)")
    cu_source = _cuda_source(plan, second, meta, say) if cuda else None
    return Artifact(meta, source, (second or plan).weights, cu_source=cu_source, extra=extra)


def _refuse_unbounded(model, input_shapes, names) -> None:
    """A decoder built without a cache bound: one line naming what to do, not a warning and a
    problem per cache input."""
    caches = unbounded_caches(model, input_shapes, names)
    if caches:
        raise ModelError(f"this is a decoder with {len(caches)} key/value cache inputs "
                         f"({caches[0]}, ...) of symbolic length: build it with --max-seq N "
                         "(the positions its caches hold: prompt and reply together), or give "
                         "every cache's shape with --input-shape")


def _read_eos(dec: Dict, path, say: Callable[[str], None]) -> None:
    """The model's own end-of-reply ids, from a config file beside it (llm/model_config.py)."""
    found = eos_from_folder(path)
    if found:
        dec["eos"], dec["eos_from"] = found
        say(f"end-of-text token ids {found[0]} (from {found[1]})")


def _gguf_extras(dec: Dict, g: "gguf.Gguf", say: Callable[[str], None]) -> Dict[str, bytes]:
    """What the GGUF file says about generation: its eos ids and chat template (in the
    decoder's meta) and its tokenizer (a section of its own: a large vocabulary's JSON is
    megabytes, which every reader of the meta would otherwise parse)."""
    if g.eos:
        dec["eos"], dec["eos_from"] = g.eos, "GGUF metadata"
        say(f"end-of-text token ids {g.eos} (from the GGUF metadata)")
    if g.chat_template:
        dec["chat_template"], dec["chat_specials"] = g.chat_template, g.specials
    if not g.tokenizer:
        return {}
    say("tokenizer from the GGUF metadata stored in the artifact")
    return {TOKENIZER: g.tokenizer.encode("utf-8")}


def _cuda_source(plan: Plan, prefill: Optional[Plan], meta: Dict,
                 say: Callable[[str], None]) -> Optional[str]:
    """The CUDA translation unit; a kernel without a CUDA form leaves the artifact without one
    (the CPU targets do not depend on it) and the reason in meta["cuda"]."""
    try:
        text = render_cuda(plan, prefill)
    except ModelError as exc:
        meta["cuda"] = {"available": False, "reason": str(exc)}
        say(f"no CUDA source: {exc}")
        return None
    meta["cuda"] = {"available": True}
    say(f"generated {len(text.splitlines())} lines of CUDA")
    return text


def _io(items):
    return [{"name": n, "shape": list(s), "dtype": dt} for n, s, dt in items]


def _data_error(step) -> Dict:
    """{"data_error": what the step's run-time check guards} for ops that say, else {}."""
    op = REGISTRY.get(step.op)
    return {"data_error": op.data_error} if step.status and op and op.data_error else {}


def _steps(plan: Plan) -> List[Dict]:
    return [{"kernel": s.kernel, "node": s.node, "op": s.op, "macs": s.macs,
             "fused": [{"op": op, "name": nm} for op, nm in s.fused],
             **_data_error(s),
             "args": [a.to_json() for a in s.args],
             "workspace": s.workspace.to_json() if s.workspace else None}
            for s in plan.steps]


def _kernels(plans) -> List[Dict]:
    seen: Dict[str, Dict] = {}
    for name, k in (item for p in plans for item in p.kernels):
        seen.setdefault(name, {
            "name": name, "hint": k.hint,
            "params": [p.name for p in k.params] + (["ws"] if k.workspace else []),
            "workspace_floats": k.workspace, "macs": k.macs})
    return list(seen.values())


def plan_meta(plan: Plan, *, source_ops: Dict[str, int], opt_level: int,
              vlen: Optional[int] = None, prefill: Optional[Plan] = None,
              precision: str = "fp32") -> Dict:
    plans = [plan] + ([prefill] if prefill else [])
    arena = max(p.arena_floats for p in plans)
    return {
        "format": "rvvkit",
        "format_version": FORMAT_VERSION,
        "abi_version": ABI_VERSION,
        "producer": f"rvvkit {__version__}",
        "model": plan.name,
        "opt_level": opt_level,
        "target_vlen": vlen,     # None: RVV code for any VLEN
        "precision": precision,  # fp32 | fp16 | auto (codegen/precision.py)
        "inputs": _io(plan.inputs),
        "outputs": _io(plan.outputs),
        "source_ops": source_ops,
        "kernels": _kernels(plans),
        "plan": _steps(plan),
        "memory": {"arena_floats": arena, "arena_bytes": 4 * arena,
                   "lower_bound_bytes": 4 * plan.lower_bound_floats,
                   "weights_bytes": 4 * int(plans[-1].weights.size)},
        "macs": plan.macs,
        "state": [{"name": n, "present": p, "offset": off, "shape": list(shape), "dtype": dt}
                  for n, p, off, shape, dt in plan.state],
        "decoder": decoder_meta(plan),
        "entry": {"run": "rvvkit_run", "run_timed": "rvvkit_run_timed", "step": "rvvkit_step"},
        "prefill": prefill_meta(prefill) if prefill else None,
    }


def prefill_meta(prefill: Plan) -> Dict:
    """meta["prefill"]: the second plan, for the readers that run it (its inputs are the
    plan's, sized for `tokens` tokens; it has no outputs)."""
    return {"tokens": prefill.chunk, "inputs": _io(prefill.inputs), "plan": _steps(prefill),
            "arena_floats": prefill.arena_floats, "macs": prefill.macs}
