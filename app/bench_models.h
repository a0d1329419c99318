// bench_models.h — `lathe bench --models DIR` (app/bench_models.cpp).
#pragma once
#include <string>

namespace lathe::app {

struct BenchModelsOptions {
  std::string dir;        // a model directory (meta.json) or a directory of them
  std::string backend;
  std::string only;       // comma-separated model names; "" = all
  std::string ort_peer;   // ../shared/peers/run-ort-peer, or "" for no peer
  int iters = 10;
  int threads = 0;        // the peer's intra-op threads; 0 = the hardware threads
  int timeout_s = 900;    // per child process
  bool json = false;
};

int run_bench_models(const BenchModelsOptions& o);

}  // namespace lathe::app
