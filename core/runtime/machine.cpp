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

// Sums floats lo..hi (four independent vector sums: the loads, not the adds, bound it).
__attribute__((target("avx2"))) float read_range(const float* a, size_t lo, size_t hi) {
  v8f s[4] = {};
  size_t i = lo;
  for (; i + 32 <= hi; i += 32)
    for (int j = 0; j < 4; ++j) {
      v8f v;
      std::memcpy(&v, a + i + 8 * j, sizeof v);
      s[j] += v;
    }
  v8f t = (s[0] + s[1]) + (s[2] + s[3]);
  float r = 0;
  for (int j = 0; j < 8; ++j) r += t[j];
  for (; i < hi; ++i) r += a[i];
  return r;
}

}  // namespace

double read_gbps(int threads, size_t bytes, int reps) {
  size_t n = bytes / 4;
  std::unique_ptr<float[], decltype(&std::free)> a(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64)), &std::free);
  std::vector<float> sink(static_cast<size_t>(threads));
  auto run = [&](auto&& body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { body(t, n * t / threads, n * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  };
  run([&](int, size_t lo, size_t hi) {  // first touch by the thread that will read the pages
    for (size_t i = lo; i < hi; ++i) a[i] = 1.0f;
  });
  bool avx2 = __builtin_cpu_supports("avx2");
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    run([&](int t, size_t lo, size_t hi) {
      if (avx2) {
        sink[t] = read_range(a.get(), lo, hi);
      } else {
        float s = 0;
        for (size_t i = lo; i < hi; ++i) s += a[i];
        sink[t] = s;
      }
    });
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, n * 4.0 / s / 1e9);
  }
  volatile float keep = sink[0];
  (void)keep;
  return best;
}

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

namespace {

double load_now() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : 0;
}

struct State {
  std::mutex mu;
  bool loaded = false, remeasured = false;
  MachineCeiling m;
  std::string path;
};

State& state() {
  static State s;
  return s;
}

void save(const State& s) {
  nlohmann::json j = {{"gflops", s.m.gflops}, {"gbps", s.m.gbps}, {"threads", s.m.threads}, {"cpu", s.m.cpu}, {"load", s.m.load}};
  atomic_write(s.path, j.dump(1));
}

// Merges m into s.m (the maximum of each ceiling); true when something rose.
bool merge(State& s, const MachineCeiling& m) {
  bool raised = m.gflops > s.m.gflops || m.gbps > s.m.gbps;
  if (raised || s.m.gflops <= 0) s.m.load = m.load;
  else s.m.load = std::min(s.m.load, m.load);  // as good now as then: no need to measure again
  s.m.gflops = std::max(s.m.gflops, m.gflops);
  s.m.gbps = std::max(s.m.gbps, m.gbps);
  if (s.m.cpu.empty()) s.m.cpu = m.cpu;
  s.m.threads = m.threads;
  return raised;
}

// Loads the cache (or measures) once; the caller holds s.mu.
void ensure_loaded(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.path = cache_path("", "machine-" + cache_key({cpu_model(), std::to_string(threads)}).substr(0, 16) + ".json");
  s.m = MachineCeiling{};
  s.m.threads = threads;
  s.m.cpu = cpu_model();
  try {
    std::ifstream f(s.path);
    if (f) {
      auto j = nlohmann::json::parse(f);
      s.m.gflops = j.at("gflops");
      s.m.gbps = j.at("gbps");
      s.m.load = j.value("load", 1e9);  // older caches did not say: treat as measured under load
    }
  } catch (...) {
    s.m.gflops = s.m.gbps = 0;
  }
  bool have = s.m.gflops > 0 && s.m.gbps > 0;
  // Measured under clearly more load than now: measure again (the result only raises it).
  bool busier_then = have && s.m.load > 0.5 && load_now() < 0.5 * s.m.load;
  if (have && !busier_then) return;
  merge(s, measure_machine(threads));
  save(s);
}

}  // namespace

MachineCeiling measure_machine(int threads, int rounds) {
  MachineCeiling m;
  m.threads = threads;
  m.cpu = cpu_model();
  m.load = load_now();
  for (int r = 0; r < std::max(1, rounds); ++r) {
    if (r > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let a burst of load pass
    m.gflops = std::max(m.gflops, peak_gflops(threads));
    m.gbps = std::max(m.gbps, triad_gbps(threads, size_t(1) << 24, 4));
  }
  return m;
}

MachineCeiling machine_ceiling() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  return s.m;
}

MachineCeiling remeasure_machine() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  if (s.remeasured) return s.m;
  s.remeasured = true;
  if (merge(s, measure_machine(s.m.threads))) save(s);
  return s.m;
}

void raise_machine_ceiling(const MachineCeiling& m) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  if (merge(s, m)) save(s);
}

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    int64_t best = 0;
    for (int i = 0; i < 8; ++i) {
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      std::string v;
      if (!(f >> v) || v.empty()) continue;
      int64_t n = std::atoll(v.c_str());
      char unit = v.back();
      if (unit == 'K') n <<= 10;
      else if (unit == 'M') n <<= 20;
      best = std::max(best, n);
    }
    return best;
  }();
  return bytes;
}

std::string above_roof_reason(double share, bool memory_bound, double bytes) {
  if (!(share > 1.0)) return "";
  char b[256];
  int64_t llc = last_level_cache_bytes();
  if (memory_bound && llc > 0 && bytes <= static_cast<double>(llc))
    std::snprintf(b, sizeof b, "cache-resident: its %.0f KiB fit the %lld MiB last-level cache, faster than the DRAM bandwidth measured",
                  bytes / 1024, static_cast<long long>(llc >> 20));
  else if (memory_bound)
    std::snprintf(b, sizeof b, "faster than the bandwidth measured (re-measured once): the kernel reuses data in cache, or the machine was busy when measured");
  else
    std::snprintf(b, sizeof b, "above the FMA peak measured (re-measured once): FLOPs are estimated from the loop IR, or the machine was busy when measured");
  return b;
}

}  // namespace lathe
