"""Operator cases of the integer convolution and matrix products (QLinearConv, ConvInteger,
QLinearMatMul, MatMulInteger, com.microsoft.QGemm) and of the QDQ groups that become them:
uint8 and int8 activations, per-tensor and per-channel weights, zero points that are 0 and not,
padding, strides, dilations, groups, batches. Run on the sampled executors and compared with
onnxruntime's CPU provider: integer outputs must be equal.

rvvkit's sums are exact. onnxruntime's uint8 x int8 kernels on x86 without VNNI (vpmaddubsw)
saturate the sum of two adjacent products to int16, which full-range operands reach; the
uint8 x int8 cases therefore keep weights within [-64, 64] (where that sum cannot saturate,
as onnxruntime's reduce_range does), and a separate case checks full-range operands against
exact integer arithmetic."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import make_model, run_ort, run_rvvkit

node = helper.make_node
MS = "com.microsoft"
U8, I8 = np.uint8, np.int8


def q(shape, dtype, seed, lo=None, hi=None):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1,
                        shape).astype(dtype)


def f32(*v):
    return np.array(v, np.float32) if len(v) > 1 else np.array(v[0], np.float32)


def _vi(name, arr):
    code = {np.dtype(U8): TensorProto.UINT8, np.dtype(I8): TensorProto.INT8,
            np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    return helper.make_tensor_value_info(name, code[arr.dtype], list(arr.shape))


def _weight_range(adt, wdt):
    """int8 weights that onnxruntime's u8s8 kernels cannot saturate on (see the doc)."""
    if wdt != I8:
        return None, None
    return (-64, 64) if adt == U8 else (-127, 127)


def _out(dtype):
    code = {np.dtype(U8): TensorProto.UINT8, np.dtype(I8): TensorProto.INT8,
            np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    return [helper.make_tensor_value_info("y", code[np.dtype(dtype)], None)]


def qlinearconv(xdt=U8, wdt=I8, x_shape=(1, 3, 7, 6), w_shape=(4, 3, 3, 3), per_channel=False,
                bias=True, ydt=U8, xz=None, wz=0, **attrs):
    m = w_shape[0]
    x = q(x_shape, xdt, 1)
    w = q(w_shape, wdt, 2, *(_weight_range(xdt, wdt)))
    ws = (np.linspace(0.01, 0.03, m) if per_channel else np.array(0.02)).astype(np.float32)
    wzp = np.full(m if per_channel else (), wz, wdt)
    xzp = np.array(xz if xz is not None else (128 if xdt == U8 else -3), xdt)
    yzp = np.array(120 if ydt == U8 else 5, ydt)
    inits = {"xs": f32(0.05), "xz": xzp, "w": w, "ws": ws, "wz": wzp, "ys": f32(0.4),
             "yz": yzp}
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits["b"] = q((m,), np.int32, 3, -2000, 2000)
        ins.append("b")
    mod = make_model([node("QLinearConv", ins, ["y"], **attrs)], [_vi("x", x)], _out(ydt),
                     inits)
    return mod, {"x": x}


def depthwise(xdt=U8, x_shape=(1, 6, 9, 8), k=(3, 3), per_channel=True, min_weight=False,
              **attrs):
    """QLinearConv with group == channels (rvvkit's direct depthwise path); `min_weight`: one
    weight is -128 (so pairs of products may not be summed in int16)."""
    c = x_shape[1]
    mod, feeds = qlinearconv(xdt, x_shape=x_shape, w_shape=(c, 1) + tuple(k), group=c,
                             per_channel=per_channel, ydt=xdt, **attrs)
    if min_weight:
        from onnx import numpy_helper
        init = next(i for i in mod.graph.initializer if i.name == "w")
        w = numpy_helper.to_array(init).copy()
        w.reshape(-1)[4] = -128
        init.CopyFrom(numpy_helper.from_array(w, "w"))
    return mod, feeds


def convinteger(xdt=U8, wdt=U8, xz=7, wz=3, **attrs):
    x, w = q((1, 2, 6, 5), xdt, 4), q((3, 2, 2, 3), wdt, 5, *_weight_range(xdt, wdt))
    inits = {"w": w, "xz": np.array(xz, xdt), "wz": np.array(wz, wdt)}
    mod = make_model([node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)],
                     [_vi("x", x)], _out(np.int32), inits, opset=13)
    return mod, {"x": x}


def _operands(a, b, const_b, inits):
    """(feeds, graph inputs) with `a` at run time and `b` a constant (into inits) or not."""
    if const_b:
        inits["b"] = b
        return {"a": a}, [_vi("a", a)]
    return {"a": a, "b": b}, [_vi("a", a), _vi("b", b)]


