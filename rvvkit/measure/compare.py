"""`rvvkit compare`: one model, the same inputs, every named path (the host, QEMU at each VLEN,
a CUDA GPU, a board) against a reference run of the original model; per path the errors,
argmax agreement, latency and, under QEMU, the instruction count of one inference.

A path that cannot run here (no device, no compiler, no QEMU, board unreachable) becomes a
"skipped" row carrying the reason; one that starts but breaks becomes "failed". Neither stops
the other paths, which run one after another so that their timings do not compete."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..artifact.container import Artifact
from ..errors import (BoardConnectionError, CompileError, ExecutorUnavailable, InputError,
                     RvvkitError)
from .reference import Reference, run_reference
from ..jit.isa import run_suffix
from ..runtime import PATH_HELP, check_path, path_kind, takes_vlen
from .scoring import score
RTOL, ATOL = 1e-3, 1e-4
ELF_MAGIC = b"\x7fELF"  # artifacts are ELF containers; ONNX models are protobuf


@dataclass(frozen=True)
class Target:
    label: str            # "host", "qemu vlen=256", "ssh://board", ...
    on: str               # what open_session takes
    vlen: Optional[int] = None


def split_paths(paths: Union[str, Sequence[str]]) -> List[str]:
    """Path names from "host,qemu" or a list, checked; InputError names an unknown one."""
    items = paths.split(",") if isinstance(paths, str) else \
        [p for item in paths for p in str(item).split(",")]
    names = [p.strip() for p in items if p.strip()]
    if not names:
        raise InputError(f"no path to compare: name at least one of {PATH_HELP}")
    for name in names:
        try:
            check_path(name)
        except InputError:
            raise InputError(f"unknown path {name!r}: choose from {PATH_HELP}") from None
    return names


def parse_paths(paths: Union[str, Sequence[str]], vlens: Optional[Sequence[int]] = None
                ) -> List[Target]:
    """Targets in the order given (duplicates dropped); qemu once per VLEN (default
    $RVVKIT_VLEN, else 256)."""
    from ..runtime.qemu import resolve_vlen
    targets: List[Target] = []
    for name in split_paths(paths):
        if takes_vlen(name):
            new = [Target(f"{name} vlen={v}", name, v)
                   for v in dict.fromkeys(resolve_vlen(v) for v in (vlens or [None]))]
        else:
            new = [Target(name, name)]
        targets += [t for t in new if t not in targets]
    return targets


@dataclass
class Comparison:
    model: str
    macs: int
    reference: Reference
    rtol: float
    atol: float
    inputs: Dict[str, Dict]
    rows: List[Dict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every path that ran matched; skipped paths do not count against it."""
        return all(r["status"] in ("ok", "skipped") for r in self.rows)

    def to_json(self) -> Dict:
        return {"model": self.model, "macs": self.macs, "reference": self.reference.to_json(),
                "tolerance": {"rtol": self.rtol, "atol": self.atol,
                              "rule": "max|out - ref| <= atol + rtol * max|ref|, per output"},
                "inputs": self.inputs, "passed": self.passed, "rows": self.rows}


