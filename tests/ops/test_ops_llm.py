"""Operator cases of decoder blocks: MatMulNBits (4 and 8 bits, blocks 16..128, zero points
packed, as floats or absent, a bias, K not a multiple of the block), SimplifiedLayerNormalization,
SkipSimplifiedLayerNormalization (bias, the sum output or not) and GroupQueryAttention (a
prompt and a decoding step, rotary halves and interleaved pairs, grouped heads), each a tiny
model run on the sample executors and compared with onnxruntime's contrib kernels."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rvvkit
from conftest import assert_matches, rand, run_ort
from nbits_cases import MS, f32, ms_model, nbits_model
from rvvkit.ops.llm import nbits
from rvvkit.errors import ExecutionError

NBITS_CASES = [
    # id, rows, K, N, bits, block, zero points ("", "u8", "f32"), bias
    ("b4_k64_gemv", 1, 64, 40, 4, 32, "", False),
    ("b4_zp_rows3", 3, 96, 70, 4, 32, "u8", True),
    ("b4_blk16_odd_blocks", 2, 48, 33, 4, 16, "u8", False),
    ("b4_blk128_tail", 1, 200, 24, 4, 128, "", False),
    ("b8_blk64", 2, 128, 65, 8, 64, "", True),
    ("b8_zp_tail", 1, 80, 17, 8, 32, "u8", False),
    ("b4_float_zp", 1, 64, 20, 4, 32, "f32", False),
    # accuracy_level 4: int8 activations, the column-vector kernel (odd N: a lone high half)
    ("acc4_b4_gemv", 1, 256, 130, 4, 32, "", False),
    ("acc4_b4_zp_tail_bias", 3, 200, 77, 4, 64, "u8", True),
    ("acc4_b8_bias", 1, 128, 65, 8, 32, "", True),
    ("acc4_b8_zp_rows2", 2, 96, 40, 8, 32, "u8", False),
    ("acc4_b4_blk16_float_zp", 1, 64, 33, 4, 16, "f32", False),   # computed in float
    # rows two at a time and a last odd one; 16-bit sums that wrap (4 bits, blocks <= 32)
    ("acc4_b4_rows5_zp_bias", 5, 96, 77, 4, 32, "u8", True),
    ("acc4_b4_blk16_rows4", 4, 64, 33, 4, 16, "", False),
    ("acc4_b8_rows3_zp_bias", 3, 128, 65, 8, 32, "u8", True),
    ("acc4_b4_rows2_k_tail", 2, 200, 40, 4, 32, "", False),
    # wide: parts of two whole 32-byte vectors and a tail (the host's AVX2 form), the last
    # part's high half stopping short
    ("acc4_b4_wide_zp_bias", 2, 64, 301, 4, 32, "u8", True),
    ("acc4_s16_b8_wide_blk16", 3, 64, 150, 8, 16, "", True),
    # scales rounded to bfloat16 values: stored in 16 bits, widened as they are read
    ("s16_b4_gemv", 1, 64, 40, 4, 32, "", False),
    ("s16_b8_bias", 2, 128, 65, 8, 64, "", True),
    ("acc4_s16_b4_zp", 2, 96, 71, 4, 32, "u8", True),
    ("acc4_s16_b8", 1, 128, 33, 8, 32, "", False),
    # scales that are float16 values (a float16 model's): 16 bits, widened as they are read
    ("h16_b4_gemv", 1, 64, 40, 4, 32, "", False),
    ("h16_b8_zp_bias", 2, 128, 65, 8, 64, "u8", True),
    ("acc4_h16_b4", 1, 256, 130, 4, 32, "", False),
]


@pytest.mark.parametrize("rows, k, n, bits, block, zp, bias", [c[1:] for c in NBITS_CASES],
                         ids=[c[0] for c in NBITS_CASES])
def test_matmul_nbits(rows, k, n, bits, block, zp, bias, op_executor, request):
    m, feeds = nbits_model(request.node.callspec.id, rows, k, n, bits, block, zp, bias)
    assert_matches(m, feeds, on=op_executor, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows, k, n, bits, block", [(1, 256, 130, 4, 32), (3, 96, 77, 4, 32),
                                                     (2, 128, 65, 8, 16)],
                         ids=["gemv_b4", "rows3_b4_tail", "rows2_b8_blk16"])
def test_matmul_nbits_int8_activations_with_float_zero_points(rows, k, n, bits, block,
                                                              op_executor):
    """rvvkit's own attribute (a GGUF file's Q4_K, rvvkit/llm/gguf/graph.py): int8
    activations, as llama.cpp takes them, with float zero points, which onnxruntime's
    accuracy level 4 computes in float; the reference is the operator's numpy meaning."""
    m, feeds = nbits_model("acc4_i8f", rows, k, n, bits, block, "f32", False)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    want = nbits.matmul_int8_act(feeds["a"], inits["b"], inits["scales"], inits["zp"], k, n,
                                 bits, block)
    art = rvvkit.build(m)
    assert any(s["kernel"].endswith("matmul_nbits_i8") for s in art.meta["plan"])
    got = op_executor.run(art, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("case, rows, k, n, bits, block, zp", [
    ("acc4_b4", 1, 896, 130, 4, 32, ""), ("acc4_b4_zp", 3, 256, 77, 4, 32, "u8"),
    ("acc4_b8", 2, 192, 65, 8, 32, "")], ids=["gemv_b4", "rows3_b4_zp", "rows2_b8"])
def test_matmul_nbits_the_emulator_gives_the_hosts_floats(case, rows, k, n, bits, block, zp):
    """The CUDA source on the CPU emulator and the host's C give the same floats bit for bit
    (the emulator is built with the host's tuning and contracts multiply-adds as the host's
    build and nvcc do): an int8 activation an ulp from a rounding boundary then rounds alike,
    where a last-bit difference used to flip it and move a 24-layer decoder's logits."""
    from executors import ALL
    emu = next(e for e in ALL if e.on == "cuda-emu")
    if emu.why_not():
        pytest.skip(emu.why_not())
    m, feeds = nbits_model(case, rows, k, n, bits, block, zp, True)
    art = rvvkit.build(m)
    with rvvkit.load(art, on="host") as host, rvvkit.load(art, on="cuda-emu") as cuda:
        np.testing.assert_array_equal(host.run(feeds)["y"], cuda.run(feeds)["y"])


_TIE_BITS = {}


def _tie_activations() -> np.ndarray:
    """Two rows of 64 activations whose int8 form (x * 127 / 3, rounded to nearest even) is
    one value from the rounded product and the other from the exact one: each block's largest
    is 3.0, the rest lie an ulp or so from (k + 0.5) * 3 / 127."""
    inv = np.float32(127) / np.float32(3.0)
    found = []
    for k in range(-126, 126):
        x = np.float32((k + 0.5) / float(inv))
        for x in (np.nextafter(x, np.float32(-9)), x, np.nextafter(x, np.float32(9))):
            if np.rint(np.float64(np.float32(x * inv))) != np.rint(np.float64(x) *
                                                                  np.float64(inv)):
                found.append(x)
    assert len(found) >= 126, len(found)   # the input keeps its point
    rows = np.array(found[:126], np.float32).reshape(2, 63)
    return np.concatenate([np.full((2, 1), 3.0, np.float32), rows], axis=1)


def test_int8_activations_round_the_rounded_product(executor):
    """The int8 form of an activation is the product x * 127 / amax rounded to a float, then
    to the nearest integer, on every executor (RVV: vfmul, vfcvt): on activations where the
    exact product rounds the other way, every executor gives the host's bits (a compiler
    fusing the two roundings gave the host other int8 values, issue 39)."""
    if not _TIE_BITS:
        m, _ = nbits_model("acc4", 2, 64, 24, 4, 32, "", False)
        feeds = {"a": _tie_activations()}
        _TIE_BITS.update(art=rvvkit.build(m), feeds=feeds)
        _TIE_BITS["host"] = run_host(_TIE_BITS["art"], feeds)
    got = executor.run(_TIE_BITS["art"], _TIE_BITS["feeds"])["y"]
    np.testing.assert_array_equal(got.view(np.int32), _TIE_BITS["host"].view(np.int32),
                                  err_msg=executor.id)


def run_host(art, feeds) -> np.ndarray:
    with rvvkit.load(art, on="host") as sess:
        return sess.run(feeds)["y"]


def _half_nbits_model(k, n, half_scales=True, half_io=True):
    w = rand(k, n, seed=1)
    b, scales, _ = nbits.quantize(w, 4, 32)
    scales = scales.astype(np.float16).astype(np.float32)
    if not half_scales:     # one scale off float16's grid: all stay float32
        scales.flat[0] = np.nextafter(scales.flat[0], np.float32(1))
    dtype = np.float16 if half_io else np.float32
    code = TensorProto.FLOAT16 if half_io else TensorProto.FLOAT
    node = helper.make_node("MatMulNBits", ["a", "b", "scales"], ["y"], domain=MS, K=k, N=n,
                            bits=4, block_size=32)
    io = [helper.make_tensor_value_info("a", code, [2, k])], \
        [helper.make_tensor_value_info("y", code, [2, n])]
    return ms_model([node], *io, {"b": b, "scales": scales.ravel().astype(dtype)})


def test_half_matmul_nbits_matches_onnxruntime(op_executor):
    """A float16 MatMulNBits (activations, scales and output float16), as the builder's fp16
    precision writes it: computed in float32, within half's precision of onnxruntime's."""
    m = _half_nbits_model(96, 70)
    a = rand(2, 96, seed=2).astype(np.float16)
    got = op_executor.run(rvvkit.build(m), {"a": a})["y"]
    want = run_ort(m, {"a": a})["y"]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2,
                               atol=1e-2 * float(np.abs(want).max()))


