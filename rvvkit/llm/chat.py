"""Chat turns for `rvvkit generate --chat`: the conversation rendered by the model's own chat
template (a Jinja template, as Hugging Face tokenizers carry it in tokenizer_config.json's
`chat_template`, or a file given by --chat-template), rendered the way transformers does
(a sandboxed environment, trim_blocks and lstrip_blocks, `raise_exception`), then encoded
without adding special tokens (the template writes them)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..errors import InputError, RvvkitError

CONFIG = "tokenizer_config.json"


def _jinja():
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise RvvkitError("--chat needs the jinja2 package: pip install 'rvvkit[llm]'") from None
    return ImmutableSandboxedEnvironment, TemplateError


def _special(value) -> str:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


class ChatTemplate:
    """render(messages) -> the text of the conversation so far, ready for the reply."""

    def __init__(self, source: str, where: str, specials: Optional[Dict[str, str]] = None):
        env_cls, error = _jinja()

        def raise_exception(message):
            raise error(message)
        env = env_cls(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        self.where, self.specials, self._error = where, dict(specials or {}), error
        try:
            self.template = env.from_string(source)
        except error as exc:
            raise InputError(f"chat template from {where}: {exc}") from None

    def render(self, messages: List[Dict[str, str]]) -> str:
        try:
            return self.template.render(messages=messages, add_generation_prompt=True,
                                        **self.specials)
        except self._error as exc:
            raise InputError(f"chat template from {self.where}: {exc}") from None


def load_template(tokenizer_path: Optional[str], template_path: Optional[str] = None,
                  carried: Optional[Tuple[str, Dict[str, str]]] = None) -> ChatTemplate:
    """The template of --chat-template FILE, else `chat_template` of the tokenizer_config.json
    beside the tokenizer (a string, or a list of named ones: "default"), else the one the
    artifact carries (`carried`: the template and its token strings, from a GGUF file); the
    bos/eos token strings are passed to the template as transformers passes them."""
    if tokenizer_path is None:
        return _carried(template_path, carried)
    config = Path(tokenizer_path).resolve().parent / CONFIG
    doc = {}
    if config.is_file():
        try:
            doc = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {config}: {exc}") from None
    specials = {k: _special(doc.get(k)) for k in ("bos_token", "eos_token")}
    if template_path:
        return _from_file(template_path, specials)
    source = doc.get("chat_template")
    if isinstance(source, list):
        named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
        source = named.get("default")
    if not isinstance(source, str) or not source:
        raise InputError(f"--chat needs a chat template: none in {config} "
                         f"({'no such file' if not config.is_file() else 'no chat_template'}); "
                         "give one with --chat-template FILE")
    return ChatTemplate(source, str(config), specials)


def _from_file(path: str, specials: Dict[str, str]) -> ChatTemplate:
    try:
        return ChatTemplate(Path(path).read_text(encoding="utf-8"), path, specials)
    except OSError as exc:
        raise InputError(f"cannot read chat template {path}: {exc}") from None


def _carried(template_path: Optional[str], carried) -> ChatTemplate:
    """--chat-template FILE or the artifact's own template, for the artifact's tokenizer."""
    specials = dict(carried[1]) if carried else {}
    if template_path:
        return _from_file(template_path, specials)
    if not carried:
        raise InputError("--chat needs a chat template: the artifact carries none; give one "
                         "with --chat-template FILE")
    return ChatTemplate(carried[0], "the artifact (from the GGUF file)", specials)
