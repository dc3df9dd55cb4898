#!/usr/bin/env bash
# `rvvkit compare` with a plot: one model, the same inputs, every path this machine has (this
# host; RVV under QEMU at two vector lengths, with exact instruction counts; the CUDA code on
# the CPU emulator; an NVIDIA GPU), each checked against onnxruntime, in one table and one
# PNG (latency and max error per path; a path that cannot run here, e.g. `cuda` without a GPU,
# is listed as skipped with its reason and does not fail the command).
#
# Needs: rvvkit with onnx, onnxruntime and matplotlib (`pip install -e .[dev]`), a C/C++
# compiler; qemu-riscv64 and a riscv64 cross compiler for the QEMU rows, nvcc and a GPU for
# the cuda row (each row says why it is skipped when its tools are missing).
#
# Run:   bash examples/compare_plot.sh [OUTDIR]
#        (OUTDIR, else $OUTDIR, else a new temporary directory, receives compare.png)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-${OUTDIR:-$(mktemp -d -t rvvkit-compare.XXXXXX)}}"
mkdir -p "$OUT"
cd "$OUT"

# A model and inputs (any ONNX file works; e.g. `python3 -m rvvkit.zoo squeezenet model.onnx
# --inputs in.npz` for a real one, slower under QEMU and the CUDA emulator).
python3 "$HERE/tiny_model.py" model.onnx --inputs in.npz

# Build in memory, run on every path, compare each with the reference, print the table and
# draw compare.png. Exit status 1 if any path that ran disagrees with the reference (beyond
# --atol + --rtol * max|ref|) or failed; 0 otherwise.
#   --on       the paths (ssh://BOARD adds a board over SSH)
#   --vlen     one QEMU row per vector length
#   --repeat   timed runs per path (QEMU's latency is emulation speed, so compare RVV code
#              by its instruction count instead)
rvvkit compare model.onnx --inputs in.npz --on host,qemu,cuda-emu,cuda --vlen 128,512 \
    --repeat 3 --plot compare.png

# (--json prints the same as a document, for scripts.)
python3 - <<'EOF'
with open("compare.png", "rb") as f:
    head = f.read(8)
assert head == b"\x89PNG\r\n\x1a\n", "compare.png is not a PNG"
EOF
echo "OK: plot in $OUT/compare.png"
