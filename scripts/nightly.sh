#!/usr/bin/env bash
# The nightly run: what CI samples, whole. CI (.ci/run) runs each operator case on one of the
# plain QEMU VLENs (picked per case, so the table covers all of them) and compiles one CUDA
# source in four with strict nvcc; this runs every case on every VLEN and strictly compiles
# every CUDA source (RVVKIT_TEST_MATRIX=full, tests/executors.py), then the nightly-sized
# fuzzing of the artifact readers (scripts/fuzz_nightly.sh).
#
#   bash scripts/nightly.sh            # after scripts/setup.sh --board; about 2x CI's time
set -euo pipefail
cd "$(dirname "$0")/.."
RVVKIT_TEST_MATRIX=full python3 -m pytest -n "${JOBS:-auto}" -q
bash scripts/fuzz_nightly.sh
