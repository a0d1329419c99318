// machine.h — the machine's own ceilings (peak FP32 FLOP/s, memory bandwidth), measured
// once by a tiny built-in microbenchmark and cached in the kernel cache directory
// (machine.json, keyed by CPU model and thread count). The profiler's "roof %" column and
// `lathe bench`'s ceiling ratio divide by these.
#pragma once
#include <string>

namespace lathe {

struct MachineCeiling {
  double gflops = 0;   // FP32 FMA peak over all threads
  double gbps = 0;     // STREAM-triad bandwidth over all threads
  int threads = 1;
  std::string cpu;
};

const MachineCeiling& machine_ceiling();   // cached on disk after the first measurement
MachineCeiling measure_machine(int threads);

// The STREAM triad a[i] = b[i] + s*c[i] over n floats on `threads` threads: best GB/s of
// `reps` (bytes = 3 arrays × n × 4). Buffers are allocated and touched before timing.
double triad_gbps(int threads, size_t n, int reps);

}  // namespace lathe
