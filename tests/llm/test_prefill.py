"""A decoder artifact's prefill plan (rvvkit/llm/prefill.py): prompts go through it in chunks of
16 tokens, on every executor (host and CUDA sessions in Python, the runner's --generate loop
in C under QEMU), and give onnxruntime's greedy tokens, as the token-at-a-time plan does, in
all three decoder forms; it shares the weights and the caches, computes no logits, and its
meta is checked like the plan's (Python and the runner)."""
import copy
from pathlib import Path

import numpy as np
import onnx
import pytest

import rvvkit
from ort_decoder import ort_greedy
from rvvkit.zoo import llm as zoo_llm, llm_onnx as zoo_llm_onnx
from rvvkit.artifact import Artifact
from rvvkit.errors import ArtifactError, ExecutionError
from rvvkit.frontend import stored_floats
from rvvkit.llm.generate import chunks

BOUND = 48
# 2 full chunks, a third of 5 tokens padded to 16, then the last token alone
PROMPT = [(7 * i + 3) % 200 for i in range(38)]
STORED = Path(__file__).resolve().parents[1] / "models" / "llm"
FORMS = {   # (model, caches grow by Concat)
    "qwen2_int4": (lambda: zoo_llm.decoder(zoo_llm.DecoderConfig(bits=4, block=32)), False),
    "qwen2_int4_mask": (lambda: zoo_llm.decoder(
        zoo_llm.DecoderConfig(bits=4, block=32, mask=True, bf16_scales=True)), False),
    "qwen2_tf": (lambda: onnx.load(str(STORED / "qwen2_tf.onnx")), True),
    "qwen2_tf_f16": (lambda: onnx.load(str(STORED / "qwen2_tf_f16.onnx")), True),
    "llama_onnx23": (lambda: zoo_llm_onnx.decoder(zoo_llm.SMALL["llama-tiny"]), True),
}
_BUILT = {}


def built(form):
    """(artifact with a prefill plan, onnxruntime's 8 greedy tokens and their logits rows)."""
    if form not in _BUILT:
        make, grows = FORMS[form]
        model = make()
        ref = stored_floats.widen_stored_floats(model) if form.endswith("f16") else model
        _BUILT[form] = (rvvkit.build(model, max_seq=BOUND),
                        ort_greedy(ref, PROMPT, 8, BOUND, growing=grows))
    return _BUILT[form]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_prompt_chunks_give_onnxruntimes_tokens(form, sample_executor):
    art, (want, rows) = built(form)
    assert art.meta["prefill"]["tokens"] == 16
    with rvvkit.load(art, on=sample_executor.on, **sample_executor.options) as sess:
        got = sess.generate(PROMPT, 8, keep_logits=True)
    assert got.tokens == want, sample_executor.id
    tol = 2e-3 if form.endswith("f16") else 1e-4
    for step, (a, b) in enumerate(zip(got.logits, rows)):
        np.testing.assert_allclose(a, b.astype(np.float32), rtol=tol, atol=tol,
                                   err_msg=f"{sample_executor.id}: logits of step {step}")


def test_the_prefill_plan_shares_weights_and_caches_and_makes_no_logits():
    art = built("qwen2_tf")[0]
    meta, pre = art.meta, art.meta["prefill"]
    alone = rvvkit.build(onnx.load(str(STORED / "qwen2_tf.onnx")), max_seq=BOUND, prefill=0)
    assert alone.meta["prefill"] is None
    # the weights: one copy (the float MatMuls' panels are the decoding step's); the chunk's
    # own constants (its RoPE rows, its causal mask) are all it adds
    extra = meta["memory"]["weights_bytes"] - alone.meta["memory"]["weights_bytes"]
    assert 0 <= extra < 0.005 * alone.meta["memory"]["weights_bytes"]
    # the caches: the same arena offsets, all written by the chunk's cache writes and read by
    # its attentions, but for the last layer's: only the logits would read what it gives
    state = {s["offset"] for s in meta["state"]}
    users = {}
    for step in pre["plan"]:
        for arg in step["args"]:
            if arg["kind"] == "arena" and arg["offset"] in state:
                users.setdefault(step["op"], set()).add(arg["offset"])
    assert set(users) == {"rvvkit.CacheWrite", "Attention"}
    assert users["rvvkit.CacheWrite"] == state and len(users["Attention"]) == len(state) - 2
    # no logits: no outputs, no LM head, less work per token than a decoding step
    assert not any(a["kind"] == "output" for s in pre["plan"] for a in s["args"])
    heads = {a["name"] for s in meta["plan"] for a in s["args"] if a["kind"] == "weights" and
             "lm_head" in a["name"]}
    assert heads and not any(a.get("name", "").split("/")[-1] in heads
                             for s in pre["plan"] for a in s["args"])
    assert pre["macs"] < pre["tokens"] * meta["macs"]
    assert pre["arena_floats"] <= meta["memory"]["arena_floats"]
    assert [i["name"] for i in pre["inputs"]] == [i["name"] for i in meta["inputs"]]
    assert pre["inputs"][0]["shape"] == [1, 16]


@pytest.mark.parametrize("n, chunk, bound, want", [
    (37, 16, 48, [(0, 16), (16, 16), (32, 5)]),   # the last chunk padded
    (33, 16, 48, [(0, 16), (16, 16)]),            # one token left: alone
    (40, 16, 40, [(0, 16), (16, 16)]),            # padding past the bound: a token at a time
    (1, 16, 48, []), (20, 0, 48, []), (20, 1, 48, []),
])
def test_prompts_split_into_chunks(n, chunk, bound, want):
    assert chunks(n, chunk, bound) == want


def _edited(art, edit) -> Artifact:
    meta = copy.deepcopy(art.meta)
    edit(meta)
    return Artifact.from_bytes(Artifact(meta, art.c_source, art.weights).to_bytes())


@pytest.mark.parametrize("edit, match", [
    (lambda m: m["prefill"]["inputs"].reverse(), "prefill.inputs"),
    (lambda m: m["prefill"].update(tokens=1), "prefill.tokens"),
    (lambda m: m["prefill"]["plan"][0]["args"][0].update(kind="output"), "no outputs"),
    (lambda m: m["prefill"]["plan"][0]["args"][-1].update(offset=2 ** 45), "offset"),
    (lambda m: m["prefill"]["plan"][3].update(op=5), r"prefill\.plan\[3\]\.op is int"),
])
def test_an_edited_prefill_meta_is_refused(edit, match):
    bad = _edited(built("qwen2_int4")[0], edit)
    with pytest.raises(ArtifactError, match=match) as e:
        bad.check_model()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("on", ["host", "qemu"])
def test_a_prefill_meta_from_another_build_is_refused_by_the_kernels(on):
    """Consistent on its own, but not what the compiled object declares: the host session and
    the runner (its own C checks) both refuse it."""
    art = built("qwen2_int4")[0]
    bad = _edited(art, lambda m: m["prefill"]["plan"].pop())
    bad.check_model()
    # the host compares in Python; the runner exits 3 (bad artifact) naming the prefill plan
    with pytest.raises((ArtifactError, ExecutionError), match="prefill"):
        with rvvkit.load(bad, on=on) as sess:
            sess.generate(PROMPT[:20], 2)
