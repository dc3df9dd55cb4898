"""GGUF files (llama.cpp's format) in: `rvvkit build model.gguf --max-seq N`.

reader.py reads the file and the decoder's shape, weights.py maps each block format onto
rvvkit's 4/8-bit weights, graph.py writes the decoder as the ONNX graph the rest of the
pipeline builds, tokenizer.py turns the vocabulary into a tokenizer.json."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ...errors import ModelError
from . import weights
from .graph import to_onnx
from .reader import GgufFile, shape_of
from .tokenizer import eos_ids, specials, tokenizer_json

_LOG = logging.getLogger("rvvkit")
MAGIC = b"GGUF"
DEFAULT_POSITIONS = 4096   # rotary rows when no bound is given (the build then asks for one)


def is_gguf(path) -> bool:
    """A file that starts as GGUF files do (whatever its name); a file named .gguf that
    does not is an error, not an ONNX model."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        head = f.read(4)
    if head != MAGIC and os.fspath(path).lower().endswith(".gguf"):
        raise ModelError(f"{os.fspath(path)} is not a GGUF file: it starts with {head!r}, not "
                         f"{MAGIC!r}")
    return head == MAGIC


@dataclass
class Gguf:
    """What a GGUF file gives a build: the graph and what generation needs beside it."""
    model: object                       # onnx ModelProto
    tokenizer: Optional[str]            # tokenizer.json text
    chat_template: Optional[str]
    eos: List[int] = field(default_factory=list)
    specials: Dict[str, str] = field(default_factory=dict)   # bos_token/eos_token for it
    context: int = 0
    summary: str = ""


def _check_types(f: GgufFile) -> None:
    """Every tensor of a type rvvkit cannot convert, named at once."""
    bad = [f"{n} ({t})" for n, t in f.tensor_types().items() if t not in weights.SUPPORTED]
    if bad:
        raise ModelError(f"{f.path}: {len(bad)} tensors of unsupported types: "
                         f"{', '.join(bad[:8])}{', ...' if len(bad) > 8 else ''} (supported: "
                         f"{', '.join(weights.SUPPORTED)})")


def load(path, max_seq: Optional[int] = None) -> Gguf:
    f = GgufFile(path)
    shape = shape_of(f)
    _check_types(f)
    if max_seq is not None and max_seq > shape.context:
        _LOG.warning("--max-seq %d is beyond the %d positions %s was trained on", max_seq,
                     shape.context, os.path.basename(str(path)))
    positions = max_seq or min(shape.context, DEFAULT_POSITIONS)
    model = to_onnx(f, shape, positions)
    kinds = sorted(set(f.tensor_types().values()))
    return Gguf(model, tokenizer_json(f), f.value("tokenizer.chat_template", None), eos_ids(f),
                specials(f), shape.context,
                f"GGUF {shape.arch}: {shape.layers} layers, hidden {shape.hidden}, vocab "
                f"{shape.vocab}, tensors {'/'.join(kinds)}")