def qlinearmatmul(adt=U8, bdt=I8, a_shape=(5, 12), b_shape=(12, 7), const_b=True,
                  per_col=False, ydt=U8):
    a, b = q(a_shape, adt, 6), q(b_shape, bdt, 7, *_weight_range(adt, bdt))
    n = b_shape[-1]
    bs = (np.linspace(0.005, 0.02, n) if per_col else np.array(0.01)).astype(np.float32)
    bz = np.full(n if per_col else (), 0 if bdt == I8 else 131, bdt)
    inits = {"as": f32(0.03), "az": np.array(125 if adt == U8 else -2, adt), "bs": bs,
             "bz": bz, "ys": f32(0.05), "yz": np.array(128 if ydt == U8 else 0, ydt)}
    feeds, ins = _operands(a, b, const_b, inits)
    mod = make_model([node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                           ["y"])], ins, _out(ydt), inits)
    return mod, feeds


def runtime_zp(op):
    """ConvInteger / MatMulInteger reading their activation zero point at run time (as
    DynamicQuantizeLinear feeds it in dynamically quantized models)."""
    mod, feeds = (convinteger(pads=[1, 1, 1, 1]) if op == "conv" else
                  matmulinteger(U8, I8, True))
    g = mod.graph
    zp = [i for i in g.initializer if i.name in ("xz", "az")][0]
    g.initializer.remove(zp)
    g.input.append(helper.make_tensor_value_info(zp.name, TensorProto.UINT8, []))
    feeds[zp.name] = np.array(77, U8)
    return mod, feeds


def matmulinteger(adt=U8, bdt=U8, const_b=False, a_shape=(2, 4, 9), b_shape=(9, 6)):
    a, b = q(a_shape, adt, 8), q(b_shape, bdt, 9, *_weight_range(adt, bdt))
    inits = {"az": np.array(11, adt), "bz": np.array(200 if bdt == U8 else 4, bdt)}
    feeds, ins = _operands(a, b, const_b, inits)
    mod = make_model([node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], ins,
                     _out(np.int32), inits)
    return mod, feeds


def qgemm(y_scale=True, trans_b=1, adt=U8, per_col=True):
    a = q((3, 20), adt, 10)
    b = q((6, 20) if trans_b else (20, 6), I8, 11, *_weight_range(adt, I8))
    inits = {"as": f32(0.02), "az": np.array(100 if adt == U8 else 1, adt), "b": b,
             "bs": (np.linspace(0.01, 0.02, 6) if per_col else np.array(0.01)).astype(
                 np.float32), "bz": np.zeros(6 if per_col else (), I8),
             "c": q((6,), np.int32, 12, -500, 500)}
    ins = ["a", "as", "az", "b", "bs", "bz", "c"]
    if y_scale:
        inits.update(ys=f32(0.3), yz=np.array(128, U8))
        ins += ["ys", "yz"]
    mod = make_model([node("QGemm", ins, ["y"], domain=MS, transB=trans_b, alpha=0.75)],
                     [_vi("a", a)], _out(U8 if y_scale else np.float32), inits, opset=13)
    mod.opset_import.append(helper.make_opsetid(MS, 1))
    return mod, {"a": a}


