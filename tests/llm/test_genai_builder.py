"""onnxruntime-genai's model builder, its CPU defaults as users run it (tests/llm/export_genai.py
made the stored outputs: Q, K and V packed into one GroupQueryAttention input, caches with a
symbolic head dimension, int4/int8 MatMulNBits or float32; in float16, onnxruntime's
MultiHeadAttention over repeated caches that grow by Concat): `rvvkit build model.onnx
--max-seq N` builds each as it is, reads its end-of-text ids from genai_config.json, and
generates onnxruntime-genai's own greedy tokens on the host and under QEMU. Where
onnxruntime-genai is installed, the stored reference is re-checked against it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import rvvkit
from rvvkit.artifact.container import Artifact

STORED = Path(__file__).resolve().parents[1] / "models" / "llm" / "genai"
NAMES = sorted(p.name for p in STORED.iterdir() if (p / "model.onnx").is_file())
BOUND = 96


@pytest.fixture(scope="module", params=NAMES)
def built(request, tmp_path_factory):
    """(the stored folder, its reference, the artifact built by the command line)."""
    folder = STORED / request.param
    ref = json.loads((folder / "reference.json").read_text())
    out = tmp_path_factory.mktemp(request.param) / "model.rvv"
    res = subprocess.run([sys.executable, "-m", "rvvkit", "build", str(folder / "model.onnx"),
                          "--max-seq", str(BOUND), "-o", str(out)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    eos = json.loads((folder / "genai_config.json").read_text())["model"]["eos_token_id"]
    assert f"end-of-text token ids {sorted(eos)} (from genai_config.json)" in res.stderr
    return folder, ref, out


def test_the_builders_defaults_are_what_this_covers():
    """The stored models have what tripped rvvkit: packed QKV (or, in float16, onnxruntime's
    MultiHeadAttention) and a symbolic head size."""
    import onnx
    for name in NAMES:
        model = onnx.load(str(STORED / name / "model.onnx"))
        gqa = [n for n in model.graph.node if n.op_type == "GroupQueryAttention"]
        mha = [n for n in model.graph.node if n.op_type == "MultiHeadAttention"]
        if name.endswith("fp16"):
            assert mha and not gqa, name
        else:
            assert gqa and all(not n.input[1] and not n.input[2] for n in gqa), name
        cache = next(i for i in model.graph.input if i.name.startswith("past_key_values"))
        assert cache.type.tensor_type.shape.dim[3].dim_param, name


def test_greedy_tokens_are_onnxruntime_genais(built, op_executor):
    if op_executor.on == "cuda":
        pytest.skip("checked on the host, the QEMU samples and the CUDA emulator")
    folder, ref, art = built
    with rvvkit.load(str(art), on=op_executor.on, **op_executor.options) as sess:
        got = sess.generate(ref["prompt"], len(ref["tokens"])).tokens
    assert got == ref["tokens"], folder.name


def test_reference_is_the_tools_own(built):
    """Re-checked where the tool is installed: onnxruntime-genai's generator, or, for the
    float16 model it fails on, onnxruntime a step at a time (export_genai.ort_reference)."""
    folder, ref, _ = built
    if ref["reference"] == "onnxruntime":
        from export_genai import ort_reference
        assert ort_reference(folder) == ref["tokens"]
        return
    og = pytest.importorskip("onnxruntime_genai", reason="re-checked where it is installed")
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ref["prompt"]) + len(ref["tokens"]),
                              do_sample=False)
    gen = og.Generator(model, params)
    gen.append_tokens(ref["prompt"])
    tokens = []
    while not gen.is_done():
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
    assert tokens == ref["tokens"]


def test_the_bound_defaults_to_genai_configs_max_length(tmp_path):
    """Without --max-seq the caches hold genai_config.json's search.max_length positions,
    as onnxruntime-genai sizes them; a model without that file says so in one line."""
    import shutil
    folder = STORED / NAMES[0]
    bound = json.loads((folder / "genai_config.json").read_text())["search"]["max_length"]
    out = tmp_path / "dec.rvv"
    res = subprocess.run([sys.executable, "-m", "rvvkit", "build", str(folder / "model.onnx"),
                          "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"cache bound {bound} positions from genai_config.json" in res.stderr
    assert Artifact.load(str(out)).meta["decoder"]["max_seq"] == bound
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(folder / "model.onnx", alone / "model.onnx")
    res = subprocess.run([sys.executable, "-m", "rvvkit", "build", str(alone / "model.onnx"),
                          "-o", str(tmp_path / "no.rvv")], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode != 0 and res.stderr.count("\n") == 1, res.stderr
    assert "key/value cache inputs" in res.stderr and "--max-seq N" in res.stderr
    assert not (tmp_path / "no.rvv").exists()


@pytest.mark.parametrize("path", [STORED / "qwen2_int4" / "model.onnx",
                                  STORED.parent / "optimum" / "qwen2_sdpa" / "model.onnx"],
                         ids=["genai_gqa", "optimum_concat"])
def test_caches_named_otherwise_are_found_by_their_use(path):
    """Caches renamed kv_in_0_key / kv_out_0_key (no past/cache in the name) are still found:
    read by the attention or grown by a Concat that makes a graph output."""
    import re

    import onnx
    model = onnx.load(str(path))
    want = rvvkit.load(rvvkit.build(model, max_seq=40, cuda=False), on="host")
    with want:
        ref = want.generate([5, 17, 33, 2], 8, eos=[]).tokens
    names = {}
    for vi in list(model.graph.input) + list(model.graph.output):
        m = re.match(r"(past_key_values|present)\.(\d+)\.(key|value)$", vi.name)
        if m:
            side = "out" if m.group(1) == "present" else "in"
            names[vi.name] = vi.name = f"kv_{side}_{m.group(2)}_{m.group(3)}"
    assert len(names) == 8
    for node in model.graph.node:
        node.input[:] = [names.get(x, x) for x in node.input]
        node.output[:] = [names.get(x, x) for x in node.output]
    with rvvkit.load(rvvkit.build(model, max_seq=40, cuda=False), on="host") as sess:
        assert sess.generate([5, 17, 33, 2], 8, eos=[]).tokens == ref
