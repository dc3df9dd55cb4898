"""What every executor shares: input validation against the artifact's meta, the shape of
results (dicts of numpy arrays keyed by the graph's names), and the session contract:

    run(feeds)                          -> {output name: array}
    profile(feeds, repeat)              -> [{step, kernel, node, op, macs, seconds}]
    measure(feeds, repeat, warmup)      -> {latency_ms, latency_stat, runs, ...}
    describe()                          -> {executor, path, label, compiler, ...}
    generate(prompt, max_new_tokens)   -> Generation (decoder artifacts)

so that benchmarks, `rvvkit compare` and the CLI never ask which executor they hold."""
from __future__ import annotations

import os
import statistics
import time
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..llm import generate as generation
from ..artifact.container import Artifact
from ..errors import ExecutionError, InputError


def as_artifact(artifact: Union[str, os.PathLike, Artifact]) -> Artifact:
    art = artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)
    return art.check_model()


def aligned_empty(n_floats: int, align_bytes: int = 64) -> np.ndarray:
    """A float32 buffer whose data pointer is `align_bytes`-aligned, as the kernels assume."""
    raw = np.empty(n_floats + align_bytes // 4, dtype=np.float32)
    skip = (-raw.ctypes.data % align_bytes) // 4
    return raw[skip:skip + n_floats]


def random_feeds(inputs, dtypes_by_name, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape in inputs:
        dt = np.dtype(dtypes_by_name.get(name, np.float32))
        if dt.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dt)
        else:
            feeds[name] = rng.integers(0, 2, size=shape).astype(dt)
    return feeds


def latency_summary(seconds: Sequence[float]) -> Dict:
    """measure()'s figures from per-inference wall times: the median and the spread."""
    ms = sorted(1e3 * s for s in seconds)
    return {"latency_ms": statistics.median(ms), "latency_stat": "median", "min_ms": ms[0],
            "max_ms": ms[-1], "runs": len(ms)}


class Session:
    executor = "abstract"
    # "jit", or the label of the precompiled kernels the session runs
    # (rvvkit/artifact/precompiled.py)
    kernels_from = "jit"
    # Whether measure()'s latency is QEMU's emulation speed rather than a machine's.
    emulated = False
    # Threads the kernels run on; None: the target's default ($RVVKIT_NUM_THREADS, else its
    # online cores). Outputs are bit-identical for every count.
    threads: Optional[int] = None

    def __init__(self, artifact: Union[str, os.PathLike, Artifact]):
        self.artifact = as_artifact(artifact)
        meta = self.artifact.meta
        self.inputs = [(i["name"], tuple(i["shape"])) for i in meta["inputs"]]
        self.outputs = [(o["name"], tuple(o["shape"])) for o in meta["outputs"]]
        # element types by name (artifacts before typed I/O carry float32 throughout)
        self.dtypes = {t["name"]: np.dtype(t.get("dtype", "float32"))
                       for t in meta["inputs"] + meta["outputs"]}
        self.steps: List[Dict] = meta["plan"]
        # a decoder's prefill plan (rvvkit/llm/prefill.py): its inputs' shapes and its steps
        pre = meta.get("prefill") or {}
        self.prefill_inputs = [(i["name"], tuple(i["shape"])) for i in pre.get("inputs", [])]
        self.prefill_steps: List[Dict] = pre.get("plan", [])

    @property
    def input_names(self) -> List[str]:
        return [n for n, _ in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [n for n, _ in self.outputs]

    def random_feeds(self, seed: int = 0) -> Dict[str, np.ndarray]:
        """Seeded inputs of the model's names, shapes and dtypes: standard-normal floats;
        0/1 for integers and bools, valid both as token ids and as attention masks."""
        return random_feeds(self.inputs, self.dtypes, seed)

    def output_buffers(self) -> List[np.ndarray]:
        return [np.empty(shape, self.dtypes[name]) for name, shape in self.outputs]

    def where(self, step: int, prefill: bool = False) -> str:
        """'step 3 (Conv node 'conv1')': a plan step as errors name it."""
        steps = self.prefill_steps if prefill else self.steps
        what = "prefill step" if prefill else "step"
        if 0 <= step < len(steps):
            s = steps[step]
            return f"{what} {step} ({s['op']} node {s['node']!r})"
        return f"{what} {step}"

    def step_error(self, step: int, prefill: bool = False) -> ExecutionError:
        """The error of a run stopped by step `step`'s check of its data (an index, a
        cache length): the op's own explanation when the meta carries one."""
        steps = self.prefill_steps if prefill else self.steps
        why = steps[step].get("data_error") if 0 <= step < len(steps) else None
        return ExecutionError(f"{self.where(step, prefill)}: " + (why or "an index in its run-time "
                              "data is out of range") + "; nothing outside the tensor was read")

    def generate(self, prompt: Sequence[int], max_new_tokens: int = 32, **options):
        """Generate up to `max_new_tokens` after `prompt` (token ids) with a decoder
        artifact; options as rvvkit.llm.generate.generate (sampling, eos, keep_logits, on_token).
        Returns a rvvkit.llm.generate.Generation."""
        return generation.generate(self, prompt, max_new_tokens, **options)

    def generate_iter(self, prompt: Sequence[int], max_new_tokens: int = 32, **options):
        """The tokens of `generate`, yielded as they come."""
        return generation.steps(self, prompt, max_new_tokens, **options)

    def validate(self, feeds: Mapping[str, np.ndarray], inputs=None) -> List[np.ndarray]:
        """Inputs in graph order as C-contiguous arrays of their types, or InputError saying
        what is wrong; `inputs`: (name, shape) pairs other than the plan's (the prefill
        plan's)."""
        inputs = self.inputs if inputs is None else inputs
        if not isinstance(feeds, Mapping):
            raise InputError("inputs must be a dict {input name: numpy array}")
        names = [n for n, _ in inputs]
        missing = [n for n in names if n not in feeds]
        unknown = [n for n in feeds if n not in names]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"missing {missing}")
            if unknown:
                parts.append(f"unknown {unknown}")
            expected = ", ".join(f"{n} {list(s)}" for n, s in inputs)
            raise InputError(f"input names do not match the model ({'; '.join(parts)}); "
                             f"expected: {expected}")
        out = []
        for name, shape in inputs:
            arr = np.asarray(feeds[name])
            want = self.dtypes[name]
            if arr.dtype != want:
                raise InputError(f"input {name!r} has dtype {arr.dtype}, expected {want} "
                                 f"(convert with .astype(numpy.{want}))")
            if tuple(arr.shape) != shape:
                raise InputError(f"input {name!r} has shape {list(arr.shape)}, expected "
                                 f"{list(shape)}")
            out.append(np.ascontiguousarray(arr))
        return out

    def run(self, feeds: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        raise NotImplementedError

    def profile(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> List[Dict]:
        """Per-step mean seconds over `repeat` runs: [{step, kernel, node, op, macs, seconds}]."""
        raise NotImplementedError

    def prepare(self, feeds: Mapping[str, np.ndarray]):
        """Put `feeds` in place once, for run_prepared (in-process executors)."""
        raise NotImplementedError

    def run_prepared(self, prepared) -> None:
        """One synchronised inference on prepare()'s buffers, no Python work per call."""
        raise NotImplementedError

    def measure(self, feeds: Mapping[str, np.ndarray], repeat: int = 10, warmup: int = 2, *,
                count: bool = True) -> Dict:
        """Latency of one inference on this executor's own clock: {latency_ms, latency_stat,
        runs, ...}. Here (in-process executors) the median of `repeat` synchronised runs on
        inputs already in place, after `warmup` untimed ones; executors that can count
        instructions add the counts of one inference when `count`."""
        prepared = self.prepare(feeds)
        for _ in range(warmup):
            self.run_prepared(prepared)
        samples = []
        for _ in range(max(int(repeat), 1)):
            t0 = time.perf_counter()
            self.run_prepared(prepared)
            samples.append(time.perf_counter() - t0)
        return latency_summary(samples)

    def describe(self) -> Dict:
        """What runs this session, for labels and reports: executor (its kind), path (the
        name bench and compare print, e.g. "qemu" or "ssh://k1"), label (one line for
        progress messages), compiler, vlen (None where unknown), emulated (latency is QEMU
        speed), counts_instructions (measure() can add instruction counts)."""
        return {"executor": self.executor, "path": self.executor, "label": self.executor,
                "compiler": self.compiler_text(), "kernels": self.kernels_from,
                "vlen": None, "emulated": self.emulated, "threads": self.threads,
                "counts_instructions": False}

    def set_threads(self, n: Optional[int]) -> None:
        """Run later inferences on `n` threads (None: the target's default)."""
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise InputError(f"threads must be a positive integer, not {n!r}")
        self.threads = n

    def compiler_text(self) -> str:
        if self.kernels_from != "jit":  # no compiler ran: say whose objects run
            return self.kernels_from
        compiler: Optional[object] = getattr(self, "compiler", None)
        return " ".join(compiler.argv) if compiler is not None else ""

    def profile_rows(self, seconds) -> List[Dict]:
        """profile()'s rows from per-step seconds (indexable by step)."""
        return [{"step": i, "kernel": s["kernel"], "node": s["node"], "op": s["op"],
                 "macs": s["macs"], "seconds": seconds[i]} for i, s in enumerate(self.steps)]

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
