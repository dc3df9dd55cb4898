#!/usr/bin/env bash
# End to end on a real architecture: SqueezeNet (shipped with the onnx wheel, weights replaced
# by seeded random ones) → artifact → JIT on this host → outputs checked against onnxruntime,
# then `rvvkit compare` across host, QEMU (RVV) and CUDA.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p out
python3 -m rvvkit.zoo squeezenet out/squeezenet.onnx --inputs out/inputs.npz
rvvkit build out/squeezenet.onnx -o out/squeezenet.rvv
rvvkit inspect out/squeezenet.rvv | sed -n '1,25p'
rvvkit run out/squeezenet.rvv --inputs out/inputs.npz --output out/outputs.npz --profile \
    | head -n 20
python3 compare_with_onnxruntime.py out/squeezenet.onnx out/inputs.npz out/outputs.npz
# The same model on every path this machine has: host, RVV under QEMU (with its instruction
# count), and an NVIDIA GPU when there is one (listed as skipped, with the reason, otherwise).
rvvkit compare out/squeezenet.onnx --inputs out/inputs.npz --on host,qemu,cuda --repeat 5 \
    --plot out/compare.png
