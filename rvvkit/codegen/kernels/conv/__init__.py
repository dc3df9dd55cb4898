"""Convolution kernels: `conv2d.py` lowers Conv (NCHW) onto the packed GEMM (gemm/), fed by the
fused im2col+pack of `im2col.py`; `depthwise.py` is the direct depthwise path; `winograd.py`
runs 3x3 stride-1 convolutions by Winograd F(4x4, 3x3) with the transforms of
`winograd_transforms.py` (shared with the CUDA form); `conv3d.py` handles any spatial rank
(convolution and pooling); `transpose.py` is ConvTranspose."""
