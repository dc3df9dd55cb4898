#!/usr/bin/env bash
# Precompiled kernels, for targets without a compiler (Buildroot images on K230 or Milk-V
# Duo, vendor TinaLinux): `rvvkit pack` compiles the artifact's C here, for riscv64 (RVV code
# for any VLEN) and this machine, and stores the objects and the C runner inside the artifact,
# checksummed like every section. Then the artifact runs where no compiler exists: here, QEMU
# (an emulated RVV board) and this host with RVVKIT_COMPILER naming a compiler that does not
# exist, so nothing can be compiled.
#
# Needs: rvvkit with onnx and onnxruntime (`pip install -e .[dev]`), a host C compiler,
# qemu-riscv64 and a riscv64 cross compiler (scripts/setup.sh installs them) for packing.
#
# Run:   bash examples/board_without_compiler.sh [OUTDIR]
#        (OUTDIR, else $OUTDIR, else a new temporary directory, receives the model,
#        artifacts and outputs)
#
# A real board over SSH on which no compiler is found runs the same artifact the same way:
#   rvvkit run model.packed.rvv --on ssh://k230 --inputs in.npz --output out.npz
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-${OUTDIR:-$(mktemp -d -t rvvkit-precompiled.XXXXXX)}}"
mkdir -p "$OUT"
cd "$OUT"

echo "== a model, built as usual: the artifact carries C source, compiled where it runs"
python3 "$HERE/tiny_model.py" model.onnx --inputs in.npz
rvvkit build model.onnx -o model.rvv -q

echo "== pack: add kernels and runner compiled here for riscv64 and for this machine"
# (`rvvkit build model.onnx --precompile riscv64,x86_64` does both steps at once)
rvvkit pack model.rvv --precompile "riscv64,$(uname -m)" -o model.packed.rvv
# the new sections: name, offset, size, sha256
rvvkit inspect model.packed.rvv | grep -E "^ *\.rvvkit\.(so|runner)\."

# From here on no compiler can be found: RVVKIT_COMPILER names one that does not exist.
export RVVKIT_COMPILER=/nonexistent/cc

echo "== QEMU (RVV 1.0, VLEN 256) with no compiler: the precompiled riscv64 objects run"
rvvkit run model.packed.rvv --on qemu --vlen 256 --inputs in.npz --output out_qemu.npz
python3 "$HERE/compare_with_onnxruntime.py" model.onnx in.npz out_qemu.npz

echo "== this host with no compiler: the precompiled $(uname -m) kernels run in process"
rvvkit run model.packed.rvv --on host --inputs in.npz --output out_host.npz
python3 "$HERE/compare_with_onnxruntime.py" model.onnx in.npz out_host.npz

echo "== the artifact without them cannot run here, and says both ways out"
status=0
rvvkit run model.rvv --on qemu --inputs in.npz 2> refusal.txt > /dev/null || status=$?
if [ "$status" -ne 1 ]; then
    echo "expected exit 1 without a compiler or precompiled kernels, got $status" >&2
    cat refusal.txt >&2
    exit 1
fi
echo "  refused (exit 1): $(tail -n 1 refusal.txt)"

# Where a compiler does work, executors still compile by default (the board's own compiler
# knows its CPU best); --prefer-precompiled (or RVVKIT_PREFER_PRECOMPILED=1) uses the packed
# objects first.
echo "OK: files in $OUT"
