"""C lowerings: for each operator in the table, a function from a graph node to the kernel that
computes it (`@lowering("Op")`, attached to the op's entry in rvvkit/ops/). Importing this package
attaches every lowering.

- `core.py`: the dispatch (`lower`, `check_lowerable`, `unlowerable`) and the lowerings of the
  core ops (Conv, Gemm/MatMul, pooling, element-wise);
- one module per family beside it: `logic`, `movement`, `reduce`, `sequence` (ConvTranspose,
  Einsum, RNNs, Attention), `quant` and `quant_ew` (integer kernels), `llm` (decoder blocks),
  `grid`, `extra`."""
from . import core  # noqa: F401  (core imports every family's module at its end)