def test_half_scales_are_stored_in_16_bits():
    k, n = 256, 64
    half = rvvkit.build(_half_nbits_model(k, n, half_io=False)).weights.nbytes
    full = rvvkit.build(_half_nbits_model(k, n, half_scales=False, half_io=False)).weights.nbytes
    assert full - half >= 2 * (k // 32) * n - 128


def test_nbits_format_round_trips():
    w = rand(70, 9, seed=5)
    for bits, tol in ((4, 0.2), (8, 0.02)):
        for zp in (False, True):
            for bf16 in (False, True):
                b, s, z = nbits.quantize(w, bits, 32, zp, bf16_scales=bf16)
                back = nbits.dequantize(b, s, z, 70, 9, bits, 32)
                assert back.shape == w.shape
                assert np.abs(back - w).max() < tol * np.abs(w).max()
                assert nbits.is_bf16(s) == bf16


def test_bf16_scales_round_up_to_the_next_bfloat16():
    x = np.array([1.0, 1.0 + 2 ** -20, 3e-3, 7.123], np.float32)
    up = nbits.bf16_ceil(x)
    assert nbits.is_bf16(up) and (up >= x).all() and up[0] == 1.0
    assert ((up - x) / x < 2 ** -7).all()
    assert (nbits.bf16_bits(up).astype(np.uint32) << 16).view(np.float32).tolist() == \
        up.tolist()


@pytest.mark.parametrize("skip, bias, sum_out", [(False, False, False), (True, False, True),
                                                 (True, True, True), (True, True, False)],
                         ids=["rms", "skip_sum", "skip_bias_sum", "skip_bias"])
def test_simplified_layer_norms(skip, bias, sum_out, op_executor):
    shape, inits = [2, 3, 40], {"gamma": rand(40, seed=1)}
    ins = [f32("x", shape)]
    feeds = {"x": rand(*shape)}
    if not skip:
        node = helper.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["y"],
                                epsilon=1e-5, axis=-1)
        outs = [f32("y", shape)]
    else:
        ins.append(f32("s", shape))
        feeds["s"] = rand(*shape, seed=4)
        names = ["x", "s", "gamma"] + (["bias"] if bias else [])
        if bias:
            inits["bias"] = rand(40, seed=2)
        node = helper.make_node("SkipSimplifiedLayerNormalization", names,
                                ["y", "", "", "sum"] if sum_out else ["y"], domain=MS,
                                epsilon=1e-5)
        outs = [f32("y", shape)] + ([f32("sum", shape)] if sum_out else [])
    assert_matches(ms_model([node], ins, outs, inits), feeds, on=op_executor)


