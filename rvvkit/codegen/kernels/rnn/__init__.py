"""Recurrent kernels: `layers.py` is RNN, GRU and LSTM in C; `rows.py` the step as one dot
product per gate row (the CUDA form); `gates.py` what both share (the ONNX activation
functions)."""
