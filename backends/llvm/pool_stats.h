// pool_stats.h — where two threads lose: per-kernel accounting of the thread pool's loops
// (LATHE_POOL_STATS=1, off by default).
//
// For each kernel launch (llvm_backend.cpp brackets it with stats_kernel_begin/end) and each
// parallel loop it runs (parallel.cpp reports a LoopRecord), the table printed at exit says
// how the threads' time was spent: the kernel's wall time, the part outside parallel loops
// (serial: the other threads idle), each loop's jobs and per-thread busy time (inside the
// chunk functions), the idle time at the join (the loop's wall time on every thread less
// what they were busy), how long a worker took to reach a loop after it was published, and
// the gaps between the launches of a run (the executor's own time, all threads idle; the
// launcher marks each run's start with stats_run_begin, so the time between runs is no gap).
// A kernel's first launch (page faults, a cold cache) is left out. Written to stderr, or to
// the file named by LATHE_POOL_STATS_FILE.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lathe::llvmjit {

bool pool_stats_enabled();  // LATHE_POOL_STATS=1 (read once)

// The kernel the calling thread launches now (its loops are counted under it).
void stats_kernel_begin(const char* name);
void stats_kernel_end();
// A run of the program starts on the calling thread: the time since its last launch (the
// previous run's end, a compile, the caller's own work between runs) is not a launch gap.
void stats_run_begin();

struct LoopRecord {
  int64_t n = 0;        // iterations (jobs)
  int64_t wall_ns = 0;  // from its publication to the caller's return
  std::vector<int64_t> busy_ns, iters, reach_ns;  // per thread; reach: publication to first chunk (-1: none)
  // load-independent: the chunks' CPU time summed, and the loop's span were the same chunks
  // run on dedicated cores by the pool's claiming order (no wake-up, no preemption)
  int64_t cpu_ns = 0, sim_ns = 0;
};
void stats_loop(const LoopRecord& r);

// The accumulated rows (tests), and the text table.
struct KernelPoolStats {
  std::string name;
  int64_t calls = 0, loops = 0;
  int64_t wall_ns = 0, loop_ns = 0;  // the kernel's time, and the part in parallel loops
  int64_t min_jobs = 0, max_jobs = 0, odd_loops = 0;  // loops whose jobs the threads do not divide
  std::vector<int64_t> busy_ns, iters;  // per thread, over all loops
  int64_t reach_ns = 0, reaches = 0;    // workers' time to reach a loop, summed, and how many did
  int64_t cpu_ns = 0, sim_ns = 0;       // LoopRecord's, summed over the loops
};
std::vector<KernelPoolStats> pool_stats_rows();
int64_t pool_stats_gap_ns();  // between one launch's end and the next one's start in a run, summed
std::string pool_stats_table(int threads);
void pool_stats_reset();

}  // namespace lathe::llvmjit
