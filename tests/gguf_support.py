"""GGUF helpers shared by the tests that read the stored GGUF files (tests/llm/test_gguf.py,
tests/ssh/test_debian_board.py) and the script that writes them (tests/llm/export_gguf.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def as_f32(src: Path, dst: Path) -> None:
    """A copy of the GGUF file `src` with every tensor float32 (its values unchanged where
    they were F16/BF16): on it llama.cpp computes in float32 alone, the exact reference for
    rvvkit's graph (in F16/BF16 llama.cpp rounds activations to 16 bits; in Q8_0/Q4_0/Q4_K it
    quantizes them to int8)."""
    import gguf
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            w.add_array(key, field.contents())
        else:
            w.add_key_value(key, field.contents(), kind)
    for t in r.tensors:
        shape = tuple(reversed(t.shape.tolist()))
        w.add_tensor(t.name, gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape)
                     .astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
