#!/usr/bin/env bash
# tests/gpu/run.sh — the GPU checks of the cuda backend, for a machine with an NVIDIA GPU
# (the `device` tool lends one to some sessions). From the repository root:
#     tests/gpu/run.sh [BUILD_DIR]        (default: build-gpu)
#     tests/gpu/run.sh --prebuilt .gpu    (binaries from tests/gpu/bundle.sh, for a GPU
#                                          machine without Lathe's build dependencies)
# 1. configures and builds lathe + the cuda tests (Release; GUI and ONNX off to save time),
# 2. prints the GPU and driver (nvidia-smi) and what the cuda backend sees,
# 3. runs the cuda tests: render + NVRTC for sm_80/sm_90, golden text, and the
#    differential tests on `cuda` against the interpreter (which skip without a GPU),
#    and the whole differential suite of tests/backends with LATHE_TEST_BACKEND=cuda,
# 4. runs `lathe bench --backend cuda` (JSON lines) and PyTorch on the same workloads
#    (tests/gpu/torch_peer.py) when python3 has torch.
# Results go to $OUT (when set, e.g. by the device tool) or BUILD_DIR/gpu-results.
# Exit status: non-zero when a build step or a test fails (the bench is reported only).
set -uo pipefail
cd "$(dirname "$0")/../.."
PREBUILT=""
if [ "${1:-}" = "--prebuilt" ]; then PREBUILT=$(cd "${2:?--prebuilt DIR}" && pwd); shift 2; fi
BUILD=${1:-build-gpu}
RESULTS=${OUT:-$BUILD/gpu-results}
mkdir -p "$RESULTS"
JOBS=$(nproc 2>/dev/null || echo 4)
status=0
step() { echo; echo "=== $* ==="; }
# A gtest binary in $SHARDS (default: one per core) parallel shards; the GPU is shared by
# them, and each shard compiles its own kernels with NVRTC. Output joined into NAME.txt.
sharded() {
  local name=$1 n=${SHARDS:-$JOBS} rc=0 i; shift
  local pids=()
  for ((i = 0; i < n; i++)); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${TEST_TIMEOUT:-900}" "$@" --gtest_color=no \
      > "$RESULTS/$name.shard$i" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || rc=1; done
  cat "$RESULTS/$name".shard* > "$RESULTS/$name.txt"; rm -f "$RESULTS/$name".shard*
  return $rc
}

step "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$RESULTS/nvidia-smi.txt" || echo "nvidia-smi not found"
ls -l /usr/local/cuda 2>&1 | head -1

if [ -n "$PREBUILT" ]; then
  # binaries from tests/gpu/bundle.sh; the tests look for samples under the source dir
  # they were built in, so make that path point here
  LATHE=$PREBUILT/bin/lathe; CUDA_TESTS=$PREBUILT/bin/cuda_tests; BACKEND_TESTS=$PREBUILT/bin/backend_tests
  src=$(cat "$PREBUILT/source-dir" 2>/dev/null || true)
  if [ -n "$src" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
  cudalib=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/lib/libnvrtc.so* 2>/dev/null | head -1)" 2>/dev/null || true)
  export LD_LIBRARY_PATH=$PREBUILT/lib:${cudalib:-/usr/local/cuda/lib64}:${LD_LIBRARY_PATH:-}
  step "prebuilt binaries ($PREBUILT)"
  ldd "$LATHE" | grep -E "not found|nvrtc" || true
else
  step "configure + build ($BUILD)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_WITH_GUI=OFF -DLATHE_WITH_ONNX=OFF \
    > "$RESULTS/configure.log" 2>&1 || { tail -30 "$RESULTS/configure.log"; exit 1; }
  grep -q lathe_backend_cuda "$BUILD/build.ninja" || { echo "the cuda backend was not configured (no CUDA toolkit?)"; exit 1; }
  cmake --build "$BUILD" --target lathe cuda_tests backend_tests -j"$JOBS" > "$RESULTS/build.log" 2>&1 || { tail -40 "$RESULTS/build.log"; exit 1; }
  LATHE=$BUILD/app/lathe; CUDA_TESTS=$BUILD/tests/cuda/cuda_tests; BACKEND_TESTS=$BUILD/tests/backends/backend_tests
