"""What a decoder's own files say about generation, read at build time from the model's folder:
the ids that end a reply, the caches' head size and bound. onnxruntime-genai's builder writes
genai_config.json beside the model (model.eos_token_id), transformers and optimum write
generation_config.json and config.json (eos_token_id): an int or a list in each."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Tuple

from ..errors import InputError

# first found wins: genai's file is written for the exported model itself
SOURCES = (("genai_config.json", ("model", "eos_token_id")),
           ("generation_config.json", ("eos_token_id",)),
           ("config.json", ("eos_token_id",)))


def _ids(value, where: str) -> List[int]:
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                            for v in items):
        raise InputError(f"{where}: eos_token_id {value!r} is not a token id or a list of them")
    return sorted(set(items))


def _lookup(path: Path, keys) -> object:
    """The value at `keys` in the JSON file `path` (None where a key is missing). A file that
    is there but unreadable is an InputError: building on without what it says would, for
    the eos ids, generate past a reply's end silently."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def eos_from_folder(model_path) -> Optional[Tuple[List[int], str]]:
    """(eos ids, the file they came from) for a model file whose folder holds one of SOURCES
    with an eos_token_id, else None."""
    folder = Path(model_path).resolve().parent
    for name, keys in SOURCES:
        path = folder / name
        value = _lookup(path, keys) if path.is_file() else None
        if value is not None:
            return _ids(value, str(path)), name
    return None


def _genai_count(model_path, keys) -> Optional[int]:
    """The positive integer at `keys` in genai_config.json beside the model, else None."""
    path = Path(model_path).resolve().parent / "genai_config.json"
    value = _lookup(path, keys) if path.is_file() else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None


def head_size_from_folder(model_path) -> Optional[int]:
    """The attention head size genai_config.json beside the model states (model.decoder.
    head_size), for caches whose head dimension the graph leaves symbolic; else None."""
    return _genai_count(model_path, ("model", "decoder", "head_size"))


def bound_from_folder(model_path) -> Optional[int]:
    """The generation length genai_config.json beside the model states (search.max_length:
    prompt and reply together, what onnxruntime-genai sizes its caches to), the cache bound
    where --max-seq is not given; else None."""
    return _genai_count(model_path, ("search", "max_length"))
