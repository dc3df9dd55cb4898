#!/usr/bin/env bash
# A small language model end to end: a Qwen2-shaped decoder with random weights (the form
# onnxruntime-genai writes: GroupQueryAttention, a key/value cache shared by past and present),
# its weights quantized to 4 bits, built with a cache bound, then text generated on this host
# and on RVV under QEMU, where the loop runs in the runner (C on the target). The tokens match
# onnxruntime's greedy tokens (tests/llm check that for 64 steps on every executor).
#
# Needs: what scripts/setup.sh installs (QEMU and a riscv64 cross compiler for the second run).
#
# Run:   bash examples/llm_generate.sh [OUTDIR]
set -euo pipefail
OUT="${1:-${OUTDIR:-$(mktemp -d -t rvvkit-llm.XXXXXX)}}"
mkdir -p "$OUT"
cd "$OUT"
python3 -m rvvkit.zoo.llm qwen2-tiny decoder.onnx                 # float weights, random
# 4-bit blocks of 32 with int8 activations (accuracy_level 4), as onnxruntime-genai's CPU models
rvvkit quantize decoder.onnx --weights int4 --block 32 --accuracy 4 -o decoder_int4.onnx
# the cache holds 96 positions: prompt + generated tokens; it lives in the session, in place;
# prompts go through a second plan in chunks of 16 tokens (--prefill), sharing weights and cache
rvvkit build decoder_int4.onnx --max-seq 96 -o decoder_int4.rvv
rvvkit inspect decoder_int4.rvv | grep -E "caches|generation|prefill"
PROMPT=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20
rvvkit generate decoder_int4.rvv --prompt-ids $PROMPT --max-new-tokens 24
rvvkit generate decoder_int4.rvv --prompt-ids $PROMPT --max-new-tokens 24 --on qemu --vlen 256
# beyond the bound, generation stops there and says so
rvvkit generate decoder_int4.rvv --prompt-ids 1,2,3,4 --max-new-tokens 200 | tail -c 80
echo "files in $OUT"
