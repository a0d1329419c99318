// The llvm backend's thread pool (backends/llvm/parallel.cpp): every iteration runs exactly
// once, and back-to-back parallel loops never deadlock. Before the fix, run() waited for the
// previous loop's workers while holding the pool mutex that the worker finishing the last chunk
// takes to notify the caller: GPT-2 small hung in `lathe bench --models` with one thread
// yielding forever. Many tiny loops in a row make that interleaving likely; a watchdog turns a
// hang into a failure instead of a ctest timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "backends/llvm/parallel.h"

namespace {

std::atomic<int64_t> g_sum{0};

// Each iteration takes a few microseconds, so the workers wake in time to take chunks and
// often finish a loop's last one.
void add_range(void* const*, const int64_t*, const int64_t*, int64_t begin, int64_t end) {
  int64_t s = 0;
  for (int64_t i = begin; i < end; ++i) {
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(2 + i % 3);
    while (std::chrono::steady_clock::now() < until) {
    }
    s += i + 1;
  }
  g_sum.fetch_add(s, std::memory_order_relaxed);
}

}  // namespace

TEST(LlvmParallel, BackToBackTinyLoopsFinishAndRunEveryIterationOnce) {
  auto work = std::async(std::launch::async, [] {
    for (int rep = 0; rep < 20000; ++rep) {
      int64_t n = 1 + rep % 16;  // 1 runs inline; more: the pool's threads share the chunks
      g_sum.store(0);
      lathe::llvmjit::lathe_llvm_parallel_for(add_range, nullptr, nullptr, nullptr, n);
      if (g_sum.load() != n * (n + 1) / 2) return rep;
    }
    return -1;
  });
  if (work.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    // the loop thread never returns: leave at once (the future's destructor would wait on it)
    std::fprintf(stderr, "FAIL: parallel loops deadlocked (the pool's mutex held while waiting for workers)\n");
    std::fflush(stderr);
    std::_Exit(1);
  }
  EXPECT_EQ(work.get(), -1) << "an iteration ran twice or not at all";
}
