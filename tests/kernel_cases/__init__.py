"""The one table of kernel-test cases, per kernel family, shared by the C (host gcc), RVV
(qemu-user) and CUDA (CPU emulator + nvcc) kernel tests; tests/kernel_harness.py builds and
calls them.

A case (`case.Case`) knows its id, how to lower itself (the C lowering: the CUDA generator and
the RVV build start from it too) and how to draw its inputs and the float64 numpy reference.
Each test family keeps its own tolerances and picks its cases from the tables here; where
running every case would be too slow on a family (qemu-user, the emulator that runs every CUDA
thread as a fiber) it uses a named subset defined next to the table, with the reason.

Kernel families and their tables:
- conv.py: CONV (grouped, strided, dilated, padded, depthwise, fused epilogues);
- gemm.py: GEMM (every C-operand mode x B constant or not x epilogue), MATMUL (broadcasting);
- elementwise.py: NARY, UNARY, AFFINE, COPY; layout: TRANSPOSE, CONCAT;
- pool.py: POOL, GLOBAL_POOL; normalisation: LRN, SOFTMAX.
"""
