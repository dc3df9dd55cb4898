"""rvvkit as an `onnx.backend.base.Backend`, so ONNX's conformance suite (and anything else
written against that interface) can drive it:

    from rvvkit.conformance.backend import RvvkitBackend
    rep = RvvkitBackend.prepare(model)          # build the artifact + JIT on the host
    (y,) = rep.run([x])                         # inputs in graph-input order, or a dict
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Union

import numpy as np
from onnx.backend.base import Backend, BackendRep, namedtupledict

from ..builder import build_model
from ..runtime import open_session


class RvvkitRep(BackendRep):
    """A built and loaded model; run() takes a list (graph-input order) or a dict of arrays."""

    def __init__(self, session, input_names: Sequence[str]):
        self.session = session
        self.input_names = list(input_names)
        self.artifact = session.artifact

    def run(self, inputs: Union[Sequence[np.ndarray], Mapping[str, np.ndarray], np.ndarray],
            **kwargs: Any):
        if isinstance(inputs, Mapping):
            feeds: Dict[str, np.ndarray] = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise ValueError(f"model takes {len(self.input_names)} input(s) "
                                 f"{self.input_names}, got {len(inputs)}")
            feeds = dict(zip(self.input_names, inputs))
        outs = self.session.run(feeds)
        names = self.session.output_names
        return namedtupledict("Outputs", names)(*[outs[n] for n in names])


class RvvkitBackend(Backend):
    """Builds with rvvkit and runs on the host executor (device "CPU")."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"

    @classmethod
    def prepare(cls, model, device: str = "CPU", on: str = "host", **kwargs: Any) -> RvvkitRep:
        """Build `model` and open a session on executor `on` (default the host; "qemu",
        "cuda-emu", ... take their session options as keyword arguments too)."""
        super().prepare(model, device, **kwargs)  # onnx.checker on the model
        build_kw = {k: kwargs.pop(k) for k in ("input_shapes", "opt_level", "cuda")
                    if k in kwargs}
        artifact = build_model(model, **build_kw)
        session = open_session(artifact, on=on, **kwargs)
        inits = {i.name for i in model.graph.initializer}
        return RvvkitRep(session, [vi.name for vi in model.graph.input if vi.name not in inits])

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        raise NotImplementedError("rvvkit compiles whole models; use prepare()/run_model()")


prepare = RvvkitBackend.prepare
run_model = RvvkitBackend.run_model
supports_device = RvvkitBackend.supports_device

__all__: List[str] = ["RvvkitBackend", "RvvkitRep", "prepare", "run_model", "supports_device"]
