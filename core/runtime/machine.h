// machine.h — the machine's own ceilings (peak FP32 FLOP/s, memory bandwidth), measured
// by a tiny built-in microbenchmark and cached in the kernel cache directory
// (machine-KEY.json, keyed by CPU model and thread count). The profiler's "roof %" column,
// the app's roofline and `lathe bench`'s ceiling ratio divide by these.
//
// Load on a shared machine can only make a measurement low, never high, so the ceiling is
// the best of several rounds and only ever rises: a later measurement (a kernel beat the
// ceiling: remeasure_machine(), or the cached one was taken under more load than now)
// raises the cache, and nothing lowers it.
#pragma once
#include <cstdint>
#include <string>

namespace lathe {

struct MachineCeiling {
  double gflops = 0;   // FP32 FMA peak over all threads
  double gbps = 0;     // STREAM-triad bandwidth over all threads
  int threads = 1;
  std::string cpu;
  double load = 0;     // the 1-minute load average when the best measurement was taken
};

// The ceiling (a copy: it may rise while the process runs). Cached on disk after the first
// measurement; re-measured at start-up when the cached one was taken under more load.
MachineCeiling machine_ceiling();
// Best of `rounds` rounds of both microbenchmarks (a short pause between rounds).
MachineCeiling measure_machine(int threads, int rounds = 5);
// Measures again and raises the ceiling (in memory and on disk) where the new one is
// higher; at most once per process (later calls return the current ceiling). For the
// profiler and `lathe bench` when a kernel beats the ceiling.
MachineCeiling remeasure_machine();
// Merges m into the ceiling (the maximum of each field), in memory and on disk.
void raise_machine_ceiling(const MachineCeiling& m);
// The last-level cache in bytes (0 if unknown): a working set that fits streams faster
// than the DRAM bandwidth the ceiling measures.
int64_t last_level_cache_bytes();
// Why a kernel sits above the roof (share > 1 of the ceiling for its bound), for the
// profile table, `lathe bench` and the app's roofline: "" when it does not.
std::string above_roof_reason(double share, bool memory_bound, double bytes);

// The STREAM triad a[i] = b[i] + s*c[i] over n floats on `threads` threads: best GB/s of
// `reps` (bytes = 3 arrays × n × 4). Buffers are allocated and touched before timing.
double triad_gbps(int threads, size_t n, int reps);
// A plain read (a sum) of `bytes` on `threads` threads, each its share: best GB/s of `reps`.
// The bound of a kernel that only streams its operands in (a matrix-vector product); pick
// `bytes` above the last-level cache to measure memory, not cache.
double read_gbps(int threads, size_t bytes, int reps);

}  // namespace lathe
