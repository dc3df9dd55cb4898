#!/usr/bin/env bash
# Everything in rvvkit that needs an NVIDIA GPU, in one command (estimated at about 8 minutes
# on a 16-core GPU machine; each stage stops at its limit):
#
#   bash scripts/gpu_check.sh [OUT_DIR [STAGE...]]   # default /tmp/rvvkit-gpu-check, all stages
#   bash scripts/gpu_check.sh /tmp/out doctor gpu_tests    # where one command may run 10 minutes:
#   bash scripts/gpu_check.sh /tmp/out bench_gpu cuda_objects   # two calls
#
#  1. `rvvkit doctor` (driver, nvcc, device);
#  2. every GPU-marked test on the GPU executor (RVVKIT_TEST_EXECUTORS=cuda): tests/cuda, the
#     operator table, the ONNX conformance sample, the stored models, compare;
#  3. benchmarks/bench_gpu.py: every light, stored and (with torch) PyTorch model on the GPU
#     against PyTorch eager and onnxruntime, each model in processes of its own;
#  4. benchmarks/cuda_objects.py: how many model objects one process holds, static against
#     shared CUDA runtime.
# Each stage has a time limit, so a hang costs its stage only; the exit status is 0 only
# when every stage passed. OUT_DIR gets each stage's log, the tests' JUnit XML and the
# benchmark table (bench_gpu.md) and JSON.
#
# Python packages missing on the machine (cffi, pycparser, pyelftools on the lent GPU
# machines) are installed from wheels in .whl/ when there is one (see docs/guide/
# cuda-compare.md for how to fetch them).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/rvvkit-gpu-check}"
shift || true
stages=("$@")
[ "${#stages[@]}" -gt 0 ] || stages=(doctor gpu_tests bench_gpu cuda_objects)
for s in "${stages[@]}"; do
    case "$s" in doctor|gpu_tests|bench_gpu|cuda_objects) ;;
    *) echo "gpu_check: unknown stage '$s' (doctor, gpu_tests, bench_gpu, cuda_objects)" >&2
       exit 2 ;;
    esac
done
mkdir -p "$out"
export PYTHONUNBUFFERED=1 RVVKIT_CACHE_DIR="${RVVKIT_CACHE_DIR:-/tmp/rvvkit-gpu-cache}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py="${PYTHON:-python3}"
jobs="$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))"

if ! "$py" -c "import cffi, elftools" 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/rvvkit-site \
            .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/rvvkit-site"
    fi
fi

# GPU_CHECK_EMULATE=1: the same stages, small, on the CPU emulator (checks this script
# without a GPU; tests/cuda/test_gpu_check.py runs it so)
emulate="${GPU_CHECK_EMULATE:-}"
if [ -n "$emulate" ]; then
    echo "gpu_check: GPU_CHECK_EMULATE set: small stages on the CPU emulator, no GPU"
elif ! why="$("$py" -c 'from rvvkit.runtime.cuda import cuda_available as c
ok, why = c(); print(why); raise SystemExit(0 if ok else 1)' 2>&1)"; then
    echo "gpu_check: nothing to check here: ${why##*$'\n'}" >&2
    exit 2
else
    echo "gpu_check: $why; output in $out"
fi

failed=()
stage() {   # stage NAME SECONDS COMMAND...: run it with a limit, log to $out/NAME.txt
    local name="$1" limit="$2"
    shift 2
    [[ " ${stages[*]} " == *" $name "* ]] || return 0
    echo "== $name (at most ${limit} s)"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" > "$out/$name.txt" 2>&1
    local rc=$?
    tail -n 25 "$out/$name.txt"
    echo "== $name: exit $rc after $(( SECONDS - t0 )) s"
    [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
}

if [ -n "$emulate" ]; then
    tests=(env RVVKIT_TEST_EXECUTORS=cuda-emu "$py" -m pytest -m cuda -q -p no:cacheprovider
           tests/cuda/test_cuda_emu_memory.py)
    bench=(--emulate --models stored:lstm_kws_legacy --repeat 2)
    objects=(--emulate --count 4)
else
    tests=(env RVVKIT_TEST_EXECUTORS=cuda "$py" -m pytest -m cuda -n "$jobs" -q
           -p no:cacheprovider --junitxml="$out/gpu_tests.xml" tests/cuda tests/ops
           tests/qemu/test_conformance_sample.py tests/models tests/host/test_compare.py
           tests/host/test_nan_propagation.py)
    bench=(--repeat 20)
    objects=(--count 64)
fi
stage doctor 30 "$py" -m rvvkit doctor
stage gpu_tests 400 "${tests[@]}"
stage bench_gpu 400 "$py" benchmarks/bench_gpu.py --jobs "$jobs" "${bench[@]}" \
    --out "$out/bench" --json "$out/bench_gpu.json"
[ -f "$out/bench_gpu.txt" ] && cp "$out/bench_gpu.txt" "$out/bench_gpu.md"
stage cuda_objects 90 "$py" benchmarks/cuda_objects.py "${objects[@]}"

if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu_check: FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu_check: all stages passed"
