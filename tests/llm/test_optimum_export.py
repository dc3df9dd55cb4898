"""optimum's decoder export (`optimum-cli export onnx --task text-generation-with-past`, SDPA
attention; stored by tests/llm/export_optimum.py): its attention over the growing caches is
recognised (passes/cached_attention.py: scaled q and k, the -inf mask of a Where, Softmax,
Where(IsNaN(p), 0, p)), so it reads the live prefix only and the decoder gets a prefill plan;
greedy tokens and logits are onnxruntime's on every executor, and a reply ends at the eos id
of the generation_config.json beside it."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import rvvkit
from ort_decoder import ort_greedy

STORED = Path(__file__).resolve().parents[1] / "models" / "llm" / "optimum" / "qwen2_sdpa"
BOUND = 96
PROMPT = [5, 17, 33, 2, 99, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("optimum") / "model.rvv"
    res = subprocess.run([sys.executable, "-m", "rvvkit", "build", str(STORED / "model.onnx"),
                          "--max-seq", str(BOUND), "-o", str(out)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "end-of-text token ids [7] (from generation_config.json)" in res.stderr
    return out, res.stderr


def test_sdpa_attention_is_recognised(built):
    from rvvkit.artifact.container import Artifact
    out, said = built
    ops = [step["op"] for step in Artifact.load(str(out)).meta["plan"]]
    assert ops.count("Attention") == 2 and "IsNaN" not in ops and "Softmax" not in ops
    assert "planned a prefill plan of 16 tokens" in said


def test_tokens_and_logits_are_onnxruntimes(built, op_executor):
    if op_executor.on == "cuda":
        pytest.skip("checked on the host, the QEMU samples and the CUDA emulator")
    out, _ = built
    want, rows = ort_greedy(onnx.load(str(STORED / "model.onnx")), PROMPT, 64, BOUND,
                            growing=True)
    with rvvkit.load(str(out), on=op_executor.on, **op_executor.options) as sess:
        got = sess.generate(PROMPT, 64, eos=[], keep_logits=True)
    assert got.tokens == want
    np.testing.assert_allclose(np.array(got.logits), np.array(rows), rtol=0, atol=1e-4)
