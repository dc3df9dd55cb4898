"""onnxruntime-genai as a host peer (a benchmark tool: rvvkit never imports it): the decoder
file rvvkit's zoo writes in onnxruntime-genai's form (`mask=True`: attention_mask in, the
lengths computed in the graph, caches bound-sized and shared between past and present), put in
a folder with the genai_config.json onnxruntime-genai's model builder would write for it, and
run through genai's own greedy generator.

    from peer_genai import GenaiPeer
    peer = GenaiPeer(model_proto, cfg, bound=256, threads=1)   # None when genai is missing
    seconds_prompt, seconds_after_first, tokens = peer.run(prompt_ids, new_tokens)
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple


def available() -> Optional[str]:
    """genai's version, or None when it is not installed."""
    try:
        import onnxruntime_genai as og
    except ImportError:
        return None
    return og.__version__


def genai_config(cfg, bound: int, threads: int, filename: str = "model.onnx") -> dict:
    """What onnxruntime-genai's builder writes for a Qwen2-style decoder of `cfg`, for CPU."""
    return {
        "model": {
            "bos_token_id": 1, "eos_token_id": [2], "pad_token_id": 0,
            "context_length": bound, "type": "qwen2", "vocab_size": cfg.vocab,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": [],
                                    "intra_op_num_threads": threads,
                                    "inter_op_num_threads": 1},
                "filename": filename, "head_size": cfg.head, "hidden_size": cfg.hidden,
                "num_attention_heads": cfg.heads, "num_hidden_layers": cfg.layers,
                "num_key_value_heads": cfg.kv_heads,
                "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                           "past_key_names": "past_key_values.%d.key",
                           "past_value_names": "past_key_values.%d.value"},
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
            },
        },
        "search": {"do_sample": False, "num_beams": 1, "num_return_sequences": 1,
                   "max_length": bound, "min_length": 0, "past_present_share_buffer": True,
                   "early_stopping": True, "temperature": 1.0, "top_k": 1, "top_p": 1.0,
                   "repetition_penalty": 1.0, "length_penalty": 1.0,
                   "no_repeat_ngram_size": 0, "diversity_penalty": 0.0},
    }


class GenaiPeer:
    """The model folder and genai's Model, loaded once; `run` generates greedily."""

    def __init__(self, model, cfg, bound: int, threads: int):
        import onnx
        import onnxruntime_genai as og
        self._dir = tempfile.TemporaryDirectory(prefix="rvvkit-genai-")
        folder = Path(self._dir.name)
        onnx.save(model, str(folder / "model.onnx"))   # < 2 GB: one file, the proto untouched
        (folder / "genai_config.json").write_text(
            json.dumps(genai_config(cfg, bound, threads), indent=1))
        self.model = og.Model(str(folder))
        self.bound = bound

    def run(self, prompt: List[int], tokens: int) -> Tuple[float, float, List[int]]:
        """(seconds for the prompt up to the first token, seconds of the `tokens` - 1 after
        it, the greedy tokens). The first token is chosen from the prompt's logits."""
        import onnxruntime_genai as og
        params = og.GeneratorParams(self.model)
        params.set_search_options(do_sample=False, max_length=len(prompt) + tokens)
        gen = og.Generator(self.model, params)
        t0 = time.perf_counter()
        gen.append_tokens(prompt)           # the prompt in one call
        gen.generate_next_token()           # the first token, from the prompt's logits
        out = [int(gen.get_next_tokens()[0])]
        t1 = time.perf_counter()
        for _ in range(tokens - 1):         # each a decoding step on the last token
            gen.generate_next_token()
            out.append(int(gen.get_next_tokens()[0]))
        return t1 - t0, time.perf_counter() - t1, out

    def close(self) -> None:
        del self.model
        self._dir.cleanup()
