"""The artifact: one ELF file holding the meta JSON, the C and CUDA sources, the weights, and
optionally precompiled kernels and a signature.

- `container.py`: writing and reading the ELF container (`Artifact`), its integrity chain;
- `meta.py`: the meta's schema and the checks every reader runs on it;
- `elf64.py`, `checksum.py`: the ELF64 layout and the rvk64 checksum the C runner also computes;
- `signing.py`: optional ed25519 signatures over the integrity chain;
- `precompiled.py`: the precompiled-kernel sections executors read on boards without a compiler
  (the build side, which compiles them, is rvvkit/precompile.py);
- `abi.py`: the facts of the plan ABI, read from `runtime_c/rvvkit_abi.h`.

This package never compiles or runs anything: the code generator reads the ABI facts from it, and
every executor reads artifacts through it."""
from .container import Artifact

__all__ = ["Artifact"]
