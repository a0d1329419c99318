// The llvm backend's thread pool (backends/llvm/parallel.cpp): every iteration runs exactly
// once, and back-to-back parallel loops never deadlock. Before the fix, run() waited for the
// previous loop's workers while holding the pool mutex that the worker finishing the last chunk
// takes to notify the caller: GPT-2 small hung in `lathe bench --models` with one thread
// yielding forever. Many tiny loops in a row make that interleaving likely; a watchdog turns a
// hang into a failure instead of a ctest timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "backends/llvm/parallel.h"
#include "backends/llvm/pool_stats.h"

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

namespace {

void count_range(void* const* bufs, const int64_t*, const int64_t*, int64_t begin, int64_t end) {
  auto* hits = static_cast<std::atomic<int>*>(bufs[0]);
  for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
}

// count_range, each iteration taking ~5 us: long enough that the worker takes a share
void slow_count_range(void* const* bufs, const int64_t* d, const int64_t* c, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
    while (std::chrono::steady_clock::now() < until) {
    }
    count_range(bufs, d, c, i, i + 1);
  }
}

}  // namespace

// Back-to-back loops (a model's kernels) find the workers still polling: before, every loop
// woke them through the condition variable (a futex call that, on a loaded machine, let the
// woken thread preempt the caller for ~0.3 ms a loop). Counted, not timed: a loop either needs
// a wake-up or not.
TEST(LlvmParallel, BackToBackLoopsNeedNoWakeUps) {
  using lathe::llvmjit::pool_stats;
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  std::vector<std::atomic<int>> hits(16);
  void* bufs[1] = {hits.data()};
  auto before = pool_stats();
  const int loops = 1000;
  for (int rep = 0; rep < loops; ++rep) lathe::llvmjit::lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 16);
  auto after = pool_stats();
  for (auto& h : hits) ASSERT_EQ(h.load(), loops);
  EXPECT_EQ(after.loops - before.loops, loops);
  // A worker still sleeps when the caller loses its core for longer than the workers poll
  // (tens of times a second at load 6 on 2 cores); with no polling, 160-220 of the 1000 loops
  // woke one there. When the pool judged the machine oversubscribed, its workers slept
  // between loops on purpose: nothing to check then.
  if (after.quiet_loops == before.quiet_loops) {
    EXPECT_LT(after.wakeups - before.wakeups, loops / 10) << "workers slept between back-to-back loops";
  }
}

// Two host threads launching loops at once (two programs run from two threads): each call
// runs each of its iterations exactly once, whatever the sizes (fewer iterations than threads
// included) and whether the pool runs them on its threads or on the caller.
TEST(LlvmParallel, ConcurrentCallersRunEveryIterationOnce) {
  auto caller = [](int seed) {
    std::vector<std::atomic<int>> hits(997);
    void* bufs[1] = {hits.data()};
    for (int rep = 0; rep < 3000; ++rep) {
      int64_t n = 1 + (rep * 7919 + seed) % 997;
      for (int64_t i = 0; i < n; ++i) hits[i].store(0, std::memory_order_relaxed);
      lathe::llvmjit::lathe_llvm_parallel_for(count_range, bufs, nullptr, nullptr, n);
      for (int64_t i = 0; i < n; ++i)
        if (hits[i].load() != 1) return rep;
    }
    return -1;
  };
  auto a = std::async(std::launch::async, caller, 1), b = std::async(std::launch::async, caller, 2);
  if (a.wait_for(std::chrono::seconds(120)) != std::future_status::ready ||
      b.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    std::fprintf(stderr, "FAIL: concurrent parallel loops deadlocked\n");
    std::fflush(stderr);
    std::_Exit(1);
  }
  EXPECT_EQ(a.get(), -1);
  EXPECT_EQ(b.get(), -1);
}

