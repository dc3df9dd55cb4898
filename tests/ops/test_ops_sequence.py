"""Operator cases: ConvTranspose, MatMul broadcasting forms, Einsum, RNN/GRU/LSTM, Attention
(with KV cache, qk_matmul_output, nonpad_kv_seqlen, sliding window).

Each case is a tiny model run on every executor of the sample (`op_executor`: host, QEMU at
two VLENs, the CUDA emulator) and compared with onnxruntime. Shapes are awkward on purpose."""
import pytest
from onnx import helper, numpy_helper

from conftest import assert_matches, make_model, rand

node = helper.make_node


# ---------------------------------------------------------------------------------------------
# ConvTranspose

CONVT_CASES = [
    # id, x shape, w shape, attrs, bias
    ("2d_k3s2", (1, 3, 5, 4), (3, 2, 3, 3), dict(strides=[2, 2]), True),
    ("2d_pads_outpad", (2, 2, 4, 5), (2, 3, 3, 3),
     dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 0]), False),
    ("2d_k2s2_upsample", (1, 4, 3, 3), (4, 4, 2, 2), dict(strides=[2, 2]), True),
    ("2d_group2_dil2", (1, 4, 5, 5), (4, 1, 3, 2), dict(group=2, dilations=[2, 1],
                                                       pads=[0, 1, 1, 0]), True),
    ("2d_output_shape", (1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8]),
     False),
    ("2d_same_upper", (1, 2, 3, 4), (2, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER"),
     True),
    ("1d_k4s2_pad1", (2, 3, 7), (3, 5, 4), dict(strides=[2], pads=[1, 1]), True),
    ("3d_k2s2", (1, 2, 3, 2, 3), (2, 3, 2, 3, 2), dict(strides=[2, 1, 2], pads=[0, 1, 1, 0, 0, 0]),
     True),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, bias",
                         [c[1:] for c in CONVT_CASES], ids=[c[0] for c in CONVT_CASES])
def test_conv_transpose(x_shape, w_shape, attrs, bias, op_executor):
    inits = {"w": rand(*w_shape, seed=1)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand(w_shape[1] * attrs.get("group", 1), seed=2)
        ins.append("b")
    m = make_model([node("ConvTranspose", ins, ["y"], **attrs)], [("x", x_shape)], ["y"], inits)
    assert_matches(m, {"x": rand(*x_shape)}, on=op_executor)


# ---------------------------------------------------------------------------------------------
# RNN, GRU, LSTM (weights are initializers, as exported models have them)

RNN_CASES = [
    # id, op, (seq, batch, input, hidden), attrs, optional inputs present, outputs
    ("lstm_fwd", "LSTM", (5, 2, 3, 4), {}, "b", "y yh yc"),
    ("lstm_bidir_init", "LSTM", (4, 3, 5, 3), dict(direction="bidirectional"), "b h0 c0",
     "y yh yc"),
    ("lstm_reverse_peep_clip", "LSTM", (6, 1, 2, 5), dict(direction="reverse", clip=0.7),
     "b p", "y yh"),
    ("lstm_yh_only", "LSTM", (3, 2, 4, 3), {}, "b h0", "- yh"),
    ("lstm_seqlens", "LSTM", (5, 3, 2, 3), dict(direction="bidirectional"), "b sl", "y yh yc"),
    ("gru_fwd_lbr0", "GRU", (5, 2, 3, 4), {}, "b", "y yh"),
    ("gru_bidir_lbr1", "GRU", (4, 2, 3, 5), dict(direction="bidirectional",
                                               linear_before_reset=1), "b h0", "y yh"),
    ("gru_reverse_nobias_acts", "GRU", (3, 1, 4, 2),
     dict(direction="reverse", activations=["HardSigmoid", "Relu"], activation_alpha=[0.3],
          activation_beta=[0.4]), "", "y"),
    ("rnn_tanh", "RNN", (6, 2, 3, 4), {}, "b h0", "y yh"),
    ("rnn_bidir_relu", "RNN", (3, 2, 2, 3), dict(direction="bidirectional",
                                               activations=["Relu", "Tanh"]), "b", "y yh"),
]


def _rnn_model(op, dims, attrs, opt, outs):
    from onnx import TensorProto
    import numpy as np
    seq, batch, inp, hid = dims
    nd = 2 if attrs.get("direction") == "bidirectional" else 1
    ng = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    layout = attrs.get("layout", 0)
    xs = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    st = (nd, batch, hid) if layout == 0 else (batch, nd, hid)
    inits = {"w": rand(nd, ng * hid, inp, seed=1, scale=0.5),
             "r": rand(nd, ng * hid, hid, seed=2, scale=0.5)}
    extra = {"b": rand(nd, 2 * ng * hid, seed=3, scale=0.5),
             "sl": np.array([5, 2, 4][:batch], np.int32), "h0": rand(*st, seed=4),
             "c0": rand(*st, seed=5), "p": rand(nd, 3 * hid, seed=6, scale=0.5)}
    names = ["x", "w", "r"] + [n if n in opt.split() else "" for n in ("b", "sl", "h0", "c0", "p")]
    for n in opt.split():
        inits[n] = extra[n]
    while not names[-1]:
        names.pop()
    outnames = ["" if o == "-" else o for o in outs.split()]
    nodes = [node(op, names, outnames, hidden_size=hid, **attrs)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                   [o for o in outnames if o], inits, opset=14)
    return m, {"x": rand(*xs, seed=7)}


@pytest.mark.parametrize("op, dims, attrs, opt, outs", [c[1:] for c in RNN_CASES],
                         ids=[c[0] for c in RNN_CASES])
def test_recurrent(op, dims, attrs, opt, outs, op_executor):
    m, feeds = _rnn_model(op, dims, attrs, opt, outs)
    assert_matches(m, feeds, on=op_executor)



@pytest.mark.parametrize("op, attrs", [("LSTM", dict(direction="bidirectional")),
                                       ("GRU", {}), ("GRU", dict(linear_before_reset=1)),
                                       ("RNN", dict(direction="reverse"))],
                         ids=["lstm_bidir", "gru_lbr0", "gru_lbr1", "rnn_reverse"])
def test_recurrent_runtime_weights(op, attrs, op_executor):
    """W and R fed at run time (not initializers): the kernel repacks them itself."""
    from onnx import TensorProto
    m, feeds = _rnn_model(op, (4, 2, 5, 6), attrs, "b h0", "y yh")
    for name in ("w", "r"):
        t = next(t for t in m.graph.initializer if t.name == name)
        feeds[name] = numpy_helper.to_array(t)
        m.graph.initializer.remove(t)
        m.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                           feeds[name].shape))
    assert_matches(m, feeds, on=op_executor)

