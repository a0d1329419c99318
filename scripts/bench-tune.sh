#!/bin/sh
# bench-tune.sh [LATHE] [SECONDS] [BACKEND] — tuned vs heuristic on shapes the heuristics
# were not written for (samples/tune/*.lua: a 50k-wide GEMV, a column sum, odd batched
# matmuls, a softmax over 77, a head transpose, 5×5 depthwise and 7×7 stem convolutions).
# Per workload: `lathe tune` with a time budget of SECONDS (default 40), then the median of
# 30 whole runs with --tuned none and with the records, in the same process order, and the
# tuned kernels' roofline share from --profile. Hold the benchmark lock on a shared machine:
#   flock /tmp/bench.lock scripts/bench-tune.sh build/lathe 40
set -eu
L=${1:-build/lathe}; BUDGET=${2:-40}; B=${3:-llvm}
DIR=$(cd "$(dirname "$0")/.." && pwd)/samples/tune
OUT=${TMPDIR:-/tmp}/lathe-bench-tune.$$
mkdir -p "$OUT"
median() { "$L" run "$1" --backend "$B" --tuned "$2" --iters 30 --stats 2>/dev/null | sed -n 's/.*"median_ms":\([0-9.e+-]*\).*/\1/p'; }
echo "# $(uptime | sed 's/.*load/load/') ; backend $B; tune budget ${BUDGET}s per workload"
printf '%-16s %12s %12s %8s  %s\n' workload heuristic tuned speedup "tuned kernels: roof %"
for f in "$DIR"/*.lua; do
  n=$(basename "$f" .lua)
  R=$OUT/$n.jsonl
  "$L" tune "$f" --backend "$B" --records "$R" --time-budget "$BUDGET" --trials 200 > "$OUT/$n.tune.txt" 2>&1 || true
  h1=$(median "$f" none); t1=$(median "$f" "$R"); h2=$(median "$f" none); t2=$(median "$f" "$R")
  roof=$("$L" run "$f" --backend "$B" --tuned "$R" --profile 2>/dev/null | awk '$2 ~ /^(reduce|matmul|elementwise|copy)$/ {printf "%s=%s ", $1, $(NF-1)}')
  awk -v n="$n" -v h1="$h1" -v h2="$h2" -v t1="$t1" -v t2="$t2" -v roof="$roof" 'BEGIN {
    h = h1 < h2 ? h1 : h2; t = t1 < t2 ? t1 : t2;
    printf "%-16s %9.3f ms %9.3f ms %7.2fx  %s\n", n, h, t, h / t, roof }'
done
echo "# records and tune logs in $OUT"
