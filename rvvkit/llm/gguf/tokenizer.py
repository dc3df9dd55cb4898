"""The tokenizer inside a GGUF file as a `tokenizers` tokenizer.json, so that text prompts,
streamed text and chat work from the artifact alone.

llama.cpp keeps the vocabulary (tokenizer.ggml.tokens, token_type), and either BPE merges
(model "gpt2": byte-level BPE, split first by a regular expression its `pre` type names) or
scores (model "llama": SentencePiece pieces with byte fallback, "▁" for a space). Both map onto
tokenizers' BPE model; SentencePiece's merges are the vocabulary's pairs, likeliest piece
first."""
from __future__ import annotations

import json
import logging
from typing import Dict, List, Optional, Tuple

_LOG = logging.getLogger("rvvkit")

CONTROL, USER_DEFINED, BYTE = 3, 4, 6
_LETTERS = r"[^\r\n\p{L}\p{N}]?\p{L}+"
_CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
_REST = r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# tokenizer.ggml.pre -> (the splitting expressions in order, Unicode normalisation or None);
# each is the split its model's own tokenizer.json makes
PRE = {
    "qwen2": ([f"{_CONTRACTIONS}|{_LETTERS}|\\p{{N}}|{_REST}"], "NFC"),
    "llama-bpe": ([f"{_CONTRACTIONS}|{_LETTERS}|\\p{{N}}{{1,3}}|{_REST}"], None),
    "smollm": ([r"\p{N}", _GPT2], None),
    "gpt-2": ([_GPT2], None),
    "default": ([_GPT2], None),
}


def _split(regex: str) -> Dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
            "invert": False}


def _added(tokens: List[str], types: List[int]) -> List[Dict]:
    return [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": types[i] == CONTROL}
            for i, t in enumerate(tokens) if types[i] in (CONTROL, USER_DEFINED)]


def _byte_level(f, tokens: List[str], types: List[int]) -> Dict:
    pre = str(f.value("tokenizer.ggml.pre", "default"))
    if pre not in PRE:
        _LOG.warning("GGUF tokenizer pre-type %r is not known to rvvkit: text is split as "
                     "GPT-2 splits it (prompts given as text may tokenize differently from "
                     "llama.cpp; --prompt-ids are exact)", pre)
    regexes, norm = PRE.get(pre, PRE["default"])
    merges = [str(m) for m in f.value("tokenizer.ggml.merges", [])]
    return {
        "normalizer": {"type": norm} if norm else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [_split(r) for r in regexes] + [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": merges},
    }


def _spm_merges(tokens: List[str], types: List[int], scores: List[float]) -> List[List[str]]:
    """Every pair of pieces whose join is a piece, the likeliest join first."""
    ids = {t: i for i, t in enumerate(tokens) if types[i] not in (CONTROL, BYTE)}
    found: List[Tuple[float, int, int, str, str]] = []
    for piece, i in ids.items():
        for cut in range(1, len(piece)):
            a, b = piece[:cut], piece[cut:]
            if a in ids and b in ids:
                found.append((-scores[i], ids[a], ids[b], a, b))
    found.sort()
    return [[a, b] for _, _, _, a, b in found]


def _merge_list(pairs: List[List[str]]):
    """Merges as "a b" strings, which every tokenizers version reads; as [a, b] pairs (0.20
    on) only where a piece holds a space itself."""
    if any(" " in a or " " in b for a, b in pairs):
        return pairs
    return [f"{a} {b}" for a, b in pairs]


def _sentencepiece(f, tokens: List[str], types: List[int]) -> Dict:
    scores = [float(s) for s in f.value("tokenizer.ggml.scores")]
    unk = f.value("tokenizer.ggml.unknown_token_id", None)
    return {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None,
                  "unk_token": tokens[int(unk)] if unk is not None else None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)},
                  "merges": _merge_list(_spm_merges(tokens, types, scores))},
    }


def _post(f, tokens: List[str]) -> Optional[Dict]:
    """A BOS token first where the file asks for one (tokenizer.ggml.add_bos_token)."""
    bos = f.value("tokenizer.ggml.bos_token_id", None)
    if bos is None or not bool(f.value("tokenizer.ggml.add_bos_token", False)):
        return None
    name = tokens[int(bos)]
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": name, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": name, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {name: {"id": name, "ids": [int(bos)], "tokens": [name]}}}


def tokenizer_json(f) -> Optional[str]:
    """tokenizer.json text for the file's tokenizer; None where it has no vocabulary."""
    model = f.value("tokenizer.ggml.model", None)
    if model is None:
        return None
    tokens = [str(t) for t in f.value("tokenizer.ggml.tokens")]
    types = [int(t) for t in f.value("tokenizer.ggml.token_type", [1] * len(tokens))]
    if model == "gpt2":
        body = _byte_level(f, tokens, types)
    elif model == "llama":
        body = _sentencepiece(f, tokens, types)
    else:
        _LOG.warning("GGUF tokenizer model %r is not supported ('gpt2' byte-level BPE and "
                     "'llama' SentencePiece are): the artifact has no tokenizer; give "
                     "--prompt-ids or --tokenizer", model)
        return None
    doc = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": _added(tokens, types), "post_processor": _post(f, tokens), **body}
    return json.dumps(doc, ensure_ascii=False)


def eos_ids(f) -> List[int]:
    """The ids that end a reply: the file's eos and end-of-turn tokens."""
    ids = {f.value(f"tokenizer.ggml.{k}_token_id", None) for k in ("eos", "eot", "eom")}
    return sorted(int(i) for i in ids if i is not None)


def specials(f) -> Dict[str, str]:
    """The bos and eos token strings, which chat templates write as bos_token/eos_token."""
    if f.value("tokenizer.ggml.tokens", None) is None:
        return {}
    out = {}
    for key in ("bos", "eos"):
        i = f.value(f"tokenizer.ggml.{key}_token_id", None)
        if i is not None:
            out[f"{key}_token"] = str(f.value("tokenizer.ggml.tokens", None)[int(i)])
    return out
