"""`--cache-inputs` / `--cache-outputs`: a decoder whose caches neither the names (past*,
...cache...) nor the graph's direct use of them give away is built by naming them, and then
generates what the same model under its usual names does; a name or pattern that matches
nothing, an input that is no cache and a present that could not be kept in place are one line
each, before anything is written."""
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import helper

import rvvkit
from rvvkit.errors import ModelError

BOUND = 48
SRC = Path(__file__).resolve().parents[1] / "models" / "llm" / "qwen2_tf.onnx"
PROMPT = [5, 9, 2]
_BUILT = {}


def _rename(names, old: str, new: str) -> None:
    for i, x in enumerate(names):
        if x == old:
            names[i] = new


def renamed_decoder() -> onnx.ModelProto:
    """transformers' Qwen2 export with its caches as kv_in_<layer>_<key|value> (read through an
    Identity, as some exporters leave them) and its presents as kv_out_<layer>_<key|value>."""
    m = onnx.load(str(SRC))
    g = m.graph
    for vi in list(g.input) + list(g.output):
        head, _, rest = vi.name.partition(".")
        if head not in ("past_key_values", "present"):
            continue
        layer, kind = rest.split(".")
        new = f"kv_{'in' if head == 'past_key_values' else 'out'}_{layer}_{kind}"
        for n in g.node:
            _rename(n.output, vi.name, new)
            _rename(n.input, vi.name, new if head == "present" else new + "_read")
        if head == "past_key_values":
            g.node.insert(0, helper.make_node("Identity", [new], [new + "_read"]))
        vi.name = new
    return m


def _built(key: str):
    if key not in _BUILT:
        _BUILT[key] = (rvvkit.build(renamed_decoder(), max_seq=BOUND, cache_inputs="kv_in_*",
                                    cache_outputs="kv_out_*") if key == "renamed" else
                       rvvkit.build(onnx.load(str(SRC)), max_seq=BOUND))
    return _BUILT[key]


def test_unnamed_caches_are_one_line_that_names_the_option():
    with pytest.raises(ModelError, match=r"found no key/value cache .* kv_in_0_key "
                                         r"\[None, 2, None, 16\].*--cache-inputs"):
        rvvkit.build(renamed_decoder(), max_seq=BOUND)


def test_named_caches_generate_what_the_usual_names_do(sample_executor):
    art = _built("renamed")
    assert len(art.meta["state"]) == 4 and art.meta.get("prefill")
    with rvvkit.load(_built("usual"), on="host") as sess:
        want = sess.generate(PROMPT, 12).tokens
    with rvvkit.load(art, on=sample_executor.on, **sample_executor.options) as sess:
        assert sess.generate(PROMPT, 12).tokens == want, sample_executor.id


@pytest.mark.parametrize("inputs, outputs, message", [
    ("kv_cache_*", None, r"--cache-inputs 'kv_cache_\*' matches none of the model's inputs: "
                         r"input_ids, attention_mask, position_ids, kv_in_0_key"),
    ("kv_in_*,position_ids", None, r"not rank-4 .* caches: position_ids \[None, None\]"),
    ("kv_in_*", "kv_out_*,logits", r"--cache-outputs: logits could not be kept as in-place"),
    ("kv_in_*", "present*", r"--cache-outputs 'present\*' matches none of the model's "
                            r"outputs: logits, kv_out_0_key"),
])
def test_bad_names_are_one_line(inputs, outputs, message):
    with pytest.raises(ModelError, match=message):
        rvvkit.build(renamed_decoder(), max_seq=BOUND, cache_inputs=inputs,
                     cache_outputs=outputs)


def test_the_command_line_names_caches(tmp_path):
    model = tmp_path / "renamed.onnx"
    onnx.save(renamed_decoder(), str(model))
    cli = [sys.executable, "-m", "rvvkit", "build", str(model), "--max-seq", str(BOUND)]
    out = tmp_path / "renamed.rvv"
    res = subprocess.run(cli + ["--cache-inputs", "kv_in_*", "--cache-outputs", "kv_out_*",
                                "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "4 key/value caches kept in the session" in res.stderr
    bad = tmp_path / "bad.rvv"
    res = subprocess.run(cli + ["--cache-inputs", "nothing_*", "-o", str(bad)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and not bad.exists()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--cache-inputs 'nothing_*' matches none" in lines[0], lines
