"""The blocked, packed GEMM that Gemm, MatMul and Conv run on. `packed.py` holds the lowerings
and the design; `spec.py` what describes one GEMM; `tiling.py` its block sizes and panel layout;
`core.py` the driver loop nest; `emit.py` the portable C helpers (micro-kernel, packing); the
`rvv*.py` modules its RVV 1.0 paths: the register-blocked micro-kernel (`rvv.py`), the LMUL
chosen per VLEN (`rvv_lmul.py`), the epilogue in registers (`rvv_fused.py`) and data movement
(`rvv_move.py`)."""
