#!/usr/bin/env bash
# `rvvkit compare` on real architectures (rvvkit.zoo: the onnx wheel's models with seeded random
# weights, the pre-softmax logits exposed as an output since random weights saturate the
# softmax): host vs RVV under QEMU (instruction counts at each VLEN) vs a CUDA GPU, against
# onnxruntime, side by side in one run. Paths this machine lacks are listed as skipped.
#   bash benchmarks/compare_paths.sh [MODEL ...]        (default: resnet50)
# Environment: PATHS (default host,qemu,cuda), VLENS (default 256), REPEAT (default 10),
# OUT (default benchmarks/out): the model, its inputs and MODEL.png (the chart) go there;
# JSON=1 prints the JSON document instead of the table.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
for model in "${@:-resnet50}"; do
    python3 -m rvvkit.zoo "$model" "$OUT/$model.onnx" --inputs "$OUT/$model.npz" --logits
    rvvkit compare "$OUT/$model.onnx" --inputs "$OUT/$model.npz" --on "${PATHS:-host,qemu,cuda}" \
        --vlen "${VLENS:-256}" --repeat "${REPEAT:-10}" --plot "$OUT/$model.png" \
        ${JSON:+--json}
done
