"""`rvvkit generate`: streams tokens (ids, or text through a tokenizers tokenizer.json), ends with
the prompt and generation speeds; bad use is exit 2, bad input exit 1, one line each."""
import subprocess
import sys
from pathlib import Path

import pytest

from ort_decoder import ort_greedy, saved_decoder

BOUND = 40


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    return saved_decoder(tmp_path_factory.mktemp("gen"), BOUND)


def _run(*args):
    return subprocess.run([sys.executable, "-m", "rvvkit", "generate", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("on", ["host", "qemu"])
def test_generate_prints_onnxruntimes_tokens_and_speeds(decoder, on):
    d, model = decoder
    res = _run(d / "dec.rvv", "--prompt-ids", "4,8,15", "--max-new-tokens", 12, "--on", on)
    assert res.returncode == 0, res.stderr
    want, _ = ort_greedy(model, [4, 8, 15], 12, BOUND)
    assert res.stdout.split() == [str(t) for t in want]
    assert "prompt 3 tokens at" in res.stderr and "generated 12 at" in res.stderr


def test_transformers_export_builds_inspects_and_generates(tmp_path):
    """The whole command-line path for a transformers export (a cache grown by Concat)."""
    import onnx
    src = Path(__file__).resolve().parents[1] / "models" / "llm" / "smollm_tf.onnx"
    cli = [sys.executable, "-m", "rvvkit"]
    res = subprocess.run(cli + ["build", str(src), "--max-seq", str(BOUND), "-o",
                                str(tmp_path / "tf.rvv")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "6 key/value caches kept in the session" in res.stderr
    res = subprocess.run(cli + ["inspect", str(tmp_path / "tf.rvv")], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    assert f"each 1x1x{BOUND}x16, updated in place" in res.stdout
    assert "attention mask attention_mask" in res.stdout
    res = _run(tmp_path / "tf.rvv", "--prompt-ids", "4,8,15", "--max-new-tokens", 12)
    assert res.returncode == 0, res.stderr
    want, _ = ort_greedy(onnx.load(str(src)), [4, 8, 15], 12, BOUND, growing=True)
    assert res.stdout.split() == [str(t) for t in want]


def test_generate_with_a_tokenizer(decoder, tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="pip install 'rvvkit[llm]'")
    from tokenizers import models, pre_tokenizers
    vocab = {f"w{i}": i for i in range(256)}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    d, model = decoder
    res = _run(d / "dec.rvv", "--prompt", "w4 w8 w15", "--tokenizer", tmp_path / "tokenizer.json",
               "--max-new-tokens", 6)
    assert res.returncode == 0, res.stderr
    want, _ = ort_greedy(model, [4, 8, 15], 6, BOUND)
    # the reply as the tokenizer decodes it whole (word-level: words joined by spaces)
    assert res.stdout.strip() == tok.decode(want) == " ".join(f"w{t}" for t in want)


@pytest.mark.parametrize("args, code, said", [
    (["--prompt-ids", "1,2,300"], 1, "token id 300 is outside the vocabulary"),
    (["--prompt", "hello"], 2, "--prompt TEXT needs --tokenizer"),
    (["--prompt-ids", "1", "--prompt", "x"], 2, "exactly one of --prompt-ids and --prompt"),
    (["--prompt-ids", "1,x"], 2, "expected token ids"),
    (["--prompt-ids", "1", "--temperature", "-1"], 1, "temperature -1.0 (>= 0)"),
])
def test_generate_bad_use_and_input(decoder, args, code, said):
    d, _ = decoder
    res = _run(d / "dec.rvv", *args)
    assert res.returncode == code and said in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("args, said", [
    (["--prompt-ids", ",".join(["1"] * (BOUND + 1))], f"the prompt has {BOUND + 1} tokens"),
    (["--prompt-ids", "1", "--eos", "999"], "eos token id 999 is outside the vocabulary"),
    (["--prompt-ids", "1", "--top-p", "2"], "top-p 2.0 (in (0, 1])"),
])
def test_bad_input_is_said_before_any_compile(decoder, args, said):
    """With a compiler that does not exist, the message is still the input's."""
    d, _ = decoder
    res = _run(d / "dec.rvv", *args, "--compiler", "no-such-compiler", "--no-cache")
    assert res.returncode == 1 and said in res.stderr, res.stderr
    assert "compiler" not in res.stderr and "kernels ready" not in res.stderr


def test_sampling_in_the_runner_is_seeded_and_the_same_at_every_vlen(decoder):
    d, _ = decoder
    runs = [_run(d / "dec.rvv", "--prompt-ids", "4,8", "--max-new-tokens", 16, "--temperature",
                 0.9, "--top-k", 30, "--top-p", 0.95, "--seed", seed, "--on", "qemu", "--vlen",
                 vlen) for seed, vlen in ((5, 128), (5, 512), (6, 128))]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    tokens = [r.stdout.split() for r in runs]
    assert tokens[0] == tokens[1] != tokens[2] and len(tokens[0]) == 16