fi

step "cuda tests (render, NVRTC, golden, differential vs interp)"
sharded cuda_tests "$CUDA_TESTS" || status=1
grep -E "^\[  (FAILED|PASSED|SKIPPED) |tests ran" "$RESULTS/cuda_tests.txt" | head -40
if grep -q "SKIPPED" "$RESULTS/cuda_tests.txt" && grep -q "CudaGpu" "$RESULTS/cuda_tests.txt"; then
  grep -A1 "SKIPPED" "$RESULTS/cuda_tests.txt" | head -5
fi

step "differential suite on cuda (random graphs, every op, fusion patterns, regressions)"
LATHE_TEST_BACKEND=cuda sharded backend_tests_cuda "$BACKEND_TESTS" || status=1
grep -E "^\[  (FAILED|PASSED) |mismatch|reproducer" "$RESULTS/backend_tests_cuda.txt" | head -60

step "lathe kernels --backend cuda (softmax sample)"
"$LATHE" kernels samples/03-softmax.lathe --backend cuda --show source > "$RESULTS/softmax-kernels.txt" 2>&1 \
  && head -40 "$RESULTS/softmax-kernels.txt" || { echo "lathe kernels failed:"; head -5 "$RESULTS/softmax-kernels.txt"; }

step "lathe run --backend cuda vs interp (samples)"
RUNS=$(mktemp -d)
for s in samples/*.lathe; do
  n=$(basename "$s" .lathe)
  mkdir -p "$RUNS/$n"
  if "$LATHE" run "$s" --backend cuda --seed 1 --output-dir "$RUNS/$n" > "$RUNS/$n.log" 2>&1; then
    echo "ran   $n"
  else
    echo "FAIL  $n: $(head -3 "$RUNS/$n.log")"; status=1
  fi
done

step "lathe bench --backend cuda"
if "$LATHE" help 2>&1 | grep -q bench; then
  timeout "${BENCH_TIMEOUT:-300}" "$LATHE" bench --backend cuda --json 2>&1 | tee "$RESULTS/bench-cuda.jsonl"
else
  echo "this build has no 'lathe bench' command yet" | tee "$RESULTS/bench-cuda.jsonl"
fi

# the kernels rewritten without a GPU (cuda5), for a first timing: gemv-int4, matmul-int8 and
# attention-grad are in the bench above; the rnn with its projection phase per kernel on the
# committed small lstm (the full lstm is timed whole with the bundle's models/, as below)
step "lathe run tests/onnx/models/lstm_small --backend cuda --profile"
timeout "${MODEL_TIMEOUT:-120}" "$LATHE" run tests/onnx/models/lstm_small/model.onnx --backend cuda --profile --iters 20 2>&1 \
  | tee "$RESULTS/profile-lstm-small.txt" | tail -12 || echo "(no ONNX import in this build)"
grep -hE '"name": ?"(gemv-int4|matmul-int8|attention-grad)"' "$RESULTS/bench-cuda.jsonl" 2>/dev/null || true

step "PyTorch on this GPU (peer)"
if python3 -c 'import torch' 2>/dev/null; then
  timeout "${BENCH_TIMEOUT:-300}" python3 tests/gpu/torch_peer.py 2>&1 | tee "$RESULTS/bench-torch.jsonl"
else
  echo "no PyTorch here: no peer numbers"
fi

# Whole models (ONNX=ON bundles): every model directory under $PREBUILT/models or $MODELS
MODELS=${MODELS:-${PREBUILT:+$PREBUILT/models}}
if [ -n "$MODELS" ] && [ -d "$MODELS" ]; then
  step "lathe bench --backend cuda --models $MODELS"
  for m in "$MODELS"/*/; do
    timeout "${MODEL_TIMEOUT:-120}" "$LATHE" bench --backend cuda --models "$m" --iters 10 --timeout 100 2>&1 | tee -a "$RESULTS/bench-models.txt"
  done
fi

step "summary"
grep -hE "^\[  (PASSED|FAILED|SKIPPED) " "$RESULTS/cuda_tests.txt" "$RESULTS/backend_tests_cuda.txt" | head -40
echo "results in $RESULTS; exit $status"
exit $status
