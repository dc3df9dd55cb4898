"""Generation as a user watches it: tokens stream from QEMU as the runner makes them (the
runner prints a line per token; rvvkit reads the pipe as it comes), Ctrl-C keeps what was
shown, and a reply ends at the model's own end-of-text ids, read at build time from the config
files beside it (genai_config.json, generation_config.json), with the reason said."""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

import rvvkit
from ort_decoder import ort_greedy, saved_decoder
from rvvkit.errors import ExecutionError
from rvvkit.llm.streaming import TokenLines
from rvvkit.zoo import llm as zoo_llm

BOUND = 40
PROMPT = [4, 8, 15]
DELAY = 0.4      # seconds the slow pipe holds each line of the runner's stdout


def _why_no_qemu() -> str:
    from executors import Executor
    return Executor("qemu", "qemu").why_not()


needs_qemu = pytest.mark.skipif(bool(_why_no_qemu()), reason=_why_no_qemu() or "-")


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    return saved_decoder(tmp_path_factory.mktemp("stream"), BOUND)


@pytest.fixture
def slow_qemu(tmp_path, monkeypatch):
    """$RVVKIT_QEMU: qemu-riscv64 whose stdout reaches rvvkit a line every DELAY seconds, so
    that a generation takes seconds and its tokens come apart in time."""
    qemu = shutil.which("qemu-riscv64")
    script = tmp_path / "slow-qemu"
    script.write_text("#!/bin/bash\nset -o pipefail\n"
                      f'{qemu} "$@" | while IFS= read -r line; do printf "%s\\n" "$line"; '
                      f"sleep {DELAY}; done\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("RVVKIT_QEMU", str(script))
    return script


def test_token_lines_join_chunks_split_anywhere():
    seen = []
    lines = TokenLines(seen.append)
    for chunk in (b"1", b"2\n3", b"4\n", b"\n5\n"):
        lines.feed(chunk)
    assert seen == lines.tokens == [12, 34, 5]
    with pytest.raises(ExecutionError, match="where a token id was expected"):
        TokenLines().feed(b"oops\n")


@needs_qemu
def test_qemu_yields_each_token_as_it_is_made(decoder, slow_qemu):
    d, model = decoder
    want, _ = ort_greedy(model, PROMPT, 6, BOUND)
    with rvvkit.load(str(d / "dec.rvv"), on="qemu") as sess:
        t0 = time.monotonic()
        arrivals, got = [], []
        for token in sess.generate_iter(PROMPT, 6):
            arrivals.append(time.monotonic() - t0)
            got.append(token)
        total = time.monotonic() - t0
    assert got == want
    # the first token came while five more lines were still held, DELAY seconds each
    assert arrivals[0] < total - 4 * DELAY, (arrivals, total)
    assert arrivals == sorted(arrivals) and arrivals[-1] - arrivals[0] > 4 * DELAY


@needs_qemu
def test_ctrl_c_keeps_the_tokens_shown(decoder, slow_qemu):
    d, model = decoder
    want, _ = ort_greedy(model, PROMPT, 30, BOUND)
    proc = subprocess.Popen([sys.executable, "-m", "rvvkit", "generate", str(d / "dec.rvv"),
                             "--prompt-ids", "4,8,15", "--max-new-tokens", "30", "--on", "qemu",
                             "--ignore-eos"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ)
    first = b""
    while not first.endswith(b" "):          # the first token, printed "ID "
        first += proc.stdout.read(1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    shown = (first + out).split()
    assert proc.returncode == 130, err
    assert 1 <= len(shown) < 30 and [int(t) for t in shown] == want[:len(shown)]
    assert f"interrupted after {len(shown)} generated tokens" in err.decode()
    assert b"Traceback" not in err


@pytest.mark.parametrize("on", ["host", pytest.param("qemu", marks=needs_qemu)])
@pytest.mark.parametrize("config", ["genai_config.json", "generation_config.json"])
def test_a_reply_ends_at_the_models_eos(tmp_path, on, config):
    model = zoo_llm.decoder(zoo_llm.DecoderConfig(layers=1, bits=4), seed=3)
    want, _ = ort_greedy(model, PROMPT, 12, BOUND)
    eos = want[3]
    import onnx
    onnx.save(model, str(tmp_path / "model.onnx"))
    ids = [eos, 255] if eos != 255 else [eos]
    doc = {"model": {"eos_token_id": ids}} if config == "genai_config.json" else \
        {"eos_token_id": ids}
    (tmp_path / config).write_text(json.dumps(doc))
    cli = [sys.executable, "-m", "rvvkit"]
    res = subprocess.run(cli + ["build", str(tmp_path / "model.onnx"), "--max-seq", str(BOUND),
                                "-o", str(tmp_path / "m.rvv")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert f"end-of-text token ids {sorted(ids)} (from {config})" in res.stderr
    stop = want.index(eos) + 1
    gen = cli + ["generate", str(tmp_path / "m.rvv"), "--prompt-ids", "4,8,15",
                 "--max-new-tokens", "12", "--on", on]
    res = subprocess.run(gen, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(t) for t in want[:stop]]
    assert f"stopped at end-of-text token {eos}" in res.stderr
    res = subprocess.run(gen + ["--ignore-eos"], capture_output=True, text=True)
    assert res.stdout.split() == [str(t) for t in want] and "token limit" in res.stderr
    other = next(t for t in want if t != eos)
    res = subprocess.run(gen + ["--eos", str(other)], capture_output=True, text=True)
    assert res.stdout.split() == [str(t) for t in want[:want.index(other) + 1]]
