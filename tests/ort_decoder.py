"""onnxruntime as the generation reference for decoders, greedy, one token per call: those of
rvvkit.zoo.llm (onnxruntime-genai's form) with the shared past/present cache of `max_seq`
positions fed back each step, and transformers' exports (tests/models/llm), whose caches grow
by one position a step (`growing`)."""
from __future__ import annotations

from typing import List, Tuple

import numpy as np


def ort_greedy(model, prompt: List[int], new_tokens: int, max_seq: int, growing: bool = False,
               head: int = 0) -> Tuple[List[int], List[np.ndarray]]:
    """(generated ids, the logits row each was picked from). `model`: an ONNX model, or an
    onnxruntime InferenceSession of one (benchmarks time the loop without making it); `head`:
    the caches' head size where the model leaves it symbolic."""
    import onnxruntime as ort
    sess = model if hasattr(model, "run") else \
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    caches = {}
    for vi in sess.get_inputs():
        if vi.name.startswith("past_key_values"):
            dtype = np.float16 if vi.type == "tensor(float16)" else np.float32
            size = vi.shape[3] if isinstance(vi.shape[3], int) else head
            caches[vi.name] = np.zeros([1, vi.shape[1], 0 if growing else max_seq, size], dtype)
    names = [o.name for o in sess.get_outputs()]
    mask = any(vi.name == "attention_mask" for vi in sess.get_inputs())
    positions = any(vi.name == "position_ids" for vi in sess.get_inputs())
    tokens, rows = list(prompt), []
    for pos in range(len(prompt) + new_tokens - 1):
        feeds = dict(caches, input_ids=np.array([[tokens[pos]]], np.int64))
        if positions:
            feeds["position_ids"] = np.array([[pos]], np.int64)
        if mask and growing:   # the mask spans the past and the new token
            feeds["attention_mask"] = np.ones((1, pos + 1), np.int64)
        elif mask:   # onnxruntime-genai's form: the live positions marked in a mask of the bound
            feeds["attention_mask"] = (np.arange(max_seq) <= pos).astype(np.int64)[None]
        else:
            feeds.update(seqlens_k=np.array([pos], np.int32),
                         total_sequence_length=np.array(pos + 1, np.int32))
        out = dict(zip(names, sess.run(names, feeds)))
        for name in caches:
            caches[name] = out[name.replace("past_key_values", "present")]
        if pos >= len(prompt) - 1:
            rows.append(out["logits"][0, -1])
            tokens.append(int(np.argmax(rows[-1])))
    return tokens[len(prompt):], rows


def saved_decoder(folder, bound: int):
    """(folder, model): rvvkit.zoo's one-layer int4 decoder (seed 3) built with a cache of
    `bound` positions and saved as folder/dec.rvv; the folder holds no config files."""
    import rvvkit
    from rvvkit.zoo import llm as zoo_llm
    model = zoo_llm.decoder(zoo_llm.DecoderConfig(layers=1, bits=4), seed=3)
    rvvkit.build(model, max_seq=bound).save(str(folder / "dec.rvv"))
    return folder, model