# ---------------------------------------------------------------------------------------------
# MatMul broadcasting forms and Einsum

MATMUL_CASES = [
    ("4d_x_4d", (2, 3, 5, 4), (2, 3, 4, 6)),
    ("4d_x_2d", (2, 3, 5, 4), (4, 7)),
    ("2d_x_3d", (5, 4), (3, 4, 6)),
    ("broadcast_batch", (2, 1, 5, 4), (1, 3, 4, 6)),
    ("1d_x_3d", (4,), (3, 4, 6)),
    ("3d_x_1d", (3, 5, 4), (4,)),
]


@pytest.mark.parametrize("a_shape, b_shape", [c[1:] for c in MATMUL_CASES],
                         ids=[c[0] for c in MATMUL_CASES])
def test_matmul_runtime_operands(a_shape, b_shape, op_executor):
    m = make_model([node("MatMul", ["a", "b"], ["y"])], [("a", a_shape), ("b", b_shape)], ["y"])
    assert_matches(m, {"a": rand(*a_shape), "b": rand(*b_shape, seed=1)}, on=op_executor)


EINSUM_CASES = [
    ("bij,bjk->bik", [(2, 3, 5), (2, 5, 4)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 7, 8)]),
    ("bhqk,bhkd->bhqd", [(2, 2, 5, 7), (2, 2, 7, 3)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ji,jk->ik", [(4, 3), (4, 5)]),
    ("bi,bi->b", [(3, 6), (3, 6)]),
    ("ij->ji", [(3, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 2)]),
    ("bid,bjd->bij", [(2, 1, 4), (2, 3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij,kj,k->i", [(3, 4), (2, 4), (2,)]),
    ("...Ij,jK->...IK", [(3, 1, 4, 5), (5, 2)]),
    ("implicit_ik,kj", [(3, 4), (4, 2)]),
]


@pytest.mark.parametrize("eq, shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum(eq, shapes, op_executor):
    eq = eq.replace("implicit_", "")
    names = [f"x{i}" for i in range(len(shapes))]
    m = make_model([node("Einsum", names, ["y"], equation=eq)], list(zip(names, shapes)), ["y"])
    assert_matches(m, {n: rand(*s, seed=i) for i, (n, s) in enumerate(zip(names, shapes))},
                   on=op_executor)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_recurrent_layout1(op, op_executor):
    """layout=1 (batch first): onnxruntime lacks it, so the reference is its layout-0 run on
    the transposed input and initial state, transposed back."""
    import numpy as np
    from onnx import numpy_helper
    from conftest import run_ort, run_rvvkit_all
    bi = dict(direction="bidirectional")
    m0, feeds0 = _rnn_model(op, (4, 3, 2, 3), bi, "b h0", "y yh")
    m1, _ = _rnn_model(op, (4, 3, 2, 3), dict(bi, layout=1), "b h0", "y yh")
    h0 = next(numpy_helper.to_array(t) for t in m0.graph.initializer if t.name == "h0")
    for t in m1.graph.initializer:
        if t.name == "h0":   # the same state, batch first
            t.CopyFrom(numpy_helper.from_array(np.transpose(h0, (1, 0, 2)).copy(), "h0"))
    ref = run_ort(m0, feeds0)
    x1 = np.transpose(feeds0["x"], (1, 0, 2)).copy()
    for label, got in run_rvvkit_all(m1, {"x": x1}, None, op_executor).items():
        np.testing.assert_allclose(got["y"], np.transpose(ref["y"], (2, 0, 1, 3)), 1e-4, 1e-5,
                                   err_msg=label)
        np.testing.assert_allclose(got["yh"], np.transpose(ref["yh"], (1, 0, 2)), 1e-4, 1e-5,
                                   err_msg=label)


# ---------------------------------------------------------------------------------------------
# Attention (opset 23)

ATTENTION_CASES = [
    # id, q, k, v shapes, attrs, mask (shape, dtype) or None
    ("4d_plain", (2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 4), {}, None),
    ("4d_causal_scale", (1, 3, 6, 4), (1, 3, 6, 4), (1, 3, 6, 4), dict(is_causal=1, scale=0.3),
     None),
    ("4d_gqa_float_mask", (1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8), {}, ((3, 5), "float")),
    ("4d_bool_mask_4d", (2, 2, 4, 4), (2, 2, 4, 4), (2, 2, 4, 4), {}, ((2, 1, 4, 4), "bool")),
    ("3d_heads_causal_softcap", (2, 5, 12), (2, 5, 12), (2, 5, 6),
     dict(q_num_heads=3, kv_num_heads=3, is_causal=1, softcap=2.0), None),
    ("3d_gqa_bool_mask", (1, 4, 16), (1, 6, 8), (1, 6, 8), dict(q_num_heads=4, kv_num_heads=2),
     ((4, 6), "bool")),
]


@pytest.mark.parametrize("qs, ks, vs, attrs, mask", [c[1:] for c in ATTENTION_CASES],
                         ids=[c[0] for c in ATTENTION_CASES])
def test_attention(qs, ks, vs, attrs, mask, op_executor):
    import numpy as np
    from onnx import TensorProto
    ins = [("q", qs), ("k", ks), ("v", vs)]
    feeds = {"q": rand(*qs), "k": rand(*ks, seed=1), "v": rand(*vs, seed=2)}
    if mask is not None:
        shape, dt = mask
        if dt == "bool":   # keep one key per row so that no row is fully masked
            mv = np.random.default_rng(3).random(shape) > 0.4
            mv[..., 0] = True
            ins.append(helper.make_tensor_value_info("m", TensorProto.BOOL, shape))
        else:
            mv = rand(*shape, seed=3)
            ins.append(("m", shape))
        feeds["m"] = mv
    names = ["q", "k", "v"] + (["m"] if mask is not None else [])
    m = make_model([node("Attention", names, ["y"], **attrs)], ins, ["y"], opset=23)
    assert_matches(m, feeds, on=op_executor)


# KV cache (past_key/past_value -> present_key/present_value), qk_matmul_output (modes 0-3),
# nonpad_kv_seqlen and the sliding window (opset 25). Outputs: y, present k, v, qk ("-": none).
ATTENTION_EXTRA_CASES = [
    # id, q, k, v shapes, past length, attrs, mask (shape, dtype) or None, outputs, opset,
    # nonpad_kv_seqlen or None
    ("kv_4d_gqa_causal", (1, 4, 3, 8), (1, 2, 3, 8), (1, 2, 3, 6), 5, dict(is_causal=1), None,
     "y pk pv", 23, None),
    ("kv_3d_mask_qk_bias", (2, 3, 16), (2, 3, 8), (2, 3, 4), 4,
     dict(q_num_heads=2, kv_num_heads=1, qk_matmul_output_mode=2), ((3, 7), "float"),
     "y pk pv qk", 23, None),
    ("present_from_3d", (1, 3, 16), (1, 5, 8), (1, 5, 6), 0,
     dict(q_num_heads=2, kv_num_heads=1), None, "y pk pv", 23, None),
    ("qk_softcap_mode1", (2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 4), 0,
     dict(softcap=1.5, qk_matmul_output_mode=1), ((5, 7), "float"), "y - - qk", 23, None),
    ("qk_softmax_masked_row", (1, 3, 4, 4), (1, 3, 6, 4), (1, 3, 6, 4), 0,
     dict(qk_matmul_output_mode=3, is_causal=1), ((1, 3, 4, 6), "bool"), "y - - qk", 23,
     None),
    ("qk_raw_window", (1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 4), 0,
     dict(left_window_size=1, right_window_size=2), None, "y - - qk", 25, None),
    ("nonpad_causal_window", (2, 2, 3, 8), (2, 2, 6, 8), (2, 2, 6, 8), 0,
     dict(is_causal=1, left_window_size=1), ((2, 1, 3, 6), "bool"), "y", 25, (4, 2)),
]


def _attention_extra_model(qs, ks, vs, past, attrs, mask, outs, opset, nonpad):
    import numpy as np
    from onnx import TensorProto

    def vi(name, shape, ty=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, ty, shape)
    feeds = {"q": rand(*qs), "k": rand(*ks, seed=1), "v": rand(*vs, seed=2)}
    ins = [vi("q", qs), vi("k", ks), vi("v", vs)]
    names = ["q", "k", "v", "", "", "", ""]
    if mask is not None:
        shape, dt = mask
        if dt == "bool":   # row 0 of head 1 fully masked: it must give zeros
            mv = np.random.default_rng(3).random(shape) > 0.4
            mv[..., 0] = True
            if len(shape) == 4 and shape[1] > 1:
                mv[:, 1, 0, :] = False
            ins.append(vi("m", shape, TensorProto.BOOL))
        else:
            mv = rand(*shape, seed=3)
            ins.append(vi("m", shape))
        feeds["m"], names[3] = mv, "m"
    if past:
        hk = ks[1] if len(ks) == 4 else attrs["kv_num_heads"]
        d, dv = (ks[3], vs[3]) if len(ks) == 4 else (ks[2] // hk, vs[2] // hk)
        feeds["past_k"] = rand(qs[0], hk, past, d, seed=4)
        feeds["past_v"] = rand(qs[0], hk, past, dv, seed=5)
        ins += [vi("past_k", feeds["past_k"].shape), vi("past_v", feeds["past_v"].shape)]
        names[4:6] = ["past_k", "past_v"]
    if nonpad is not None:
        feeds["nonpad"] = np.array(nonpad, np.int64)
        ins.append(vi("nonpad", [len(nonpad)], TensorProto.INT64))
        names[6] = "nonpad"
    while not names[-1]:
        names.pop()
    onames = ["" if o == "-" else o for o in outs.split()]
    m = make_model([node("Attention", names, onames, **attrs)], ins, [o for o in onames if o],
                   opset=opset)
    return m, feeds


@pytest.mark.parametrize("qs, ks, vs, past, attrs, mask, outs, opset, nonpad",
                         [c[1:] for c in ATTENTION_EXTRA_CASES],
                         ids=[c[0] for c in ATTENTION_EXTRA_CASES])
def test_attention_cache_qk_window(qs, ks, vs, past, attrs, mask, outs, opset, nonpad,
                                   op_executor):
    m, feeds = _attention_extra_model(qs, ks, vs, past, attrs, mask, outs, opset, nonpad)
    assert_matches(m, feeds, on=op_executor)


def test_conv_transpose_on_constants_folds(op_executor):
    """A ConvTranspose whose inputs are all initializers is evaluated at build time (numpy)."""
    import rvvkit
    inits = {"c": rand(1, 4, 3, 2, seed=3), "w": rand(4, 1, 3, 2, seed=1), "b": rand(2, seed=2)}
    nodes = [node("ConvTranspose", ["c", "w", "b"], ["k"], group=2, strides=[2, 1],
                  pads=[1, 0, 0, 1], output_padding=[1, 0]),
             node("Add", ["x", "k"], ["y"])]
    m = make_model(nodes, [("x", (1, 2, 7, 2))], ["y"], inits)
    art = rvvkit.build(m)
    assert [s["op"] for s in art.meta["plan"]] == ["Add"]
    assert_matches(m, {"x": rand(1, 2, 7, 2)}, artifact=art, on=op_executor)
