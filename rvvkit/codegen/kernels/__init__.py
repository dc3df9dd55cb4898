"""The kernel emitters: Python functions that write one C kernel (portable C, with RVV 1.0
intrinsic paths under `__riscv_v_intrinsic`) for a lowered node. One folder per family:

- `conv/`: convolutions (2-D through the packed GEMM, depthwise, Winograd, any rank, transposed);
- `gemm/`: the blocked, packed GEMM shared by Gemm, MatMul and Conv, and its RVV micro-kernels;
- `quant/`: the integer kernels of quantized models (int8 GEMM, QConv, QMatMul, element-wise);
- `llm/`: decoder blocks: attention over caches, RMSNorm, RoPE, 4/8-bit MatMulNBits and tables;
- `rnn/`: RNN, GRU, LSTM;
- `reduce/`: pooling, normalisations, Reduce*, ArgMax/TopK and the RVV row reductions;
- `movement/`: transposes, concats, strided views, gathers and scatters, Resize, GridSample;
- `math/`: element-wise arithmetic and logic, vector math (exp, log, GELU), Det and Einsum.

The lowerings (rvvkit/codegen/lower/) call these; the CUDA forms are in rvvkit/codegen/cuda/."""