def _gqa_model(seq, heads, kv_heads, head, max_seq, rotary, interleaved):
    names = ["q", "k", "v", "pk", "pv", "seqlens_k", "total"]
    inits = {}
    if rotary:
        ang = np.arange(64)[:, None] * (0.3 / (1 + np.arange(head // 2)))[None, :]
        inits = {"cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}
        names += ["cos", "sin"]
    node = helper.make_node("GroupQueryAttention", names, ["out", "present_k", "present_v"],
                            domain=MS, num_heads=heads, kv_num_heads=kv_heads,
                            do_rotary=int(rotary), rotary_interleaved=int(interleaved))
    cache = [1, kv_heads, max_seq, head]
    ins = [f32("q", [1, seq, heads * head]), f32("k", [1, seq, kv_heads * head]),
           f32("v", [1, seq, kv_heads * head]), f32("pk", cache), f32("pv", cache),
           helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
           helper.make_tensor_value_info("total", TensorProto.INT32, [])]
    # the presents are not graph outputs here: the op's own output is what is compared (the
    # caches are checked through whole decoders, tests/llm)
    return ms_model([node], ins, [f32("out", [1, seq, heads * head])], inits)


GQA_CASES = [
    # id, new tokens, tokens already cached, heads, kv heads, head, bound, rotary, interleaved
    # (onnxruntime's rotary needs head sizes in multiples of 16)
    ("prompt5_rotary", 5, 0, 4, 2, 16, 16, True, False),
    ("decode_past9", 1, 9, 6, 2, 16, 16, True, False),
    ("decode_interleaved_mqa", 1, 4, 4, 1, 32, 10, True, True),
    ("prompt3_plain", 3, 0, 2, 2, 16, 8, False, False),
]


@pytest.mark.parametrize("seq, past, heads, kv_heads, head, max_seq, rotary, interleaved",
                         [c[1:] for c in GQA_CASES], ids=[c[0] for c in GQA_CASES])
def test_group_query_attention(seq, past, heads, kv_heads, head, max_seq, rotary, interleaved,
                               op_executor):
    m = _gqa_model(seq, heads, kv_heads, head, max_seq, rotary, interleaved)
    cache = (1, kv_heads, max_seq, head)
    feeds = {"q": rand(1, seq, heads * head, seed=1), "k": rand(1, seq, kv_heads * head, seed=2),
             "v": rand(1, seq, kv_heads * head, seed=3), "pk": rand(*cache, seed=4),
             "pv": rand(*cache, seed=5), "seqlens_k": np.array([past + seq - 1], np.int32),
             "total": np.array(past + seq, np.int32)}
    assert_matches(m, feeds, on=op_executor, rtol=1e-4, atol=1e-5)


def test_group_query_attention_beyond_its_bound_is_reported(op_executor):
    m = _gqa_model(1, 2, 1, 16, 6, True, False)
    feeds = {"q": rand(1, 1, 32), "k": rand(1, 1, 16), "v": rand(1, 1, 16),
             "pk": rand(1, 1, 6, 16), "pv": rand(1, 1, 6, 16),
             "seqlens_k": np.array([6], np.int32), "total": np.array(7, np.int32)}
    with pytest.raises(ExecutionError, match="GroupQueryAttention_0.*cache length"):
        op_executor.run(rvvkit.build(m), feeds)


@pytest.mark.parametrize("interleaved, shape", [(0, (1, 3, 64)), (1, (2, 2, 64)),
                                                (0, (1, 4, 3, 16))],
                         ids=["halves_3d", "pairs_3d_batch2", "halves_4d"])
def test_ms_rotary_embedding(interleaved, shape, op_executor):
    ang = np.arange(32)[:, None] * (0.3 / (1 + np.arange(8)))[None, :]
    inits = {"cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)}
    batch, seq = shape[0], shape[-2] if len(shape) == 4 else shape[1]
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS,
                            interleaved=interleaved)
    pos = helper.make_tensor_value_info("pos", TensorProto.INT64, [batch, seq])
    m = ms_model([node], [f32("x", list(shape)), pos], [f32("y", list(shape))], inits)
    feeds = {"x": rand(*shape), "pos": np.random.default_rng(2).integers(0, 32, (batch, seq))}
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("bits, block, index", [(4, 32, TensorProto.INT64),
                                                (8, 16, TensorProto.INT32),
                                                (4, 128, TensorProto.INT32)],
                         ids=["b4_blk32_i64", "b8_blk16_i32", "b4_blk128_i32"])
def test_gather_block_quantized(bits, block, index, op_executor):
    """Token embeddings at 4/8 bits (onnxruntime's uint8 form, default zero points), negative
    indices counted from the end, as onnxruntime reads them; bfloat16-exact scales at 4 bits
    (stored in 16 bits)."""
    rows, k = 37, 128
    table = rand(rows, k, seed=4)
    b, scales, _ = nbits.quantize(table.T, bits, block, bf16_scales=bits == 4)
    node = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["y"],
                            domain=MS, bits=bits, block_size=block, gather_axis=0,
                            quantize_axis=1)
    ids = helper.make_tensor_value_info("ids", index, [2, 3])
    m = ms_model([node], [ids], [f32("y", [2, 3, k])],
                 {"data": b.reshape(rows, -1), "scales": scales})
    idx = np.array([[0, 5, 36], [-1, -37, 3]], helper.tensor_dtype_to_np_dtype(index))
    assert_matches(m, {"ids": idx}, on=op_executor)


def _tied_model(rows, k, bits, block, bf16, tied=True):
    """Token ids -> GatherBlockQuantized rows -> MatMulNBits by the same table (an LM head tied
    to the embedding), or (not `tied`) by another table of the same shape."""
    table = rand(rows, k, seed=4)
    b, scales, _ = nbits.quantize(table.T, bits, block, bf16_scales=bf16)
    hb, hs, _ = (b, scales, None) if tied else \
        nbits.quantize(rand(rows, k, seed=9).T, bits, block, bf16_scales=bf16)
    gather = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["h"],
                              domain=MS, bits=bits, block_size=block)
    head = helper.make_node("MatMulNBits", ["h", "head_q", "head_s"], ["y"], domain=MS, K=k,
                            N=rows, bits=bits, block_size=block)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])
    return ms_model([gather, head], [ids], [f32("y", [1, 3, rows])],
                    {"data": b.reshape(rows, -1), "scales": scales,
                     "head_q": hb, "head_s": hs.ravel()})


