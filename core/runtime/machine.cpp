// machine.cpp — peak FLOP/s and bandwidth microbenchmarks, and their on-disk cache.
#include "core/runtime/machine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/runtime/kernel_cache.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

// 12 independent FMA chains hide the FMA latency; returns FLOPs done.
__attribute__((target("avx512f,fma"))) double fma_loop_avx512(long iters, float* sink) {
  v16f acc[12];
  v16f x = {}, y = {};
  for (int i = 0; i < 16; ++i) { x[i] = 1.0000001f; y[i] = 0.9999999f; }
  for (auto& a : acc) a = y;
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (auto& a : acc) a = a * x + y;  // unrolled so the 12 chains live in registers
  }
  v16f s = {};
  for (auto& a : acc) s += a;
  *sink = s[0];
  return 2.0 * 16 * 12 * iters;
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(long iters, float* sink) {
  v8f acc[10];
  v8f x = {}, y = {};
  for (int i = 0; i < 8; ++i) { x[i] = 1.0000001f; y[i] = 0.9999999f; }
  for (auto& a : acc) a = y;
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 10
    for (auto& a : acc) a = a * x + y;
  }
  v8f s = {};
  for (auto& a : acc) s += a;
  *sink = s[0];
  return 2.0 * 8 * 10 * iters;
}

double peak_gflops(int threads) {
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  long iters = 4'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<double> flops(threads);
    std::vector<float> sink(threads);
    auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        flops[t] = avx512 ? fma_loop_avx512(iters, &sink[t]) : avx2 ? fma_loop_avx2(iters, &sink[t]) : 0;
      });
    for (auto& th : pool) th.join();
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / s / 1e9);
  }
  return best;
}

__attribute__((target("avx2"))) void triad_range(float* a, const float* b, const float* c, float s, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

double triad_gbps(int threads, size_t n, int reps) {
  auto alloc = [&] { return std::unique_ptr<float[], decltype(&std::free)>(static_cast<float*>(std::aligned_alloc(64, n * 4)), &std::free); };
  auto a = alloc(), b = alloc(), c = alloc();
  auto run = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  };
  run([&](size_t lo, size_t hi) {  // first touch by the thread that will use the pages
    for (size_t i = lo; i < hi; ++i) { a[i] = 0; b[i] = 1; c[i] = 2; }
  });
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    run([&](size_t lo, size_t hi) { triad_range(a.get(), b.get(), c.get(), 3.0f, lo, hi); });
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 3.0 * n * 4 / s / 1e9);
  }
  return best;
}

MachineCeiling measure_machine(int threads) {
  MachineCeiling m;
  m.threads = threads;
  m.cpu = cpu_model();
  m.gflops = peak_gflops(threads);
  m.gbps = triad_gbps(threads, size_t(1) << 24, 10);
  return m;
}

const MachineCeiling& machine_ceiling() {
  static std::once_flag once;
  static MachineCeiling m;
  std::call_once(once, [] {
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string path = cache_path("", "machine-" + cache_key({cpu_model(), std::to_string(threads)}).substr(0, 16) + ".json");
    try {
      std::ifstream f(path);
      if (f) {
        auto j = nlohmann::json::parse(f);
        m.gflops = j.at("gflops");
        m.gbps = j.at("gbps");
        m.threads = j.at("threads");
        m.cpu = j.at("cpu");
        if (m.gflops > 0 && m.gbps > 0) return;
      }
    } catch (...) {
    }
    m = measure_machine(threads);
    nlohmann::json j = {{"gflops", m.gflops}, {"gbps", m.gbps}, {"threads", m.threads}, {"cpu", m.cpu}};
    atomic_write(path, j.dump(1));
  });
  return m;
}

}  // namespace lathe
