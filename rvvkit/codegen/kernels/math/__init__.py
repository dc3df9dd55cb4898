"""Element-wise and math kernels: `elementwise.py` (broadcasting arithmetic with a fused
activation, per-channel affine), `logic.py` (the typed element-wise kernel: comparisons, logic,
Where, Cast), `vmath.py` and `vgelu.py` (e^x, log, tanh and GELU on RVV register groups, used by
the activation table), and the small linear algebra: `det.py` (Det) and `einsum.py` (Einsum)."""
