#!/usr/bin/env bash
# End to end on a real architecture: SqueezeNet (shipped with the onnx wheel, weights replaced
# by seeded random ones) → artifact → JIT on this host → outputs checked against onnxruntime,
# then `rvvkit compare` across host, QEMU (RVV) and CUDA.
#
# Needs: what scripts/setup.sh installs (rvvkit with its dev extras, a C compiler, QEMU and a
# riscv64 cross compiler; nvcc and a GPU for the cuda row, listed as skipped otherwise).
#
# Run:   bash examples/quickstart.sh [OUTDIR]
#        (OUTDIR, else $OUTDIR, else a new temporary directory, receives the model, the
#        artifact, inputs, outputs and compare.png)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-${OUTDIR:-$(mktemp -d -t rvvkit-quickstart.XXXXXX)}}"
mkdir -p "$OUT"
cd "$OUT"
python3 -m rvvkit.zoo squeezenet squeezenet.onnx --inputs inputs.npz
rvvkit build squeezenet.onnx -o squeezenet.rvv
rvvkit inspect squeezenet.rvv | sed -n '1,25p'
# (sed, not head: a reader that stops early ends rvvkit with status 141, as it does any
# command in a pipeline, which `set -o pipefail` would count as a failure)
rvvkit run squeezenet.rvv --inputs inputs.npz --output outputs.npz --profile \
    | sed -n '1,20p'
python3 "$HERE/compare_with_onnxruntime.py" squeezenet.onnx inputs.npz outputs.npz
# The same model on every path this machine has: host, RVV under QEMU (with its instruction
# count), and an NVIDIA GPU when there is one (listed as skipped, with the reason, otherwise).
rvvkit compare squeezenet.onnx --inputs inputs.npz --on host,qemu,cuda --repeat 5 \
    --plot compare.png
echo "files in $OUT (compare.png: the comparison as a chart)"
