"""What every executor shares: input validation against the artifact's meta, and the shape of
results (dicts of numpy arrays keyed by the graph's names)."""
from __future__ import annotations

import os
from typing import Dict, List, Mapping, Union

import numpy as np

from ..artifact import Artifact
from ..errors import InputError


def as_artifact(artifact: Union[str, os.PathLike, Artifact]) -> Artifact:
    return artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)


def aligned_empty(n_floats: int, align_bytes: int = 64) -> np.ndarray:
    """A float32 buffer whose data pointer is `align_bytes`-aligned, as the kernels assume."""
    raw = np.empty(n_floats + align_bytes // 4, dtype=np.float32)
    skip = (-raw.ctypes.data % align_bytes) // 4
    return raw[skip:skip + n_floats]


class Session:
    executor = "abstract"

    def __init__(self, artifact: Union[str, os.PathLike, Artifact]):
        self.artifact = as_artifact(artifact)
        meta = self.artifact.meta
        self.inputs = [(i["name"], tuple(i["shape"])) for i in meta["inputs"]]
        self.outputs = [(o["name"], tuple(o["shape"])) for o in meta["outputs"]]
        self.steps: List[Dict] = meta["plan"]

    @property
    def input_names(self) -> List[str]:
        return [n for n, _ in self.inputs]

    @property
    def output_names(self) -> List[str]:
        return [n for n, _ in self.outputs]

    def validate(self, feeds: Mapping[str, np.ndarray]) -> List[np.ndarray]:
        """Inputs in graph order as C-contiguous float32, or InputError saying what is wrong."""
        if not isinstance(feeds, Mapping):
            raise InputError("inputs must be a dict {input name: numpy array}")
        missing = [n for n in self.input_names if n not in feeds]
        unknown = [n for n in feeds if n not in self.input_names]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"missing {missing}")
            if unknown:
                parts.append(f"unknown {unknown}")
            expected = ", ".join(f"{n} {list(s)}" for n, s in self.inputs)
            raise InputError(f"input names do not match the model ({'; '.join(parts)}); "
                             f"expected: {expected}")
        out = []
        for name, shape in self.inputs:
            arr = np.asarray(feeds[name])
            if arr.dtype != np.float32:
                raise InputError(f"input {name!r} has dtype {arr.dtype}, expected float32 "
                                 "(convert with .astype(numpy.float32))")
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
