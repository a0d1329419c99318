// profile.h — per-kernel profiles: the PyTorch-profiler-style table and Chrome trace JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

struct KernelProfile {
  std::string name;        // "k1_softmax"
  std::string kind;        // "elementwise", "reduce", "matmul", …
  int nodes = 0;           // primitive nodes fused into it
  int calls = 0;           // timed runs
  double median_ms = 0, min_ms = 0;
  double flops = 0, bytes = 0;   // per call
  double gflops = 0, gbps = 0;   // at the median
  double roof = 0;         // share of the machine ceiling for its bound (0..1)
  std::string bound;       // "compute" or "memory" (the roofline side it sits on)
  std::string above_roof;  // why roof > 1 (cache-resident working set, …); "" when roof ≤ 1
  int order = -1;          // position in the program's launch order
  std::vector<int64_t> shape;        // the buffer it writes, at the bound sizes
  std::vector<std::string> sources;  // where its nodes came from: each node's top provenance
                                     // label ("name:OpType" for an imported ONNX node), unique,
                                     // ordered by their last node (the root's source is last)
};

struct TraceEvent {
  std::string name;
  double start_us = 0, dur_us = 0;
  int tid = 0;
};

struct ProfileReport {
  std::string backend;
  std::vector<KernelProfile> kernels;
  double total_ms = 0;                  // median of whole-program runs
  double peak_gflops = 0, peak_gbps = 0;  // the machine ceiling used for `roof`
  bool device_ceiling = false;          // the ceiling is a device's (cuda), not the host's
  int64_t arena_bytes = 0, peak_bytes = 0;
  std::vector<TraceEvent> events;       // one run's kernels, for the trace

  std::string table() const;       // aligned text table, slowest kernel first
  std::string trace_json() const;  // Chrome trace-event format (Perfetto, chrome://tracing)
  void write_trace(const std::string& path) const;  // UserError if it cannot write
  // Machine-readable form, kernels in launch order (lathe run --profile-json; read by
  // scripts/compare-profile.py): {"backend","total_ms","kernels":[{order,name,kind,shape,sources,
  // median_us,min_us,flops,bytes,...}]}.
  std::string json() const;
  void write_json(const std::string& path) const;  // UserError if it cannot write
};

}  // namespace lathe
