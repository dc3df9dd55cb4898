"""A GGUF file (llama.cpp's model format) as rvvkit reads it: the metadata, the decoder's shape
for the architectures rvvkit builds, and each tensor's bytes with its ggml type.

Read through the `gguf` package, memory-mapped: a model's weights are not copied until a
tensor is converted. Every metadata key a decoder needs is named in one place (`shape_of`),
so a file that lacks one fails with that key's name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from ...errors import ModelError, RvvkitError

# llama.cpp applies rotary embeddings to adjacent pairs for these ("NORM": its converter
# permutes Llama's query/key rows for that) and to the two halves of each head ("NEOX") for
# these; the GroupQueryAttention rvvkit builds says which by rotary_interleaved. qwen3 is
# qwen2 without the q/k/v biases, with an RMS norm over each query and key head (attn_q_norm,
# attn_k_norm) before the rotation, and heads that need not divide the width (key_length).
ROPE_PAIRS = ("llama",)
ROPE_HALVES = ("qwen2", "qwen3")
ARCHS = ROPE_PAIRS + ROPE_HALVES

_MISSING = object()


@dataclass(frozen=True)
class Shape:
    """A decoder's dimensions as its GGUF metadata states them."""
    arch: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head: int
    intermediate: int
    context: int
    rope_theta: float
    rope_dims: int
    eps: float

    @property
    def interleaved(self) -> int:
        return int(self.arch in ROPE_PAIRS)


class GgufFile:
    """The metadata (`value`) and tensors (`tensor`, `names`) of one GGUF file."""

    def __init__(self, path):
        try:
            from gguf import GGUFReader
        except ImportError:
            raise RvvkitError("reading a GGUF file needs the gguf package: pip install "
                              "'rvvkit[llm]'") from None
        self.path = str(path)
        try:
            self._reader = GGUFReader(self.path)
        except FileNotFoundError:
            raise ModelError(f"model file not found: {self.path}") from None
        except Exception as exc:  # the package raises ValueError, struct and numpy errors
            raise ModelError(f"cannot read GGUF file {self.path}: {exc} (a truncated or "
                             "corrupt download?)") from None
        self._tensors = {t.name: t for t in self._reader.tensors}
        short = [t.name for t in self._reader.tensors if t.data.nbytes != t.n_bytes]
        if short:
            raise ModelError(f"{self.path} is truncated: tensor {short[0]} has "
                             f"{self._tensors[short[0]].data.nbytes} of its "
                             f"{self._tensors[short[0]].n_bytes} bytes")

    def value(self, key: str, default=_MISSING):
        field = self._reader.fields.get(key)
        if field is None:
            if default is _MISSING:
                raise ModelError(f"{self.path}: GGUF metadata {key!r} is missing")
            return default
        return field.contents()

    def names(self) -> List[str]:
        return list(self._tensors)

    def has(self, name: str) -> bool:
        return name in self._tensors

    def tensor(self, name: str):
        """(ggml type name, shape in row-major order [rows, columns], the raw data)."""
        t = self._tensors.get(name)
        if t is None:
            raise ModelError(f"{self.path}: tensor {name!r} is missing")
        # ggml lists dimensions fastest first: ne[0] is the length of a row
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        return t.tensor_type.name, shape, t.data

    def tensor_types(self) -> Dict[str, str]:
        return {name: t.tensor_type.name for name, t in self._tensors.items()}


def shape_of(f: GgufFile) -> Shape:
    arch = str(f.value("general.architecture"))
    if arch not in ARCHS:
        raise ModelError(f"{f.path}: GGUF architecture {arch!r} is not supported (rvvkit builds "
                         f"{', '.join(ARCHS)})")

    def key(name: str, default=_MISSING):
        value = f.value(f"{arch}.{name}", default)
        if isinstance(value, (list, tuple, str)) and value is not default:
            # per-layer arrays (head counts that vary by layer) are not this decoder's form
            raise ModelError(f"{f.path}: GGUF metadata {arch}.{name} is {value!r:.60}, not one "
                             "number (per-layer sizes are not supported)")
        return value

    hidden, heads = int(key("embedding_length")), int(key("attention.head_count"))
    head = int(key("attention.key_length", hidden // heads))
    if int(key("attention.value_length", head)) != head:
        raise ModelError(f"{f.path}: key and value heads of different sizes are not supported")
    scaling = str(key("rope.scaling.type", "none"))
    if scaling not in ("none", ""):
        raise ModelError(f"{f.path}: rope scaling {scaling!r} is not supported (only plain "
                         "rotary embeddings, with or without llama 3's rope_freqs)")
    _, vocab_rows, _ = _rows(f, "token_embd.weight")
    return Shape(arch=arch, vocab=int(key("vocab_size", vocab_rows)), hidden=hidden,
                 layers=int(key("block_count")), heads=heads,
                 kv_heads=int(key("attention.head_count_kv", heads)), head=head,
                 intermediate=int(key("feed_forward_length")),
                 context=int(key("context_length")),
                 rope_theta=float(key("rope.freq_base", 10000.0)),
                 rope_dims=int(key("rope.dimension_count", head)),
                 eps=float(key("attention.layer_norm_rms_epsilon")))


def _rows(f: GgufFile, name: str):
    kind, shape, _ = f.tensor(name)
    return kind, shape[0], shape[-1]


def rope_factors(f: GgufFile) -> Optional[np.ndarray]:
    """llama 3's per-frequency divisors (the rope_freqs tensor), where the file has them."""
    if not f.has("rope_freqs.weight"):
        return None
    kind, _, data = f.tensor("rope_freqs.weight")
    if kind != "F32":
        raise ModelError(f"{f.path}: rope_freqs.weight is {kind}, F32 expected")
    return np.asarray(data, np.float32).reshape(-1)
