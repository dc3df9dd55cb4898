"""Generated token ids -> text as it becomes whole, for printing while a model generates.

A token on its own does not always decode to text: a byte-level BPE token may hold part of a
UTF-8 character (é is two bytes, often two tokens), and a SentencePiece-style (Metaspace)
tokenizer drops the space that starts a sequence, so every token decoded alone loses its
leading space. TextStream decodes a sliding window instead: the tokens since the last text it
gave plus a few before them for context, and gives the difference once the text no longer
ends in an unfinished character (U+FFFD)."""
from __future__ import annotations

from typing import List, Sequence

REPLACEMENT = "\ufffd"
CONTEXT = 5    # prompt tokens decoded before the first generated one: its leading space


class TextStream:
    """push(token) -> the text that token completes ('' while a character is unfinished);
    finish() -> what is left (an unfinished character as U+FFFD)."""

    def __init__(self, tokenizer, prompt: Sequence[int] = ()):
        self.tokenizer = tokenizer
        self.ids: List[int] = list(prompt)[-CONTEXT:]
        self.start = 0                 # first id of the window decoded for context
        self.read = len(self.ids)      # ids before this have been given as text

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def push(self, token: int) -> str:
        self.ids.append(int(token))
        before = self._decode(self.ids[self.start:self.read])
        text = self._decode(self.ids[self.start:])
        if len(text) <= len(before) or text.endswith(REPLACEMENT):
            return ""
        self.start, self.read = self.read, len(self.ids)
        return text[len(before):]

    def finish(self) -> str:
        before = self._decode(self.ids[self.start:self.read])
        text = self._decode(self.ids[self.start:])
        self.start = self.read = len(self.ids)
        return text[len(before):]
