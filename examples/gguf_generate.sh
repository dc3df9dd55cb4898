#!/usr/bin/env bash
# A llama.cpp model file (GGUF) end to end: built as it is (its Q4_0 blocks kept as rvvkit's
# 4-bit weights, its tokenizer, end-of-text ids and chat template carried in the artifact),
# then text generated from a text prompt on this host and in a chat under QEMU (RVV), where
# the loop runs on the target and the tokens stream back as they come.
#
# The default file is the small Qwen2-architecture test model of the repository (random
# weights, so its text is gibberish; tests/llm/test_gguf.py checks its tokens against
# llama.cpp's); give your own instead, e.g. qwen2.5-0.5b-instruct-q4_0.gguf.
#
# Needs: what scripts/setup.sh installs (the gguf and tokenizers packages: rvvkit[llm]; QEMU
# and a riscv64 cross compiler for the chat).
#
# Run:   bash examples/gguf_generate.sh [MODEL.gguf [OUTDIR]]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
MODEL="$(realpath "${1:-$HERE/../tests/models/llm/gguf/qwen2_q4_0.gguf}")"
OUT="${2:-${OUTDIR:-$(mktemp -d -t rvvkit-gguf.XXXXXX)}}"
mkdir -p "$OUT"
cd "$OUT"
# the cache bound (prompt + reply) is the one thing a GGUF file cannot say
rvvkit build "$MODEL" --max-seq 128 -o model.rvv
rvvkit inspect model.rvv | grep -E "caches|generation|carries|prefill"
# text in, text out: the file's own tokenizer, no --tokenizer needed
rvvkit generate model.rvv --prompt "The quick brown fox" --max-new-tokens 16
# a chat turn read from stdin, rendered by the file's chat template, answered under QEMU
echo "Hello there" | rvvkit generate model.rvv --chat --on qemu --vlen 256 --max-new-tokens 12
echo "files in $OUT"