def _is_artifact_file(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError as exc:
        raise InputError(f"cannot read {os.fspath(path)}: {exc.strerror}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if isinstance(exc, CompileError):  # its first line is only "compilation failed (...)"
        errors = [ln.strip() for ln in exc.stderr.splitlines() if "error" in ln]
        if errors:
            first += ": " + errors[0]
    return first if isinstance(exc, RvvkitError) else f"{type(exc).__name__}: {first}"


def _run_path(art: Artifact, target: Target, feeds, ref: Reference, *, kwargs: Dict,
              repeat: int, warmup: int, count: bool, rtol: float, atol: float,
              say: Callable[[str], None]) -> Dict:
    from ..runtime import open_session
    row: Dict = {"path": target.label, "executor": target.on, "vlen": target.vlen,
                 "status": "ok", "reason": None}
    say(f"{target.label}: preparing")
    t0 = time.perf_counter()
    try:
        sess = open_session(art, on=target.on, **kwargs)
    except RvvkitError as exc:
        # A path this machine cannot run (no device, compiler, QEMU or board) is skipped;
        # anything else at this stage (generated code rejected, bad artifact) is a defect.
        skip = isinstance(exc, (ExecutorUnavailable, BoardConnectionError))
        return dict(row, status="skipped" if skip else "failed", reason=_first_line(exc),
                    detail=str(exc))
    row["ready_s"] = round(time.perf_counter() - t0, 3)
    with sess:
        try:
            desc = sess.describe()
            row["emulated"] = desc["emulated"]
            if desc.get("isa") is not None:   # the ISA profile of the build and the QEMU CPU
                row.update(isa=desc["isa"], isa_checked=desc["isa_checked"])
                row["path"] += run_suffix(desc["isa"], desc["isa_checked"])
            counting = count and desc["counts_instructions"]
            say(f"{target.label}: running ({repeat} timed runs"
                + (", counting instructions" if counting else "") + ")")
            row.update(score(sess.run(feeds), ref.outputs, rtol=rtol, atol=atol))
            row.update(sess.measure(feeds, repeat, warmup, count=count))
        except RvvkitError as exc:
            return dict(row, status="failed", reason=_first_line(exc), detail=str(exc))
    if row.get("latency_ms") and ref.latency_ms and ref.kind != "onnx":
        row["vs_reference"] = row["latency_ms"] / ref.latency_ms
    return row


def _host_reference(art: Artifact, feeds, kwargs: Dict, repeat: int, warmup: int
                    ) -> Reference:
    from ..runtime import open_session
    with open_session(art, on="host", **kwargs) as sess:
        outs = sess.run(feeds)
        lat = sess.measure(feeds, repeat, warmup)
    return Reference("host", "rvvkit host", outs, latency_ms=lat["latency_ms"],
                     runs=lat["runs"], note="no ONNX model given, so the host path is the "
                     "reference; pass the model (--model) for an independent one")


def compare(model_or_artifact, paths: Union[str, Sequence[str]], *,
            vlens: Optional[Sequence[int]] = None,
            inputs: Optional[Mapping[str, np.ndarray]] = None, seed: int = 0,
            repeat: int = 10, warmup: int = 2, reference: str = "auto", model=None,
            rtol: float = RTOL, atol: float = ATOL, count: bool = True,
            input_shapes: Optional[Dict[str, Sequence[int]]] = None,
            options: Optional[Mapping[str, Mapping]] = None,
            progress: Optional[Callable[[str], None]] = None) -> Comparison:
    """Run the same inputs on every path and on a reference; `.rows` has one dict per path.

    model_or_artifact: an ONNX model (path, bytes or ModelProto; built in memory) or an
    artifact (path or Artifact), in which case `model=` names the ONNX model for the
    reference, else the host path is the reference. vlens: qemu VLENs (default $RVVKIT_VLEN
    or 256). inputs: {name: float32 array} (default seeded random normal). reference: "auto"
    (onnxruntime when installed, else the ONNX reference evaluator), "onnxruntime", "onnx" or
    "host". options: extra open_session arguments per executor ("host", "qemu", "cuda",
    "cuda-emu", "ssh"), e.g. {"qemu": {"compiler": "clang-16"}}."""
    say = progress or (lambda _msg: None)
    targets = parse_paths(paths, vlens)  # usage errors first, before minutes of building
    if repeat < 1 or warmup < 0:
        raise InputError("repeat must be at least 1 and warmup at least 0")
    options = options or {}
    if isinstance(model_or_artifact, Artifact) or (
            isinstance(model_or_artifact, (str, os.PathLike))
            and _is_artifact_file(model_or_artifact)):
        art = model_or_artifact if isinstance(model_or_artifact, Artifact) \
            else Artifact.load(model_or_artifact).check_model()
        ref_model = model
    else:
        if model is not None:
            raise InputError("model= names the ONNX model of an artifact; it was given a model")
        from ..builder import build_model
        say("building the model")
        art = build_model(model_or_artifact, input_shapes=input_shapes, progress=say)
        ref_model = model_or_artifact
    from ..runtime.session import Session
    plain = Session(art)
    feeds = dict(inputs) if inputs is not None else plain.random_feeds(seed)
    plain.validate(feeds)  # wrong names or shapes: one clear error, not one per path
    out_names = [o["name"] for o in art.meta["outputs"]]
    if reference == "host" or (ref_model is None and reference == "auto"):
        say("reference: rvvkit host")
        ref = _host_reference(art, feeds, dict(options.get("host", {})), repeat, warmup)
    elif ref_model is None:
        raise InputError(f"reference {reference!r} needs the ONNX model: pass model= "
                         "(--model) with the artifact")
    else:
        say("reference: running the original model")
        ref = run_reference(ref_model, feeds, out_names, kind=reference, repeat=repeat,
                            warmup=warmup)
    result = Comparison(art.meta.get("model", "model"), int(art.meta.get("macs", 0)), ref,
                        rtol, atol, {n: {"shape": list(a.shape), "dtype": str(a.dtype)}
                                     for n, a in feeds.items()})
    for target in targets:
        kwargs = dict(options.get(path_kind(target.on), {}))
        if target.vlen is not None:
            kwargs["vlen"] = target.vlen
        row = _run_path(art, target, feeds, ref, kwargs=kwargs, repeat=repeat, warmup=warmup,
                        count=count, rtol=rtol, atol=atol, say=say)
        say(f"{target.label}: {row['status']}"
            + (f" ({row['reason']})" if row["reason"] else ""))
        result.rows.append(row)
    return result
