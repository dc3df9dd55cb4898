"""CUDA generators of the integer convolution and matrix product (codegen/cuda/quant_gemm.py),
checked bit for bit against the C kernels (codegen/kernels/quant/qconv.py, qmatmul.py) they replace.

Every case is lowered by the C lowering; the C kernels go into one shared object (host gcc),
their CUDA launchers into another built for the CPU emulator (g++ and rvk_cuda_emu.h), and nvcc
compiles the CUDA unit with warnings as errors. Both get the same random operands (int8/uint8
data over the full range, int32 biases and zero-point terms, float scales: 0.5 and 0.25 make
ties, so round half to even is checked) and must write the same bytes. The cases reach both
forms of the k loop (K a multiple of 4: int8x4 words; else one k a step), uint8 and int8
activations, weight zero points (column sums), b's zero points (row sums), run-time zero
points, padding, strides, dilations, groups, depthwise, pointwise, batches, batched and
broadcast B, a misaligned `a` (its words then assembled from bytes) and every output type."""
from __future__ import annotations

import subprocess
import zlib

import numpy as np
import pytest

from rvvkit.codegen.kernels.quant.qconv import qconv
from rvvkit.codegen.kernels.quant.qmatmul import qmatmul
from kernel_harness import C_HDR, ORDERS, EmuLib, KernelLib, lower, nvcc_compiles, \
    translation_unit

QR = {"int8": (-128, 127), "uint8": (0, 255), "int32": (0, 0), "float32": (0, 0)}


def conv_case(x_shape, w_shape, *, group=1, strides=(1, 1), pads=(0, 0, 0, 0),
              dilations=(1, 1), x_dtype="uint8", out="uint8", x_zp=-3, y_zp=5, w_zp=False,
              rt_zp=False, paired=True, relu=False):
    n, _, h, w = x_shape
    m, _, kh, kw = w_shape
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    lo, hi = QR[out]
    if relu:
        lo = y_zp
    return qconv(x_shape, w_shape, (n, m, oh, ow), group=group, strides=strides, pads=pads,
                 dilations=dilations, x_dtype=x_dtype, out=out, x_zp=0 if rt_zp else x_zp,
                 x_flip=x_dtype == "uint8", y_zp=y_zp if out in ("int8", "uint8") else 0,
                 lo=lo, hi=hi, paired=paired, has_scale=out != "int32", w_zp=w_zp,
                 rt_zp=rt_zp, zp_shift=128 if x_dtype == "uint8" else 0)


def mm_case(a_shape, b_shape, *, a_dtype="uint8", b_dtype="int8", out="uint8", a_zp=-3,
            y_zp=7, b_zp=False, b_const=True, rt_zp=False, paired=False):
    batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    y_shape = tuple(batch) + (a_shape[-2], b_shape[-1])
    lo, hi = QR[out]
    return qmatmul(a_shape, b_shape, y_shape, a_dtype=a_dtype,
                   b_dtype="int8" if b_const else b_dtype, out=out, a_zp=0 if rt_zp else a_zp,
                   y_zp=y_zp if out in ("int8", "uint8") else 0, lo=lo, hi=hi, paired=paired,
                   has_scale=out != "int32", b_zp=b_zp, b_const=b_const, rt_zp=rt_zp,
                   zp_shift=128 if a_dtype == "uint8" else 0)


CASES = {
    # K = 27 (one k a step), padding with the zero point
    "conv3x3_u8_pad": lambda: conv_case((1, 3, 7, 6), (4, 3, 3, 3), pads=(1, 1, 1, 1)),
    # K = 36 (words), int8, strides, uneven padding, per-channel weight zero points
    "conv3x3_s8_words_wzp": lambda: conv_case((2, 4, 9, 8), (6, 4, 3, 3), x_dtype="int8",
                                              out="int8", strides=(2, 2), pads=(1, 0, 1, 2),
                                              w_zp=True, paired=False),
    "conv_grouped_dilated_relu": lambda: conv_case((2, 8, 9, 9), (6, 4, 3, 3), group=2,
                                                   dilations=(2, 2), pads=(2, 2, 2, 2),
                                                   relu=True),
    "conv_depthwise": lambda: conv_case((1, 5, 8, 7), (5, 1, 3, 3), group=5,
                                        pads=(1, 1, 1, 1), x_dtype="int8"),
    # the C kernel's direct depthwise path (qconv_dw.py): unpaired full-range weights, int8
    # out with a Relu, a batch, 5 x 5 dilated, 1-D
    "conv_dw_u8_stride2_unpaired": lambda: conv_case((1, 6, 9, 8), (6, 1, 3, 3), group=6,
                                                     strides=(2, 2), pads=(0, 1, 2, 1),
                                                     paired=False),
    "conv_dw_s8_batch2_relu": lambda: conv_case((2, 4, 7, 6), (4, 1, 3, 3), group=4,
                                                pads=(1, 1, 1, 1), x_dtype="int8", out="int8",
                                                relu=True),
    "conv_dw_5x5_dilated": lambda: conv_case((1, 3, 12, 11), (3, 1, 5, 5), group=3,
                                             dilations=(2, 1), pads=(4, 2, 4, 2)),
    "conv_dw_1d": lambda: conv_case((1, 5, 1, 19), (5, 1, 1, 3), group=5, pads=(0, 1, 0, 1),
                                    strides=(1, 2)),
    "conv_pointwise_words": lambda: conv_case((2, 16, 5, 3), (19, 16, 1, 1), x_dtype="int8",
                                              out="int8", y_zp=-4),
    "conv_pointwise_u8_strided": lambda: conv_case((1, 8, 7, 7), (3, 8, 1, 1),
                                                   strides=(2, 2)),
    "conv_int32_rt_zp_wzp": lambda: conv_case((1, 2, 6, 5), (3, 2, 2, 2), pads=(1, 0, 1, 1),
                                              out="int32", w_zp=True, rt_zp=True),
    "conv_float_rt_zp": lambda: conv_case((1, 3, 5, 5), (4, 3, 3, 1), pads=(1, 0, 1, 0),
                                          out="float32", rt_zp=True),
    "conv_1d_as_2d": lambda: conv_case((1, 4, 1, 11), (5, 4, 1, 3), pads=(0, 1, 0, 1)),
    "mm_u8_const_words": lambda: mm_case((5, 12), (12, 7)),
    "mm_s8_3d_rowsum": lambda: mm_case((2, 3, 16), (16, 9), a_dtype="int8", out="int8",
                                       b_zp=True),
    "mm_u8u8_runtime_batched": lambda: mm_case((2, 3, 8), (2, 8, 5), b_dtype="uint8",
                                               b_const=False, b_zp=True),
    "mm_shared_a_batched_b": lambda: mm_case((3, 12), (2, 12, 6), b_const=False, out="int32"),
    "mm_runtime_colsum_k9": lambda: mm_case((4, 9), (9, 6), b_const=False, out="int32",
                                            b_zp=True),
    "mm_rt_zp_float": lambda: mm_case((2, 4, 20), (20, 6), out="float32", rt_zp=True),
    "mm_many_rows": lambda: mm_case((37, 8), (8, 3), out="uint8", paired=True),
}
# cases whose `a` starts at an odd address (as a view into a Concat's output may)
MISALIGNED = {"mm_u8_const_words", "mm_s8_3d_rowsum"}
NAMES = sorted(CASES)