@pytest.mark.parametrize("bits, bf16", [(4, True), (8, False)], ids=["b4_s16", "b8_f32"])
def test_tied_embedding_and_head_share_one_table(bits, bf16, op_executor):
    """The embedding gathers from the LM head's layout of the same codes: one copy stored."""
    rows, k = 300, 64
    m = _tied_model(rows, k, bits, 32, bf16)
    idx = np.array([[0, 299, -2]], np.int64)
    assert_matches(m, {"ids": idx}, on=op_executor, rtol=1e-4, atol=1e-4)
    codes = rows * k * bits // 8
    tied = rvvkit.build(m).weights.nbytes
    untied = rvvkit.build(_tied_model(rows, k, bits, 32, bf16, tied=False)).weights.nbytes
    assert untied - tied >= codes


def test_gather_block_quantized_index_outside_the_table_is_reported(op_executor):
    b, scales, _ = nbits.quantize(rand(8, 32).T, 4, 32)   # 8 rows of 32
    node = helper.make_node("GatherBlockQuantized", ["data", "ids", "scales"], ["y"],
                            domain=MS, bits=4, block_size=32)
    m = ms_model([node], [helper.make_tensor_value_info("ids", TensorProto.INT64, [1])],
                 [f32("y", [1, 32])], {"data": b.reshape(8, -1), "scales": scales})
    with pytest.raises(ExecutionError, match="GatherBlockQuantized.*outside the table"):
        op_executor.run(rvvkit.build(m), {"ids": np.array([8], np.int64)})


