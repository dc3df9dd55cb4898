#!/usr/bin/env bash
# The nightly-sized fuzz run of the artifact readers (CI runs 10^4 inputs per target; this
# runs ITER, default 10^6, per C build and 20x the hypothesis examples), with a fresh seed each
# night: a failure prints the seed, and the same command with SEED=<it> reproduces it.
#
#   bash scripts/fuzz_nightly.sh                 # ITER=1000000, SEED from the clock
#   ITER=100000 SEED=42 bash scripts/fuzz_nightly.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ITER=${ITER:-1000000}
SEED=${SEED:-$(date +%s)}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "fuzz_nightly: seed $SEED, $ITER inputs per build"
python3 - "$OUT/seed.rvv" <<'PY'
import sys
sys.path.insert(0, "tests")
from onnx import helper
import rvvkit
from conftest import make_model, rand
m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["y"], ["z"])],
               [("x", (1, 3, 6, 6))], [("z", (1, 4, 6, 6))], {"w": rand(4, 3, 3, 3)})
rvvkit.build(m, cuda=False).save(sys.argv[1])
PY
SAN=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all)
gcc -std=c11 "${SAN[@]}" runtime_c/fuzz_artifact.c -o "$OUT/fuzz_c"
"$OUT/fuzz_c" "$OUT/seed.rvv" "$ITER" "$SEED"
# clang's sanitizer runtimes are a separate package (libclang-rt-16-dev on Debian)
if command -v clang-16 >/dev/null &&
        clang-16 -std=c11 "${SAN[@]}" runtime_c/fuzz_artifact.c -o "$OUT/fuzz_clang" 2>/dev/null; then
    "$OUT/fuzz_clang" "$OUT/seed.rvv" "$ITER" "$((SEED + 1))"
else
    echo "fuzz_nightly: clang-16 with sanitizer runtimes not available; gcc build only"
fi
RVVKIT_FUZZ_SCALE=20 python3 -m pytest -q -p no:cacheprovider tests/unit/artifact/test_artifact_fuzz.py \
    --hypothesis-seed="$SEED"
