"""`rvvkit generate --chat`: turns from stdin, the conversation rendered by the model's chat
template (tokenizer_config.json beside the tokenizer, or --chat-template), each reply the
greedy continuation of the whole conversation so far, onnxruntime's tokens."""
import json
import subprocess
import sys

import pytest

pytest.importorskip("tokenizers", reason="the llm extra (tokenizers) is needed")
pytest.importorskip("jinja2", reason="the llm extra (jinja2) is needed")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

import rvvkit  # noqa: E402
from ort_decoder import ort_greedy  # noqa: E402
from rvvkit.llm.chat import load_template  # noqa: E402
from rvvkit.llm.text import TextStream  # noqa: E402
from rvvkit.zoo import llm as zoo_llm  # noqa: E402

BOUND = 96
TEMPLATE = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    """A decoder of 256 tokens and a byte-level tokenizer whose 256 tokens are the bytes, with
    a tokenizer_config.json carrying the chat template."""
    d = tmp_path_factory.mktemp("chat")
    model = zoo_llm.decoder(zoo_llm.DecoderConfig(layers=1, bits=4), seed=3)
    rvvkit.build(model, max_seq=BOUND).save(str(d / "dec.rvv"))
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "eos_token": {"content": "</s>"}}))
    return d, model, tok


def _expected(model, tok, template, turns, new):
    """stdout and the prompts of a chat of `turns`, by onnxruntime's greedy tokens."""
    messages, out = [], ""
    for turn in turns:
        messages.append({"role": "user", "content": turn})
        prompt = tok.encode(template.render(messages), add_special_tokens=False).ids
        ids, _ = ort_greedy(model, prompt, new, BOUND)
        stream = TextStream(tok, prompt)
        out += "".join(stream.push(t) for t in ids) + stream.finish() + "\n"
        messages.append({"role": "assistant", "content": tok.decode(ids)})
    return out


def test_chat_answers_each_turn_after_the_whole_conversation(chat_model):
    d, model, tok = chat_model
    template = load_template(str(d / "tokenizer.json"))
    assert template.render([{"role": "user", "content": "hi"}]) == "<user>hi</s>\n<assistant>"
    res = subprocess.run([sys.executable, "-m", "rvvkit", "generate", str(d / "dec.rvv"),
                          "--tokenizer", str(d / "tokenizer.json"), "--chat",
                          "--max-new-tokens", "6", "--ignore-eos"],
                         input="hello\nhow are you\n\n", capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout == _expected(model, tok, template, ["hello", "how are you"], 6)
    assert res.stderr.count("generated 6 at") == 2


@pytest.mark.parametrize("args, said", [
    ([], "--chat needs a chat template: none in"),
    (["--chat-template", "/no/such/file"], "cannot read chat template /no/such/file"),
    (["--prompt", "x"], "--chat reads the turns from stdin"),
])
def test_chat_bad_use_is_one_line(chat_model, tmp_path, args, said):
    d, _, _ = chat_model
    lone = tmp_path / "tokenizer.json"      # a tokenizer without a tokenizer_config.json
    lone.write_bytes((d / "tokenizer.json").read_bytes())
    res = subprocess.run([sys.executable, "-m", "rvvkit", "generate", str(d / "dec.rvv"),
                          "--tokenizer", str(lone), "--chat", *args], input="hi\n",
                         capture_output=True, text=True, timeout=300)
    assert res.returncode in (1, 2) and said in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
