"""The integer operators of quantized models, as onnxruntime runs them.

- `products.py`: QLinearConv, ConvInteger, QLinearMatMul, MatMulInteger and QGemm, each
  becoming (rvvkit/passes/quant.py) one of the two internal integer ops of `internal.py`
  (rvvkit.QConv, rvvkit.QMatMul);
- `linear.py`: QuantizeLinear, DequantizeLinear and the QLinear element-wise, pooling and lookup
  family, with their numpy numerics in `numerics.py` and `pool_eval.py`;
- `island.py`: rvvkit.QDQAdd, a DQ + DQ -> Add -> Q float island in one pass."""
from . import products, internal  # noqa: F401  (registration side effects, in this order)
from . import linear  # noqa: F401
from . import island  # noqa: F401
