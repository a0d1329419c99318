#!/bin/sh
# bench-tune.sh [LATHE] [SECONDS] [BACKEND] — tuned vs heuristic on shapes the heuristics
# were not written for (samples/tune/*.lua: a 50k-wide GEMV, a column sum, odd batched
# matmuls, a softmax over 77, a head transpose, 5×5 depthwise and 7×7 stem convolutions).
# Per workload: `lathe tune` with a time budget of SECONDS (default 40), then PAIRS (default
# 5) alternating pairs of `lathe run --iters 20` with --tuned none and with the records:
# the median of their medians and the minimum of their minimums (on a loaded machine the
# minimum says what the code can do), and the tuned kernels' roofline share from --profile
# (of the median, and of the minimum), and of the bandwidth (memory-bound) or FMA peak
# (compute-bound) measured in the same locked run (under load the quiet ceiling is out of reach).
# Hold the benchmark lock on a shared machine:
#   flock /tmp/bench.lock scripts/bench-tune.sh build/lathe 40
# ONLY="colsum gemv-50k" runs just those workloads (to keep each locked run short);
# TUNE_DIR=samples/tune/aside runs the shapes kept aside (the same way).
set -eu
L=${1:-build/lathe}; BUDGET=${2:-40}; B=${3:-llvm}; PAIRS=${PAIRS:-5}
DIR=${TUNE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/samples/tune}
OUT=${TMPDIR:-/tmp}/lathe-bench-tune.$$
# glibc's malloc with fixed thresholds: blocks under 1 MiB from the heap, which is not given
# back. By default its mmap threshold moves with the process's history, and a run's speed
# with it: an output of 128 KiB-1 MiB allocated per run page-faults in one heap state and
# not in another (softmax-1001, the same code: 0.17-0.26 ms per run with --tuned none or a
# 355-byte records file, 0.05-0.07 ms with a 367-byte one whose record was not applied;
# with these settings 0.05-0.07 ms either way).
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.mmap_threshold=1048576:glibc.malloc.trim_threshold=268435456}
mkdir -p "$OUT"
# one run: "median min"
stats() { "$L" run "$1" --backend "$B" --tuned "$2" --iters 20 --stats 2>/dev/null |
  sed -n 's/.*"median_ms":\([0-9.e+-]*\).*"min_ms":\([0-9.e+-]*\).*/\1 \2/p'; }
# The bandwidth measured now (lathe bench's triad peer, in this locked run): a memory-bound
# kernel's share of it says what the kernel reaches under the same load; the roof % of
# the profile divides by the machine's best ceiling (taken once, at low load).
M=$("$L" bench --only eltwise --iters 3 2>/dev/null | sed -n 's/.*ceiling \([0-9.]*\) GFLOP\/s, \([0-9.]*\) GB\/s; triad peer now \([0-9.]*\) GB\/s; FMA peak now \([0-9.]*\) GFLOP\/s.*/\1 \2 \3 \4/p')
set -- $M
CEIL_GFLOPS=${1:-}; CEIL_GBPS=${2:-}; NOW_GBPS=${3:-}; NOW_GFLOPS=${4:-}
echo "# $(uptime | sed 's/.*load/load/') ; backend $B; tune budget ${BUDGET}s per workload; bandwidth ceiling ${CEIL_GBPS:-?} GB/s, triad now ${NOW_GBPS:-?} GB/s; FMA ceiling ${CEIL_GFLOPS:-?} GFLOP/s, FMA peak now ${NOW_GFLOPS:-?} GFLOP/s"
printf '%-16s %12s %12s %8s %12s %12s %8s  %s\n' workload "heur median" "tuned median" speedup "heur min" "tuned min" speedup \
  "tuned kernels: roof % of median (of min)"
for f in "$DIR"/*.lua; do
  n=$(basename "$f" .lua)
  if [ -n "${ONLY:-}" ]; then case " $ONLY " in *" $n "*) ;; *) continue ;; esac; fi
  R=$OUT/$n.jsonl
  "$L" tune "$f" --backend "$B" --records "$R" --time-budget "$BUDGET" --trials 200 > "$OUT/$n.tune.txt" 2>&1 || true
  : > "$OUT/$n.runs"
  i=0
  while [ $i -lt "$PAIRS" ]; do
    echo "h $(stats "$f" none)" >> "$OUT/$n.runs"
    echo "t $(stats "$f" "$R")" >> "$OUT/$n.runs"
    i=$((i + 1))
  done
  # roof % of the median (and of the minimum, what the code reaches between other load)
  roof=$("$L" run "$f" --backend "$B" --tuned "$R" --profile --iters 20 2>/dev/null | awk -v c="${CEIL_GBPS:-0}" -v now="${NOW_GBPS:-0}" \
      -v cf="${CEIL_GFLOPS:-0}" -v nowf="${NOW_GFLOPS:-0}" '$NF ~ /^(memory|compute)$/ && $6 == $8 {
    r = $(NF-1); sub(/\*$/, "", r); printf "%s=%s(min %.0f", $1, $(NF-1), r * $5 / $7
    if ($NF == "memory" && now > 0) printf "; of the triad now %.0f, min %.0f", r * c / now, r * $5 / $7 * c / now
    if ($NF == "compute" && nowf > 0) printf "; of the FMA peak now %.0f, min %.0f", r * cf / nowf, r * $5 / $7 * cf / nowf
    printf ") " }')
  grep -q 'not faster' "$OUT/$n.tune.txt" && roof="$roof(no record applied: the heuristic stays)"
  sort -k1,1 -k2,2g "$OUT/$n.runs" | awk -v n="$n" -v roof="$roof" '
    { med[$1, ++c[$1]] = $2; if (!($1 in mn) || $3 < mn[$1]) mn[$1] = $3 }
    END { hm = med["h", int((c["h"] + 1) / 2)]; tm = med["t", int((c["t"] + 1) / 2)]
          printf "%-16s %9.3f ms %9.3f ms %7.2fx %9.3f ms %9.3f ms %7.2fx  %s\n", n, hm, tm, hm / tm, mn["h"], mn["t"], mn["h"] / mn["t"], roof }'
done
echo "# records and tune logs in $OUT"
