#!/usr/bin/env bash
# tests/gpu/run.sh — the GPU checks of the cuda backend, for a machine with an NVIDIA GPU
# (the `device` tool lends one to some sessions). From the repository root:
#     tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu)
# 1. configures and builds lathe + the cuda tests (Release; GUI and ONNX off to save time),
# 2. prints the GPU and driver (nvidia-smi) and what the cuda backend sees,
# 3. runs the cuda tests: render + NVRTC for sm_80/sm_90, golden text, and the
#    differential tests on `cuda` against the interpreter (which skip without a GPU),
# 4. runs `lathe bench --backend cuda` (JSON lines) when the app has the bench command.
# Results go to $OUT (when set, e.g. by the device tool) or BUILD_DIR/gpu-results.
# Exit status: non-zero when a build step or a test fails (the bench is reported only).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
RESULTS=${OUT:-$BUILD/gpu-results}
mkdir -p "$RESULTS"
JOBS=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo; echo "=== $* ==="; }

step "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$RESULTS/nvidia-smi.txt" || echo "nvidia-smi not found"
ls -l /usr/local/cuda 2>&1 | head -1

step "configure + build ($BUILD)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_WITH_GUI=OFF -DLATHE_WITH_ONNX=OFF \
  > "$RESULTS/configure.log" 2>&1 || { tail -30 "$RESULTS/configure.log"; exit 1; }
grep -q lathe_backend_cuda "$BUILD/build.ninja" || { echo "the cuda backend was not configured (no CUDA toolkit?)"; exit 1; }
cmake --build "$BUILD" --target lathe cuda_tests -j"$JOBS" > "$RESULTS/build.log" 2>&1 || { tail -40 "$RESULTS/build.log"; exit 1; }
if [ -f "$BUILD/tests/backends/backend_tests" ] || grep -q "backend_tests" "$BUILD/build.ninja"; then
  cmake --build "$BUILD" --target backend_tests -j"$JOBS" >> "$RESULTS/build.log" 2>&1 || true
fi

step "cuda tests (render, NVRTC, golden, differential vs interp)"
"$BUILD/tests/cuda/cuda_tests" --gtest_color=no 2>&1 | tee "$RESULTS/cuda_tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if grep -q "SKIPPED" "$RESULTS/cuda_tests.txt" && grep -q "CudaGpu" "$RESULTS/cuda_tests.txt"; then
  grep -A1 "SKIPPED" "$RESULTS/cuda_tests.txt" | head -5
fi

step "lathe kernels --backend cuda (softmax sample)"
"$BUILD/app/lathe" kernels samples/03-softmax.lathe --backend cuda --show source > "$RESULTS/softmax-kernels.txt" 2>&1 \
  && head -40 "$RESULTS/softmax-kernels.txt" || { echo "lathe kernels failed:"; head -5 "$RESULTS/softmax-kernels.txt"; }

step "lathe run --backend cuda vs interp (samples)"
for s in samples/*.lathe; do
  n=$(basename "$s" .lathe)
  mkdir -p "$RESULTS/run/$n/cuda" "$RESULTS/run/$n/interp"
  if "$BUILD/app/lathe" run "$s" --backend cuda --seed 1 --output-dir "$RESULTS/run/$n/cuda" > "$RESULTS/run/$n/cuda.log" 2>&1; then
    echo "ran   $n"
  else
    echo "FAIL  $n: $(head -1 "$RESULTS/run/$n/cuda.log")"; status=1
  fi
done

step "lathe bench --backend cuda"
if "$BUILD/app/lathe" help 2>&1 | grep -q bench; then
  "$BUILD/app/lathe" bench --backend cuda --json 2>&1 | tee "$RESULTS/bench-cuda.jsonl"
else
  echo "this build has no 'lathe bench' command yet" | tee "$RESULTS/bench-cuda.jsonl"
fi

step "summary"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$RESULTS/cuda_tests.txt" | sort | uniq -c | head -20
echo "results in $RESULTS; exit $status"
exit $status