@pytest.fixture(scope="module")
def lowered():
    return [CASES[name]() for name in NAMES]


@pytest.fixture(scope="module")
def libs(lowered, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cuda-emu-quant-gemm")
    src = tmp / "c_kernels.c"
    src.write_text(translation_unit(C_HDR, [low.kernel for low in lowered]))
    subprocess.run(["gcc", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", str(src),
                    "-o", str(tmp / "c_kernels.so")], check=True)
    c_lib = KernelLib(tmp / "c_kernels.so", [low.kernel for low in lowered])
    emu = EmuLib([(low.kernel, lower(low)) for low in lowered], tmp)
    return c_lib, emu


def _operands(name, kernel, out_size):
    """Random arrays for the kernel's parameters (output: NaN bytes), then scratch."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    paired = kernel.spec["paired"]
    spec = kernel.spec
    if spec["op"] == "qconv":
        m = spec["w_shape"][0]
        sizes = {"x": int(np.prod(spec["x_shape"])), "w": int(np.prod(spec["w_shape"]))}
    else:
        m = spec["b_shape"][-1]
        sizes = {"a": int(np.prod(spec["a_shape"])), "b": int(np.prod(spec["b_shape"]))}
    arrs = []
    for p in kernel.params:
        if not p.const:
            arrs.append(np.full(out_size * 4, 0xFF, np.uint8))
            continue
        size = sizes.get(p.name, 1 if p.name in ("x_zp", "a_zp") else m)
        if p.dtype in ("int8", "uint8"):
            info = np.iinfo(p.dtype)
            lo = -127 if (paired and p.dtype == "int8" and p.name in ("w", "b")) else info.min
            v = rng.integers(lo, info.max + 1, size).astype(p.dtype)
        elif p.dtype == "int32":
            span = {"bias": 5000, "w_zp": 20, "b_zp": 20}.get(p.name, 3000)
            v = rng.integers(-span, span + 1, size).astype(np.int32)
        else:   # scale
            v = rng.choice(np.array([0.5, 0.25, 0.0123, 0.031], np.float32), size)
        arrs.append(_odd(v) if p.name == "a" and name in MISALIGNED else v)
    if kernel.workspace:
        arrs.append(np.full(kernel.workspace, np.nan, np.float32))
    return arrs


def _odd(v: np.ndarray) -> np.ndarray:
    """A copy of `v` at an odd address."""
    raw = np.zeros(v.nbytes + 1, np.uint8)
    out = raw[1:].view(v.dtype)
    out[:] = v
    return out


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("name", NAMES)
def test_bit_identical_to_c_kernel(libs, lowered, name, order):
    c_lib, emu = libs
    i = NAMES.index(name)
    kernel = lowered[i].kernel
    out_size = int(np.prod(kernel.spec["y_shape"]))
    arrs = _operands(name, kernel, out_size)
    c_arrs = [_odd(a) if a.ctypes.data % 4 else a.copy() for a in arrs]
    c_lib.call(i, c_arrs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RVK_CUDA_EMU_ORDER", order)
        emu.call(i, arrs)
    yi = len(kernel.params) - 1
    nbytes = out_size * np.dtype(kernel.params[yi].dtype).itemsize
    want, got = c_arrs[yi][:nbytes], arrs[yi][:nbytes]
    assert np.array_equal(want, got), (name, np.argwhere(want != got)[:5])
    assert np.any(want != 0xFF), "the C kernel wrote nothing"


def test_nvcc_compiles_warning_free(lowered, tmp_path):
    nvcc_compiles([(low.kernel, lower(low)) for low in lowered], tmp_path)