CASES = {
    "qconv_u8_pad": lambda: qlinearconv(pads=[1, 1, 1, 1]),
    "qconv_s8_perchannel_stride": lambda: qlinearconv(I8, per_channel=True, ydt=I8,
                                                      strides=[2, 2], pads=[1, 0, 1, 2]),
    "qconv_u8_weights_zp": lambda: qlinearconv(U8, U8, wz=140, pads=[0, 1, 0, 1]),
    "qconv_depthwise": lambda: qlinearconv(x_shape=(1, 4, 9, 8), w_shape=(4, 1, 3, 3),
                                           group=4, pads=[1, 1, 1, 1], per_channel=True),
    "qconv_dw_s8_stride2_asym_pads": lambda: depthwise(I8, (1, 5, 10, 9), strides=[2, 2],
                                                       pads=[0, 1, 2, 1]),
    "qconv_dw_u8_dilated": lambda: depthwise(U8, (1, 4, 11, 12), dilations=[2, 2],
                                             pads=[2, 2, 2, 2]),
    "qconv_dw_5x5_stride_1x2": lambda: depthwise(U8, (1, 3, 9, 13), (5, 5), strides=[1, 2],
                                                 pads=[2, 2, 2, 1]),
    "qconv_dw_s8_unpaired_per_tensor": lambda: depthwise(I8, (1, 4, 7, 7), per_channel=False,
                                                         min_weight=True, pads=[1, 1, 1, 1]),
    "qconv_dw_batch2": lambda: depthwise(U8, (2, 6, 6, 5), pads=[1, 1, 1, 1]),
    "qconv_dw_7x7_valid": lambda: depthwise(I8, (1, 3, 12, 10), (7, 7)),
    "qconv_dw_1d": lambda: depthwise(U8, (1, 5, 17), (3,), pads=[1, 2]),
    "qconv_dw_tiny_planes": lambda: depthwise(I8, (1, 40, 2, 2), strides=[2, 2],
                                              pads=[1, 1, 1, 1]),
    "qconv_channel_multiplier_2": lambda: qlinearconv(x_shape=(1, 3, 6, 6),
                                                      w_shape=(6, 1, 3, 3), group=3,
                                                      pads=[1, 1, 1, 1]),
    "qconv_grouped_dilated": lambda: qlinearconv(x_shape=(2, 4, 9, 9), w_shape=(6, 2, 3, 3),
                                                 group=2, dilations=[2, 2], bias=False),
    "qconv_1x1_int8_direct": lambda: qlinearconv(I8, x_shape=(1, 5, 4, 7),
                                                 w_shape=(9, 5, 1, 1), ydt=I8),
    # more output channels than output pixels: the RVV core's vectors run along the channels
    # (14-, 7-, 4-... wide pixel blocks) at every sampled VLEN
    "qconv_7x7_map_many_channels": lambda: qlinearconv(I8, x_shape=(1, 8, 7, 7),
                                                       w_shape=(64, 8, 3, 3), ydt=I8,
                                                       pads=[1, 1, 1, 1], per_channel=True),
    "qmatmul_tall_narrow": lambda: qlinearmatmul(U8, I8, (70, 16), (16, 5)),
    # shapes that the kernels split into several parts (qgemm_parts.part_blocks), which the host's
    # 1, 2 and 3 threads and QEMU's share out: blocks of output pixels whose rows of im2col
    # start and end inside an output row (uint8 weights: column sums per block), blocks of
    # output channels (160 on a 7 x 7 map: 128 + 32), a pointwise conv reading blocks of its
    # input in place, and matrix products in row x column blocks with run-time uint8 b
    # (flipped per block) and both zero-point sums
    "qconv_split_pixels_u8_weights_zp": lambda: qlinearconv(
        U8, U8, x_shape=(1, 3, 20, 19), w_shape=(6, 3, 3, 3), wz=140, pads=[1, 1, 1, 1],
        strides=[1, 1]),
    "qconv_split_channels_7x7": lambda: qlinearconv(I8, x_shape=(1, 8, 7, 7),
                                                    w_shape=(160, 8, 3, 3), ydt=I8,
                                                    pads=[1, 1, 1, 1], per_channel=True),
    "qconv_split_1x1_direct_batch2": lambda: qlinearconv(I8, x_shape=(2, 5, 16, 17),
                                                         w_shape=(9, 5, 1, 1), ydt=I8),
    "qconv_split_grouped_strided": lambda: qlinearconv(x_shape=(1, 4, 33, 31),
                                                       w_shape=(4, 2, 3, 3), group=2,
                                                       strides=[2, 1], pads=[1, 0, 1, 2]),
    "qmatmul_split_runtime_u8_batched": lambda: qlinearmatmul(U8, U8, (2, 3, 8), (2, 8, 300),
                                                              const_b=False),
    "matmulinteger_split_rows_cols": lambda: matmulinteger(U8, U8, False, (150, 16), (16, 200)),
    "qconv_1d": lambda: qlinearconv(x_shape=(1, 3, 11), w_shape=(5, 3, 3), pads=[1, 1]),
    "convinteger_u8": lambda: convinteger(pads=[1, 0, 1, 1]),
    "convinteger_s8_zero_zp": lambda: convinteger(I8, I8, 0, 0, strides=[1, 2]),
    "qmatmul_u8s8_const": lambda: qlinearmatmul(),
    "qmatmul_s8_percol_3d": lambda: qlinearmatmul(I8, I8, (2, 3, 12), (12, 7), per_col=True,
                                                  ydt=I8),
    "qmatmul_u8u8_runtime_batched": lambda: qlinearmatmul(U8, U8, (2, 3, 8), (2, 8, 5),
                                                          const_b=False),
    "matmulinteger_runtime": lambda: matmulinteger(),
    "matmulinteger_const_s8": lambda: matmulinteger(U8, I8, True),
    "qgemm_transb_requant": lambda: qgemm(),
    "convinteger_runtime_zp": lambda: runtime_zp("conv"),
    "matmulinteger_runtime_zp": lambda: runtime_zp("matmul"),
    "qgemm_float_out": lambda: qgemm(y_scale=False, trans_b=0, adt=I8, per_col=False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_integer_gemm_ops_equal_onnxruntime(case, op_executor):
    model, feeds = CASES[case]()
    want = run_ort(model, feeds)
    got = run_rvvkit(model, feeds, on=op_executor)
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
        if w.dtype == np.float32:
            np.testing.assert_allclose(got[name], w, rtol=1e-6, atol=1e-6)
        else:
            assert np.array_equal(got[name], w), (case, np.argwhere(got[name] != w)[:5])


def test_full_range_operands_sum_exactly(op_executor):
    """uint8 x int8 with full-range operands (where onnxruntime's x86 kernels saturate pairs of
    products): rvvkit equals exact integer arithmetic."""
    from rvvkit.ops.quant.products import matmul_sum
    a = q((6, 40), U8, 20)
    b = q((40, 9), I8, 21, -127, 127)
    inits = {"az": np.array(3, U8), "bz": np.array(0, I8), "b": b}
    mod = make_model([node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], [_vi("a", a)],
                     _out(np.int32), inits)
    got = run_rvvkit(mod, {"a": a}, on=op_executor)["y"]
    want = (a.astype(np.int64) - 3) @ b.astype(np.int64)
    assert np.array_equal(got, want) and np.array_equal(matmul_sum(a, 3, b, 0), want)


def qdq_model(kind):
    """A QDQ group as quantize_static writes it: DQ(x), DQ(w), DQ(int32 bias) -> op [-> Relu]
    -> Q, then DQ to a float output ("conv_dw": a depthwise Conv)."""
    x = q((1, 3, 6, 5) if kind.startswith("conv") else (4, 10), U8, 30)
    w_shape = {"conv_dw": (3, 1, 3, 3), "gemm": (10, 6), "matmul": (10, 6)}.get(kind, (5, 3, 3, 3))
    w = q(w_shape, I8, 31, -64, 64)
    n_out = w_shape[0] if kind.startswith("conv") else 6
    inits = {"xs": f32(0.04), "xz": np.array(120, U8), "w": w,
             "ws": np.linspace(0.01, 0.02, n_out).astype(np.float32) if kind != "matmul"
             else f32(0.015),
             "wz": np.zeros(n_out, I8) if kind != "matmul" else np.array(0, I8),
             "b": q((n_out,), np.int32, 32, -300, 300), "ys": f32(0.3), "yz": np.array(128, U8)}
    inits["bs"] = (inits["ws"] * np.float32(0.04)).astype(np.float32)
    inits["bz"] = np.zeros(inits["bs"].shape, np.int32)
    axis = {"axis": 0} if kind.startswith("conv") else {"axis": 1}
    nodes = [node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
             node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], **(axis if kind != "matmul"
                                                                    else {})),
             node("DequantizeLinear", ["b", "bs", "bz"], ["bf"],
                  **({"axis": 0} if kind != "matmul" else {}))]
    if kind.startswith("conv"):
        nodes.append(node("Conv", ["xf", "wf", "bf"], ["c"], pads=[1, 1, 1, 1],
                          group=3 if kind == "conv_dw" else 1))
    elif kind == "gemm":
        nodes.append(node("Gemm", ["xf", "wf", "bf"], ["c"]))
    else:
        nodes.append(node("MatMul", ["xf", "wf"], ["c"]))
    last = "c"
    if kind == "conv_relu":
        nodes.append(node("Relu", ["c"], ["r"]))
        last = "r"
    nodes += [node("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
              node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    mod = make_model(nodes, [_vi("x", x)], _out(np.float32), inits)
    return mod, {"x": x}


@pytest.mark.parametrize("kind", ["conv", "conv_relu", "conv_dw", "gemm", "matmul"])
def test_qdq_groups_run_as_integer_kernels(kind, op_executor):
    """The group becomes one integer kernel (the plan says so) and agrees with onnxruntime
    within one output quantum."""
    import rvvkit
    model, feeds = qdq_model(kind)
    art = rvvkit.build(model)
    ops = [s["op"] for s in art.meta["plan"]]
    assert ("rvvkit.QConv" if kind.startswith("conv") else "rvvkit.QMatMul") in ops, ops
    want = run_ort(model, feeds)["y"]
    got = run_rvvkit(model, feeds, artifact=art, on=op_executor)["y"]
    assert np.abs(got - want).max() <= 0.3 * 1.0001, np.abs(got - want).max()
    assert np.mean(got != want) <= 0.05
    if kind == "conv_relu":
        assert got.min() >= 0.0