@pytest.mark.parametrize("scale, bias", [(0.0, True), (0.3, False)], ids=["bias", "scaled"])
def test_multi_head_attention_3d(scale, bias, op_executor):
    """com.microsoft MultiHeadAttention with 3-D q/k/v (onnxruntime-genai's float16 CPU form,
    frontend/ms_attention.py writes it out as standard ops): 3 new tokens over 7 keys."""
    heads, head, s, t = 2, 8, 3, 7
    names = ["q", "k", "v"] + (["", "", "bias"] if bias else [])
    node = helper.make_node("MultiHeadAttention", names, ["y"], domain=MS, num_heads=heads,
                            scale=scale)
    ins = [f32("q", [1, s, heads * head]), f32("k", [1, t, heads * head]),
           f32("v", [1, t, heads * head])] + ([f32("bias", [1, heads, s, t])] if bias else [])
    model = ms_model([node], ins, [f32("y", [1, s, heads * head])], {})
    feeds = {"q": rand(1, s, heads * head, seed=1), "k": rand(1, t, heads * head, seed=2),
             "v": rand(1, t, heads * head, seed=3)}
    if bias:
        feeds["bias"] = rand(1, heads, s, t, seed=4)
    assert_matches(model, feeds, on=op_executor)


def test_multi_head_attention_in_other_forms_is_refused_by_name():
    """A 4-D (BNSH) key is not the 3-D form the frontend writes out: the op is named."""
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS,
                            num_heads=2)
    model = ms_model([node], [f32("q", [1, 3, 16]), f32("k", [1, 2, 7, 8]),
                              f32("v", [1, 2, 7, 8])], [f32("y", [1, 3, 16])], {})
    with pytest.raises(rvvkit.errors.RvvkitError, match="MultiHeadAttention"):
        rvvkit.build(model)
