"""Unmasked encoder attention (rvvkit/passes/attention.py): MatMul -> Softmax -> MatMul with
scalar scales on q, k or the scores becomes one Attention whose keys come through one cheap
Transpose; outputs match onnxruntime on every executor; a masked chain, a chain whose scores
are read elsewhere and a broadcast product are left as exported."""
import numpy as np
import pytest
from onnx import helper

from conftest import assert_matches, make_model, rand
from rvvkit.frontend.onnx import from_onnx
from rvvkit.passes import optimize

node = helper.make_node
B, S, H, D = 1, 40, 3, 16
SCALE = float(D) ** -0.25


def whisper_attention(mask=False, scores_out=False, score_scale=None, q_first=False):
    """Whisper's/ViT's export: heads split by Reshape + Transpose, q and k each scaled by
    D^-1/4 (q before its heads are split with `q_first`, as Whisper does), K transposed
    (0, 2, 3, 1), the product transposed back and merged."""
    ini = {"hd": np.array([B, S, H, D], np.int64), "m": np.array([B, S, H * D], np.int64),
           "sq": np.array(SCALE, np.float32), "sk": np.array(SCALE, np.float32)}
    nodes = [node("Mul", ["q", "sq"], ["q1"])] if q_first else []
    nodes += [node("Reshape", ["q1" if q_first else "q", "hd"], ["q4"]),
              node("Reshape", ["k", "hd"], ["k4"]), node("Reshape", ["v", "hd"], ["v4"]),
              node("Transpose", ["q4"], ["qt" if q_first else "qt0"], perm=[0, 2, 1, 3]),
              node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
              node("Mul", ["kt", "sk"], ["ks"]), node("MatMul", ["qt", "ks"], ["s"])]
    if not q_first:
        nodes.insert(-1, node("Mul", ["qt0", "sq"], ["qt"]))
    scores = "s"
    if score_scale is not None:
        ini["ss"] = np.array(score_scale, np.float32)
        nodes.append(node("Div", ["s", "ss"], ["s2"]))
        scores = "s2"
    if mask:
        ini["mask"] = np.where(np.arange(S)[None, :] > np.arange(S)[:, None], -1e9,
                               0.0).astype(np.float32)
        nodes.append(node("Add", [scores, "mask"], ["s3"]))
        scores = "s3"
    nodes += [node("Softmax", [scores], ["p"], axis=-1), node("MatMul", ["p", "vt"], ["o"]),
              node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              node("Reshape", ["ot", "m"], ["y"])]
    outs = ["y"] + (["s"] if scores_out else [])
    return make_model(nodes, [(x, (B, S, H * D)) for x in "qkv"], outs, ini, opset=17)


def feeds():
    return {x: rand(B, S, H * D, seed=i, scale=2.0) for i, x in enumerate("qkv")}


def ops(model):
    return [n.op for n in optimize(from_onnx(model)).nodes]


def test_fused_to_one_attention_with_cheap_keys():
    g = optimize(from_onnx(whisper_attention()))
    att = [n for n in g.nodes if n.op == "Attention"]
    assert len(att) == 1 and "Softmax" not in [n.op for n in g.nodes]
    assert "MatMul" not in [n.op for n in g.nodes]
    assert att[0].attrs["scale"] == pytest.approx(SCALE * SCALE, rel=1e-6)
    keys = next(n for n in g.nodes if att[0].inputs[1] in n.outputs)
    # (0, 2, 3, 1) then the swap of the last two axes: rows of D floats stay contiguous
    assert keys.op == "Transpose" and tuple(keys.attrs["perm"]) == (0, 2, 1, 3)
    assert {"Softmax", "MatMul"} <= {op for op, _ in att[0].fused}


def test_scale_before_the_head_split_joins_the_scale():
    g = optimize(from_onnx(whisper_attention(q_first=True)))
    att = next(n for n in g.nodes if n.op == "Attention")
    assert att.attrs["scale"] == pytest.approx(SCALE * SCALE, rel=1e-6)
    assert [n.op for n in g.nodes].count("Mul") == 0
    assert "rvvkit.ChannelAffine" not in [n.op for n in g.nodes]


def test_score_scale_joins_the_scale():
    g = optimize(from_onnx(whisper_attention(score_scale=2.0)))
    att = next(n for n in g.nodes if n.op == "Attention")
    assert att.attrs["scale"] == pytest.approx(SCALE * SCALE / 2.0, rel=1e-6)


@pytest.mark.parametrize("kw", [{"mask": True}, {"scores_out": True}])
def test_left_as_exported(kw):
    assert "Attention" not in ops(whisper_attention(**kw))


def test_broadcast_product_left_alone():
    # one K for every head (batch dims broadcast): not Attention's per-head layout
    ini = {"kt": rand(1, 1, D, S, seed=5)}
    nodes = [node("MatMul", ["q", "kt"], ["s"]), node("Softmax", ["s"], ["p"], axis=-1),
             node("MatMul", ["p", "v"], ["y"])]
    m = make_model(nodes, [("q", (B, H, S, D)), ("v", (B, H, S, D))], ["y"], ini, opset=17)
    assert "Attention" not in ops(m)


@pytest.mark.parametrize("kw", [{}, {"score_scale": 0.5, "q_first": True}, {"mask": True}])
def test_matches_onnxruntime(kw, executor):
    assert_matches(whisper_attention(**kw), feeds(), on=executor)
