"""Regenerates the stored GGUF test models: tests/models/llm/gguf/<name>.gguf, each with
<name>.json (a prompt, llama.cpp's own greedy tokens and logits for it, a text and the ids
llama.cpp's tokenizer gives it, and the tool versions that made them).

Small decoders with seeded random weights, written with the `gguf` package and quantized as
llama.cpp quantizes (the package's Q4_0/Q8_0/BF16 follow ggml's reference code; the K-quant
file goes through llama.cpp's own llama-quantize):
- qwen2_q4_0: Qwen2 (q/k/v biases, rotary on halves), Q4_0 layers, the tied token table
  and head at Q8_0 (as a Q4_0 Qwen2.5-0.5B keeps it), byte-level BPE tokenizer, ChatML;
- qwen2_q8_0, qwen2_f16, qwen2_q5_0, qwen2_q5_1: the same weights at Q8_0, F16, Q5_0 (the
  table at Q8_0) and Q5_1;
- qwen3_q8_0: Qwen3 (per-head query/key norms, heads wider than width / heads), Q8_0;
- llama_bf16: Llama (no biases, rotary on pairs, its own head), BF16 layers and F32 rest,
  SentencePiece tokenizer with byte fallback;
- llama_q4_k_m: a Llama of K-sized rows (256), F16 through `llama-quantize Q4_K_M`.

Developer tool: needs llama.cpp built for this machine (benchmarks/peer_llama_build.py --host
builds it; the reference program tests/llm/gguf_reference.cpp is compiled against it):
from the repository root,  python3 tests/llm/export_gguf.py"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gguf_support import as_f32  # noqa: E402
from peer_llama import _byte_chars as byte_alphabet  # noqa: E402  (GPT-2's byte alphabet)

OUT = Path(__file__).resolve().parents[1] / "models" / "llm" / "gguf"
LLAMA = Path.home() / ".cache" / "rvvkit-peer-llama"
PROMPT_TEXT = "The quick brown fox jumps over the lazy dog. Héllo, wörld!"
NEW_TOKENS = 64
LOGIT_STEPS = 16   # the logits stored: of the first steps (each is a vocabulary wide)
CORPUS = ("the quick brown fox jumps over the lazy dog while the other dogs sleep in the warm "
          "sun and the fox runs home to the den of the forest where the others wait " * 3)
CHATML = ("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
          "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
          "{% endif %}")


def train_merges(words, count):
    """`count` BPE merges learnt from `words` (lists of symbols): the commonest pair each time."""
    merges = []
    words = [list(w) for w in words]
    for _ in range(count):
        pairs = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if (w[i], w[i + 1]) == best:
                    w[i:i + 2] = [w[i] + w[i + 1]]
                i += 1
    return merges


def bpe_vocab(vocab):
    """(tokens, types, merges, specials) of a byte-level BPE of `vocab` tokens."""
    alphabet = byte_alphabet()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    words = [[alphabet[b] for b in (" " + w).encode()] for w in CORPUS.split()]
    merges = train_merges(words, vocab - 256 - len(specials))
    tokens = alphabet + [a + b for a, b in merges] + specials
    types = [1] * (len(tokens) - len(specials)) + [3] * len(specials)
    return tokens, types, [f"{a} {b}" for a, b in merges], specials


def spm_vocab(vocab):
    """(tokens, types, scores) of a SentencePiece vocabulary with byte fallback."""
    words = [list("\u2581" + w) for w in CORPUS.split()]
    base = sorted({c for w in words for c in w})
    specials = ["<unk>", "<s>", "</s>"]
    room = vocab - len(specials) - 256 - len(base)
    merges = train_merges(words, room)
    pieces = base + [a + b for a, b in merges]
    unused = [f"<unused{i}>" for i in range(room - len(merges))]  # the corpus ran out of pairs
    tokens = specials + [f"<0x{b:02X}>" for b in range(256)] + pieces + unused
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces) + [5] * len(unused)
    # likelier pieces score higher: the base characters, then each merge in the order learnt
    scores = [0.0] * (len(specials) + 256) + [-float(i) for i in range(len(pieces))] + \
        [-1e9] * len(unused)
    return tokens, types, scores


CONFIGS = {
    "qwen2": dict(arch="qwen2", vocab=320, hidden=64, heads=4, kv_heads=2, layers=2, ffn=128,
                  bias=True, tied=True, theta=1e6),
    "llama": dict(arch="llama", vocab=384, hidden=96, heads=6, kv_heads=2, layers=2, ffn=160,
                  bias=False, tied=False, theta=1e4),
    # Qwen3: no biases, an RMS norm over each query and key head, heads of 32 on a width of 64
    # (key_length: 4 x 32 = 128 query columns), tied embeddings
    "qwen3": dict(arch="qwen3", vocab=320, hidden=64, heads=4, kv_heads=2, layers=2, ffn=128,
                  bias=False, tied=True, theta=1e6, head=32),
    "llama_k": dict(arch="llama", vocab=384, hidden=256, heads=4, kv_heads=2, layers=2, ffn=512,
                    bias=False, tied=False, theta=1e4),
}


def weights(cfg, seed=0):
    """name -> float32 array, in ggml's row-major view ([out, in] for a linear layer)."""
    rng = np.random.default_rng(seed)
    h, f = cfg["hidden"], cfg["ffn"]
    head = cfg.get("head", h // cfg["heads"])
    kv, qw = cfg["kv_heads"] * head, cfg["heads"] * head

    def lin(n, k):   # gain 2 and a small token table: layers that move each token's state
        return (rng.standard_normal((n, k)) * 2 * k ** -0.5).astype(np.float32)  # (else a
        # tied head keeps choosing the token it was given)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(h)).astype(np.float32)
    w = {"token_embd.weight": (0.2 * rng.standard_normal((cfg["vocab"], h))).astype(np.float32)}
    for i in range(cfg["layers"]):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = norm()
        for t, n in (("q", qw), ("k", kv), ("v", kv)):
            w[p + f"attn_{t}.weight"] = lin(n, h)
            if cfg["bias"]:
                w[p + f"attn_{t}.bias"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
        if cfg["arch"] == "qwen3":
            for t in ("q", "k"):
                w[p + f"attn_{t}_norm.weight"] = (1.0 + 0.1 * rng.standard_normal(head)).astype(
                    np.float32)
        w[p + "attn_output.weight"] = lin(h, qw)
        w[p + "ffn_norm.weight"] = norm()
        w[p + "ffn_gate.weight"], w[p + "ffn_up.weight"] = lin(f, h), lin(f, h)
        w[p + "ffn_down.weight"] = lin(h, f)
    w["output_norm.weight"] = norm()
    if not cfg["tied"]:
        w["output.weight"] = (rng.standard_normal((cfg["vocab"], h)) * 2 * h ** -0.5).astype(
            np.float32)
    return w


def write(path: Path, cfg, kind_of) -> None:
    """The GGUF file of CONFIGS entry `cfg`, each 2-D weight in the type kind_of(name) gives."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    arch, head = cfg["arch"], cfg.get("head", cfg["hidden"] // cfg["heads"])
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(path.stem)
    w.add_context_length(256)
    w.add_embedding_length(cfg["hidden"])
    w.add_block_count(cfg["layers"])
    w.add_feed_forward_length(cfg["ffn"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv_heads"])
    w.add_rope_dimension_count(head)
    if "head" in cfg:
        w.add_key_length(head)
        w.add_value_length(head)
    w.add_rope_freq_base(cfg["theta"])
    w.add_layer_norm_rms_eps(1e-6)
    if arch in ("qwen2", "qwen3"):
        tokens, types, merges, specials = bpe_vocab(cfg["vocab"])
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(tokens.index("<|endoftext|>"))
        w.add_eos_token_id(tokens.index("<|im_end|>"))
        w.add_add_bos_token(False)
        w.add_chat_template(CHATML)
    else:
        tokens, types, scores = spm_vocab(cfg["vocab"])
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_scores(scores)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
    for name, x in weights(cfg).items():
        kind = kind_of(name) if x.ndim == 2 else "F32"
        if kind == "F32":
            w.add_tensor(name, x)
        elif kind == "F16":
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, Q[kind]), raw_dtype=Q[kind])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def reference_program() -> Path:
    src = LLAMA / "src"
    tree = next(src.glob("llama.cpp-*"))
    host, exe = LLAMA / "host", LLAMA / "gguf_reference"
    libs = [host / "src/libllama.a", host / "ggml/src/libggml.a",
            host / "ggml/src/libggml-cpu.a", host / "ggml/src/libggml-base.a"]
    subprocess.run(["g++", "-O2", "-std=c++17", f"-I{tree}/include", f"-I{tree}/ggml/include",
                    str(Path(__file__).with_name("gguf_reference.cpp")), "-o", str(exe),
                    *map(str, libs), "-fopenmp", "-lpthread", "-ldl"], check=True)
    return exe


def reference(exe: Path, path: Path, prompt, text: str) -> dict:
    def call(*args):
        done = subprocess.run([str(exe), str(path), *args], check=True, capture_output=True,
                              text=True)
        return json.loads(done.stdout)
    gen = call("generate", ",".join(map(str, prompt)), str(NEW_TOKENS))
    tree = next((LLAMA / "src").glob("llama.cpp-*")).name
    import importlib.metadata as md
    return {"prompt": prompt, "tokens": gen["tokens"],
            "logits": np.round(np.array(gen["logits"][:LOGIT_STEPS], np.float64), 5).tolist(),
            "text": text, "text_ids": call("tokenize", text)["ids"],
            "made_by": {"llama.cpp": tree, "gguf": md.version("gguf"),
                        "numpy": np.__version__}}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    exe = reference_program()
    qwen_layers = {"Q4_0": lambda n: "Q8_0" if n == "token_embd.weight" else "Q4_0",
                   "Q8_0": lambda n: "Q8_0", "F16": lambda n: "F16",
                   # what llama-quantize falls back to for rows not whole K-blocks (Qwen2.5-0.5B's
                   # 896 columns in a Q4_K_M file are Q5_0)
                   "Q5_0": lambda n: "Q8_0" if n == "token_embd.weight" else "Q5_0",
                   "Q5_1": lambda n: "Q5_1"}
    files = [(f"qwen2_{k.lower()}", CONFIGS["qwen2"], f) for k, f in qwen_layers.items()]
    files.append(("qwen3_q8_0", CONFIGS["qwen3"], lambda n: "Q8_0"))
    files.append(("llama_bf16", CONFIGS["llama"],
                  lambda n: "F32" if n in ("token_embd.weight", "output.weight") else "BF16"))
    for name, cfg, kind_of in files:
        write(OUT / f"{name}.gguf", cfg, kind_of)
    source = OUT / "llama_k_f16.gguf"
    write(source, CONFIGS["llama_k"], lambda n: "F16")
    quantize = LLAMA / "host" / "bin" / "llama-quantize"
    subprocess.run([str(quantize), str(source), str(OUT / "llama_q4_k_m.gguf"), "Q4_K_M"],
                   check=True, capture_output=True)
    source.unlink()
    for name in [n for n, _, _ in files] + ["llama_q4_k_m"]:
        path = OUT / f"{name}.gguf"
        prompt = [5, 17, 33, 2, 99] if name.startswith("qwen") else [1, 300, 17, 33, 290]
        ref = reference(exe, path, prompt, PROMPT_TEXT)
        copy = OUT / f"{name}.f32.tmp"
        as_f32(path, copy)
        exact = reference(exe, copy, prompt, PROMPT_TEXT)
        copy.unlink()
        ref["f32"] = {"tokens": exact["tokens"], "logits": exact["logits"]}
        (OUT / f"{name}.json").write_text(json.dumps(ref) + "\n")
        print(f"wrote {path.name} ({path.stat().st_size} bytes): tokens {ref['tokens'][:8]}...",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
