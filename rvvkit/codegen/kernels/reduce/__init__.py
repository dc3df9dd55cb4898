"""Kernels that reduce over windows, axes or rows: `pool.py` (max/average pooling), `lppool.py`,
`norm.py` (LRN, softmax), `normalize.py` (LayerNormalization, RMSNormalization, Group/Instance
normalisation, MVN), `reductions.py` (Reduce*), `lines.py` (ArgMax/ArgMin, TopK, Hardmax,
LpNormalization, CumSum: one line of an axis at a time) and `vreduce.py` (the RVV statements
reducing a row to a scalar)."""
