"""The table of CUDA generators, keyed by kernel kind (a C kernel's `spec["op"]`), filled by the
`generator` decorator in the generator modules (elementwise, gemm, pool), which the package
imports explicitly. See the package docstring for a generator's contract."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict

from ..kernel import Kernel


@dataclass
class CudaKernel:
    body: str
    support: Dict[str, str] = field(default_factory=dict)


Generator = Callable[[dict, Kernel], CudaKernel]

GENERATORS: Dict[str, Generator] = {}


def generator(kind: str):
    """Register the decorated function as the CUDA generator of kernels of `kind`."""
    def deco(fn: Generator) -> Generator:
        if kind in GENERATORS:
            raise ValueError(f"two CUDA generators for kernel kind {kind!r}")
        GENERATORS[kind] = fn
        return fn
    return deco