// LATHE_POOL_STATS=1: each bracketed launch's loops are counted under the kernel's name
// (its first launch left out), with their jobs, the iterations each thread ran, and the
// chunks' CPU time; the table names the kernel. Set before the pool exists (ctest runs
// each test in its own process); skipped where an earlier test in this process made it.
TEST(LlvmParallel, PoolStatsCountEachKernelsLoops) {
  using namespace lathe::llvmjit;
  setenv("LATHE_POOL_STATS", "1", 1);
  setenv("LATHE_POOL_STATS_FILE", "/dev/null", 1);  // the exit report
  if (!pool_stats_enabled()) GTEST_SKIP() << "the pool was made before the switch was set";
  pool_stats_reset();
  std::vector<std::atomic<int>> hits(7);
  void* bufs[1] = {hits.data()};
  for (int launch = 0; launch < 3; ++launch) {
    stats_kernel_begin("k_odd");
    lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 7);  // 7 jobs
    lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 1);  // one job: the caller alone
    stats_kernel_end();
  }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), i == 0 ? 6 : 3) << i;
  auto rows = pool_stats_rows();
  ASSERT_EQ(rows.size(), 1u);
  const KernelPoolStats& r = rows[0];
  EXPECT_EQ(r.name, "k_odd");
  EXPECT_EQ(r.calls, 2);  // the first launch left out
  EXPECT_EQ(r.loops, 4);
  EXPECT_EQ(r.min_jobs, 1);
  EXPECT_EQ(r.max_jobs, 7);
  int64_t iters = 0;
  for (int64_t i : r.iters) iters += i;
  EXPECT_EQ(iters, 2 * (7 + 1));
  const int T = pool_threads();
  if (T > 1) EXPECT_EQ(r.odd_loops, 7 % T ? 4 : 2);  // the 1-job loop never divides
  EXPECT_GT(r.cpu_ns, 0);
  // on dedicated cores the loops span at least their CPU time over the threads, at most all of it
  EXPECT_GE(r.sim_ns * T, r.cpu_ns);
  EXPECT_LE(r.sim_ns, r.cpu_ns);
  EXPECT_LE(r.loop_ns, r.wall_ns);
  const std::string table = pool_stats_table(T);
  EXPECT_NE(table.find("k_odd"), std::string::npos) << table;
  EXPECT_NE(table.find("idle share"), std::string::npos) << table;
}

// LATHE_POOL_STATS=1: the gaps are the time between the launches of one run (the executor's
// own work); the time between two runs (a caller's work, a tiered compile's wait, the bench's
// bookkeeping) is not one. Before, the first launch of each run counted the time since the
// previous run's last launch: mobilenet_v2's `lathe run --iters 100` reported 0.69-0.76 ms of
// gaps a run (18.9 ms with --iters 50, the full tier's compile spread over the runs) where the
// launches leave 0.045 ms.
TEST(LlvmParallel, PoolStatsGapsAreWithinARun) {
  using namespace lathe::llvmjit;
  setenv("LATHE_POOL_STATS", "1", 1);
  setenv("LATHE_POOL_STATS_FILE", "/dev/null", 1);
  if (!pool_stats_enabled()) GTEST_SKIP() << "the pool was made before the switch was set";
  pool_stats_reset();
  std::vector<std::atomic<int>> hits(4);
  void* bufs[1] = {hits.data()};
  auto launch = [&](const char* name) {
    stats_kernel_begin(name);
    lathe_llvm_parallel_for(count_range, bufs, nullptr, nullptr, 4);
    stats_kernel_end();
  };
  const auto pause = std::chrono::milliseconds(30);  // between runs
  for (int run = 0; run < 3; ++run) {
    stats_run_begin();
    launch("k_a");
    launch("k_b");
    std::this_thread::sleep_for(pause);
  }
  for (auto& h : hits) ASSERT_EQ(h.load(), 6);
  // counted: the launches after each kernel's first (runs 2 and 3), so two gaps, k_a -> k_b in
  // each; none of the 30 ms pauses
  const int64_t gap = pool_stats_gap_ns();
  EXPECT_GE(gap, 0);
  EXPECT_LT(gap, std::chrono::nanoseconds(pause).count() / 2) << "a pause between runs counted as a launch gap";
  // without the run bracket the pause is a gap, as before (a caller that launches kernels itself)
  pool_stats_reset();
  for (int run = 0; run < 3; ++run) {
    launch("k_a");
    std::this_thread::sleep_for(pause);
  }
  EXPECT_GE(pool_stats_gap_ns(), std::chrono::nanoseconds(pause).count());
}

