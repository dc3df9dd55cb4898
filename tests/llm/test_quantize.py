"""`rvvkit quantize` and onnxruntime's MatMulNBitsQuantizer turn a float decoder into
MatMulNBits form; rvvkit runs either file as onnxruntime does (the same greedy tokens, logits
within tolerance)."""
import subprocess
import sys

import numpy as np
import onnx
import pytest

import rvvkit
from ort_decoder import ort_greedy
from rvvkit.zoo import llm as zoo_llm
from rvvkit.errors import ModelError
from rvvkit.llm.quantize import quantize_model

BOUND, PROMPT = 48, [5, 9, 2]


def _float_decoder():
    return zoo_llm.decoder(zoo_llm.DecoderConfig(layers=1), seed=11)


def _same_generation(model):
    want, rows = ort_greedy(model, PROMPT, 32, BOUND)
    with rvvkit.load(rvvkit.build(model, max_seq=BOUND)) as sess:
        got = sess.generate(PROMPT, 32, keep_logits=True)
    assert got.tokens == want
    np.testing.assert_allclose(np.array(got.logits), np.array(rows), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bits, block, zp", [(4, 32, False), (8, 64, True), (4, 16, True)])
def test_rvvkit_quantize_runs_as_onnxruntime_does(bits, block, zp):
    model, rep = quantize_model(_float_decoder(), bits, block, zp, exclude=["lm_head.weight"])
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMulNBits") == rep.converted == 7 and ops.count("MatMul") == 1
    assert list(rep.skipped.values()) == ["excluded"]
    # bits per weight: the code, a float scale per block, a packed zero point per block
    per_weight = bits + 32 / block + (bits / block if zp else 0)
    assert rep.bytes_after <= rep.bytes_before * per_weight / 32 * 1.01
    _same_generation(model)


def test_onnxruntime_quantizer_output_runs():
    pytest.importorskip("onnx_ir", reason="onnxruntime's MatMulNBitsQuantizer needs onnx_ir "
                        "(pip install 'rvvkit[test]')")
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(_float_decoder(), block_size=32, is_symmetric=False, bits=4)
    q.process()
    model = q.model.model
    assert sum(n.op_type == "MatMulNBits" for n in model.graph.node) == 8
    _same_generation(model)


def test_quantize_cli_writes_the_model_and_refuses_models_without_matmuls(tmp_path):
    src = tmp_path / "dec.onnx"
    onnx.save(_float_decoder(), src)
    out = tmp_path / "dec8.onnx"
    cmd = [sys.executable, "-m", "rvvkit", "quantize", str(src), "--weights", "int8",
           "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "8 MatMul weights to int8" in res.stderr, res.stderr
    assert sum(n.op_type == "MatMulNBits" for n in onnx.load(out).graph.node) == 8
    bad = subprocess.run(cmd[:-2] + ["--block", "48"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "power of two" in bad.stderr
    with pytest.raises(ModelError, match="no MatMul"):
        quantize_model(onnx.load(out), 4)


def test_embeddings_become_gather_block_quantized(tmp_path):
    """--embeddings: the token table at 4 bits (GatherBlockQuantized), the float copy dropped,
    generation onnxruntime's; a table whose width is not a multiple of the block stays float
    and says why."""
    src = tmp_path / "dec.onnx"
    onnx.save(_float_decoder(), src)
    out = tmp_path / "dec4e.onnx"
    res = subprocess.run([sys.executable, "-m", "rvvkit", "quantize", str(src), "--embeddings",
                          "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "and 1 embedding tables to int4" in res.stderr, res.stderr
    model = onnx.load(out)
    ops = [n.op_type for n in model.graph.node]
    assert "GatherBlockQuantized" in ops and "Gather" not in ops
    assert "embed_tokens.weight" not in {i.name for i in model.graph.initializer}
    _same_generation(model)
    _, rep = quantize_model(_float_decoder(), 4, 128, embeddings=True)
    assert rep.embeddings == 0 and "multiple of 128" in " ".join(rep.skipped.values())


def _weight_args(art, op):
    """The weights offsets of the constant arguments of the steps running `op`."""
    return [[a["offset"] for a in s["args"] if a["kind"] == "weights"]
            for s in art.meta["plan"] if s["op"] == "com.microsoft." + op]


def test_a_tied_lm_head_and_embedding_are_stored_once_with_16_bit_scales():
    """A float decoder whose LM head is its embedding, quantized with --embeddings: both
    become the same 4-bit blocks with bfloat16 scales (the default --scales), the artifact
    holds them once (the gather reads the head's layout) and in 16 bits, and generation is
    onnxruntime's. With float32 scales the table costs 5 bits a weight instead of 4.5."""
    cfg = zoo_llm.DecoderConfig(layers=1, vocab=512, tied=True)
    model, rep = quantize_model(zoo_llm.decoder(cfg, seed=3), 4, 32, embeddings=True)
    assert rep.embeddings == 1 and rep.converted == 8
    art = rvvkit.build(model, max_seq=BOUND)
    gather, = _weight_args(art, "GatherBlockQuantized")
    heads = [w for w in _weight_args(art, "MatMulNBits") if w == gather]
    assert len(heads) == 1, (gather, _weight_args(art, "MatMulNBits"))
    _same_generation(model)
    wide, _ = quantize_model(zoo_llm.decoder(cfg, seed=3), 4, 32, embeddings=True,
                             bf16_scales=False)
    table = cfg.vocab * cfg.hidden
    saved = rvvkit.build(wide, max_seq=BOUND).meta["memory"]["weights_bytes"] - \
        art.meta["memory"]["weights_bytes"]
    assert saved >= table // 32 * 2    # the shared table's scales, 2 bytes fewer each
    untied, _ = quantize_model(zoo_llm.decoder(zoo_llm.replace(cfg, tied=False), seed=3), 4,
                               32, embeddings=True)
    extra = rvvkit.build(untied, max_seq=BOUND).meta["memory"]["weights_bytes"] - \
        art.meta["memory"]["weights_bytes"]
    assert extra >= table // 2          # a second table's codes


def test_a_float16_decoder_quantizes_to_the_same_artifact():
    """A float16 decoder's weights quantize as a float32 one's (in float32), their scales
    written as float16 (MatMulNBits takes the activations' type). With the default bfloat16
    scales the artifact is byte for byte as big as the float32 decoder's (16-bit scales, the
    tied table once), and generation is onnxruntime's on the graph computed in float32."""
    from rvvkit.frontend.stored_floats import widen_stored_floats
    cfg = zoo_llm.DecoderConfig(layers=1, vocab=512, tied=True)
    half, rep = quantize_model(zoo_llm.decoder(zoo_llm.replace(cfg, half=True), seed=3), 4, 32,
                               embeddings=True)
    assert rep.converted == 8 and rep.embeddings == 1
    scales = [t for t in half.graph.initializer if t.name.endswith("_scales")]
    assert scales and all(t.data_type == onnx.TensorProto.FLOAT16 for t in scales)
    full, _ = quantize_model(zoo_llm.decoder(cfg, seed=3), 4, 32, embeddings=True)
    art = rvvkit.build(half, max_seq=BOUND)
    assert art.meta["memory"]["weights_bytes"] == \
        rvvkit.build(full, max_seq=BOUND).meta["memory"]["weights_bytes"]
    want, _ = ort_greedy(widen_stored_floats(half), PROMPT, 16, BOUND)
    with rvvkit.load(art, on="host") as sess:
        assert sess.generate(PROMPT, 16).tokens == want
