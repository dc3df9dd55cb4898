"""The integer kernels of quantized models (semantics: rvvkit/ops/quant/). `qgemm.py` is the
int8 x int8 -> int32 GEMM core (its RVV path in `qgemm_rvv.py`, its split over threads in
`qgemm_parts.py`) under `qconv.py`/`qconv_dw.py` (rvvkit.QConv) and `qmatmul.py`
(rvvkit.QMatMul); `requant.py` is their requantisation epilogue; `elementwise.py`, `pool.py` and
`island.py` are the quantized element-wise, pooling and DQ->Add->Q families."""