// The pool judges whether the machine is oversubscribed from its threads' CPU clocks, read
// once per window of ~8 ms of a thread's time, not around each loop: a read is a system call
// (3-5 us on the 2-core VM), and the worker's two reads around every loop delayed its first
// chunk and took ~10 us of its core per loop. 2000 back-to-back loops of ~10 us each (at
// least 10 ms of work, so at least one window): a few reads, not two per loop per worker.
TEST(LlvmParallel, CpuClockIsReadOncePerWindowNotPerLoop) {
  using lathe::llvmjit::pool_stats;
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  std::vector<std::atomic<int>> hits(2);
  void* bufs[1] = {hits.data()};
  const int loops = 2000;
  auto before = pool_stats();
  auto t0 = std::chrono::steady_clock::now();
  for (int rep = 0; rep < loops; ++rep) lathe::llvmjit::lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 2);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto after = pool_stats();
  for (auto& h : hits) ASSERT_EQ(h.load(), loops);
  // one read per window per thread (a window: 8 ms of a thread's awake time), with room
  const int64_t windows = static_cast<int64_t>(ms / 8) + 2;
  EXPECT_LE(after.cpu_reads - before.cpu_reads, windows * lathe::llvmjit::pool_threads()) << ms << " ms";
  EXPECT_LT(after.cpu_reads - before.cpu_reads, loops / 4);
}

// Loops further apart than the workers poll (2 ms): each finds them asleep and wakes them
// (the caller notifies once it has released the pool's mutex, so a woken worker does not
// block on it again); every iteration still runs exactly once.
TEST(LlvmParallel, LoopsAfterIdleGapsWakeSleepingWorkers) {
  using lathe::llvmjit::pool_stats;
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  std::vector<std::atomic<int>> hits(37);  // prime: uneven shares
  void* bufs[1] = {hits.data()};
  const int loops = 100;
  auto before = pool_stats();
  for (int rep = 0; rep < loops; ++rep) {
    lathe::llvmjit::lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 37);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto after = pool_stats();
  for (auto& h : hits) ASSERT_EQ(h.load(), loops);
  EXPECT_EQ(after.loops - before.loops, loops);
  EXPECT_GT(after.wakeups - before.wakeups, 0) << "no loop found a worker asleep";
}

namespace {
// Runs back-to-back loops for `ms` while one thread of this process per core spins (the
// caller's own session oversubscribed: it gets about half a core); returns the pool's
// counters over that time.
lathe::llvmjit::PoolStats loops_beside_hogs(int ms) {
  using lathe::llvmjit::pool_stats;
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i)
    hogs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  std::vector<std::atomic<int>> hits(16);
  void* bufs[1] = {hits.data()};
  auto before = pool_stats();
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  int loops = 0;
  while (std::chrono::steady_clock::now() < until) {
    lathe::llvmjit::lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 16);
    ++loops;
  }
  auto after = pool_stats();
  stop = true;
  for (auto& h : hogs) h.join();
  for (auto& h : hits) EXPECT_EQ(h.load(), loops);
  return {after.loops - before.loops, after.quiet_loops - before.quiet_loops, after.wakeups - before.wakeups,
          after.contended - before.contended, after.cpu_reads - before.cpu_reads};
}
}  // namespace

// Oversubscribed (a spinning thread of the caller's own process on every core), the pool
// judges the machine taken and its workers sleep between loops for a while.
TEST(LlvmParallel, OversubscribedWorkersSleepBetweenLoops) {
  if (const char* e = std::getenv("LATHE_POOL_JUDGE"); e && std::atoi(e) == 0) GTEST_SKIP() << "LATHE_POOL_JUDGE=0";
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  auto d = loops_beside_hogs(600);
  EXPECT_GT(d.contended, 0) << d.loops << " loops";
  EXPECT_GT(d.quiet_loops, 0) << d.loops << " loops";
}

