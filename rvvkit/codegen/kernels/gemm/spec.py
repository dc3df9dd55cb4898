"""What describes one packed GEMM to its emitters (core.py, emit.py and the RVV
bodies of rvv_move.py / rvv_fused.py): how each operand reaches the micro-kernel
(Side) and what the epilogue does with a finished tile (Epilogue). Plain data, below every
emitter, so each of them can import it at module level."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional, Tuple

from ....ops.activations import Act


@dataclass(frozen=True)
class Side:
    """How one operand reaches the micro-kernel (see packed.py)."""
    kind: str                 # "packed" | "strided" | "custom" | "row" | "indirect"
    si: int = 0               # strided/row: stride between indices
    sk: int = 1               # strided: stride along k
    # custom: (name, C def) of `void f(src, idx0, n, k0, kb, dst)` packing panels;
    # indirect: (name, C def) of `void f(k0, kb, int *off)` giving each k-row's offset
    packer: Optional[Tuple[str, str]] = None


# what an addend pointer of the lowerings holds, for helper names
_ADDEND_NAMES = {"b": "bias", "r": "residual", "c": "c"}


@dataclass(frozen=True)
class Epilogue:
    """y[m*ldy + n] = act(alpha*acc + sum(scale*ptr[index])) over the output (m, n).

    With `grid`, the product's columns are cells of a padded row grid (wp wide) of which only
    the first wo of each row are outputs (conv computed on the padded input, see conv/conv2d.py)."""
    ldy: int
    trans: bool = False
    alpha: float = 1.0
    addends: Tuple[Tuple[str, str, Optional[float]], ...] = ()  # (ptr, "index in m,n", scale)
    act: Optional[Act] = None
    grid: Optional[Tuple[int, int]] = None  # (wp, wo): column n is grid cell (n/wp, n%wp)

    def tag(self) -> str:
        # stable across processes (str hashes are salted), so generated source is reproducible
        return hashlib.sha1(repr(self).encode()).hexdigest()[:8]

    def describe(self) -> str:
        """Name fragment: what the epilogue adds and applies, e.g. "_bias_relu"."""
        parts = (["scaled"] if self.alpha != 1.0 else []) + \
            [_ADDEND_NAMES.get(p, p) for p, _, _ in self.addends] + \
            ([getattr(self.act, "kind", "act")] if self.act is not None else []) + \
            (["grid"] if self.grid else []) + (["transposed"] if self.trans else [])
        return "".join("_" + p for p in parts)
