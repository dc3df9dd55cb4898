"""rvvkit/llm/text.py: generated tokens printed as text while they come, right for byte-level
BPE (a character split over tokens) and SentencePiece-style Metaspace tokenizers (spaces
carried by the tokens), against decoding the whole reply at once."""
import pytest

tokenizers = pytest.importorskip("tokenizers", reason="the llm extra (tokenizers) is needed")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

from rvvkit.llm.text import REPLACEMENT, TextStream  # noqa: E402

CORPUS = ["hello world héllo wörld naïve café 你好 世界 say the word"] * 40
REPLY = " héllo wörld 你好 café naïve"


def _byte_level():
    """Byte-level BPE with too few merges to join a multi-byte character's bytes."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=256, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def _metaspace():
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=120,
                                                        special_tokens=["<unk>"]))
    return tok


@pytest.mark.parametrize("make", [_byte_level, _metaspace], ids=["byte_level", "metaspace"])
def test_streamed_text_equals_the_whole_decode(make):
    tok = make()
    prompt, ids = tok.encode("say the word").ids, tok.encode(REPLY).ids
    alone = "".join(tok.decode([i]) for i in ids)
    assert alone != tok.decode(ids)          # the case is one that token-by-token gets wrong
    stream = TextStream(tok, prompt)
    pieces = [stream.push(i) for i in ids]
    assert not any(REPLACEMENT in p for p in pieces)
    # what decoding the prompt and the reply together gives past the prompt's text
    whole = tok.decode(prompt + ids)[len(tok.decode(prompt)):]
    assert "".join(pieces) + stream.finish() == whole
    assert whole.strip() == REPLY.strip()
    assert sum(1 for p in pieces if p) > len(ids) // 3     # it streams, not all at the end


def test_metaspace_keeps_the_first_tokens_space_after_a_prompt():
    tok = _metaspace()
    stream = TextStream(tok, tok.encode("say").ids)
    text = "".join(stream.push(i) for i in tok.encode(" the word").ids) + stream.finish()
    assert text == " the word"


def test_an_unfinished_character_is_held_then_finished():
    tok = _byte_level()
    ids = tok.encode("é").ids
    assert len(ids) == 2                      # its two UTF-8 bytes, one token each
    stream = TextStream(tok)
    assert stream.push(ids[0]) == ""
    assert stream.push(ids[1]) == "é"
    lone = TextStream(tok)
    assert lone.push(ids[0]) == "" and lone.finish() == REPLACEMENT