// LATHE_POOL_JUDGE=0 (A/B runs): the same load is still judged (counted), but the workers
// keep polling between loops.
TEST(LlvmParallel, JudgeOffKeepsWorkersPolling) {
  setenv("LATHE_POOL_JUDGE", "0", 1);
  if (lathe::llvmjit::pool_stats().loops != 0) GTEST_SKIP() << "the pool was made before the switch was set";
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  auto d = loops_beside_hogs(600);
  EXPECT_GT(d.contended, 0) << d.loops << " loops";
  EXPECT_EQ(d.quiet_loops, 0) << d.loops << " loops";
}

namespace {
// This thread's run delay (ns runnable but waiting for a core), -1 without schedstat.
int64_t run_delay_ns() {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  long long cpu = 0, delay = -1;
  if (std::fscanf(f, "%lld %lld", &cpu, &delay) != 2) delay = -1;
  std::fclose(f);
  return delay;
}

// A caller that blocks between its parallel loops (a model's first run, a background pack):
// bursts of 5 short loops, 3 ms asleep after each, for `ms`. Returns the pool's judgements of
// oversubscription over that time, and in `delay_share` the caller's run delay over the wall
// time (-1 without schedstat).
int64_t judgements_with_blocked_caller(int ms, double& delay_share) {
  using lathe::llvmjit::pool_stats;
  std::vector<std::atomic<int>> hits(16);
  void* bufs[1] = {hits.data()};
  const int64_t d0 = run_delay_ns();
  auto t0 = std::chrono::steady_clock::now();
  auto before = pool_stats();
  int loops = 0;
  while (std::chrono::steady_clock::now() < t0 + std::chrono::milliseconds(ms)) {
    for (int k = 0; k < 5; ++k, ++loops) lathe::llvmjit::lathe_llvm_parallel_for(slow_count_range, bufs, nullptr, nullptr, 16);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  auto after = pool_stats();
  const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const int64_t d1 = run_delay_ns();
  delay_share = d0 >= 0 && d1 >= 0 ? double(d1 - d0) / wall : -1;
  for (auto& h : hits) EXPECT_EQ(h.load(), loops);
  return after.contended - before.contended;
}
}  // namespace

// The caller is starved when it waits for a core, not when it blocks between loops: judged
// by its CPU time over wall time (LATHE_POOL_RUNDELAY=0, the test below), a caller asleep
// between bursts of loops looked starved, and the workers slept between loops on a quiet
// machine. Skipped when the caller itself waited for a core (a loaded machine: judging it
// oversubscribed is then right).
TEST(LlvmParallel, CallerBlockedBetweenLoopsIsNotStarved) {
  if (const char* e = std::getenv("LATHE_POOL_RUNDELAY"); e && std::atoi(e) == 0) GTEST_SKIP() << "LATHE_POOL_RUNDELAY=0";
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  double share = 0;
  const int64_t marks = judgements_with_blocked_caller(300, share);
  if (share < 0) GTEST_SKIP() << "no /proc/thread-self/schedstat";
  if (share > 0.1) GTEST_SKIP() << "the caller waited " << 100 * share << "% of the time for a core: a loaded machine";
  EXPECT_EQ(marks, 0);
}

// The same with LATHE_POOL_RUNDELAY=0 (the CPU-share judgement): judged oversubscribed. The
// test above can fail.
TEST(LlvmParallel, CpuShareJudgesBlockedCallerStarved) {
  setenv("LATHE_POOL_RUNDELAY", "0", 1);
  if (lathe::llvmjit::pool_stats().loops != 0) GTEST_SKIP() << "the pool was made before the switch was set";
  if (lathe::llvmjit::pool_threads() < 2) GTEST_SKIP() << "one hardware thread: no workers";
  double share = 0;
  EXPECT_GT(judgements_with_blocked_caller(300, share), 0);
}
