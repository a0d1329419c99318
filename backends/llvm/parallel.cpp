// parallel.cpp — a small persistent thread pool: a ring of loop slots, spinning workers. See
// parallel.h.
//
// Hand-off without the kernel's help: a model runs its kernels back to back, one parallel loop
// each, so the cost that matters is the hand-off, not the loop. The caller publishes a loop by
// bumping `gen_`; a worker that finished its last loop less than kSpin ago is still polling
// `gen_` and joins within a cache-line transfer. Only a worker idle longer sleeps on the
// condition variable, and only then does the caller take the mutex and notify (a futex wake
// that, on a loaded machine, cost ~0.3 ms per loop: the woken thread preempted the caller).
//
// Slots: each loop is written into jobs_[g % kSlots]. A worker that wakes late and reads a
// loop that has already finished enters that loop's slot, finds nothing to claim and leaves,
// while the caller goes on to the next loop in the next slot: it waits for stragglers only
// when it reuses a slot kSlots loops later. Entering a slot is a Dekker pair: the worker
// counts itself `inside` and then re-reads the slot's generation; the caller marks the slot
// invalid and then waits for `inside` to fall to zero. Sequentially consistent operations on
// both sides: one of the two sees the other.
//
// Oversubscription: Linux shares the cores between sessions (autogroups), not threads, so on
// a busy machine a polling worker takes CPU time from its own caller, and a worker taken off
// its core while it holds a chunk stalls the loop for a time slice (mobilenet_v2 at load 7-12
// on 2 cores: 45-65 ms a run polling, 30-48 ms with the old sleeping workers). So the pool
// watches, over windows of 8 ms, the caller's time waiting for a core (its run delay, from
// /proc/thread-self/schedstat; where that is missing, its progress in cores), its waits for
// the workers' last chunks (sample_caller) and each worker's share of its core; after three bad windows in a row the workers sleep between
// loops for the next 100 ms (then they poll again): each loop wakes them, and they join it
// when they get a core. Judging by one or two windows, or by a share below 1/2, fired on a
// nearly quiet machine too, where polling workers pay; running the loops on the caller
// alone instead was slower than sleeping workers at load 4-7.
#include "backends/llvm/parallel.h"

#include "backends/llvm/pool_stats.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fcntl.h>
#include <unistd.h>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LATHE_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define LATHE_PAUSE() asm volatile("yield")
#else
#define LATHE_PAUSE() ((void)0)
#endif

namespace lathe::llvmjit {

namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker polls for the next loop before it sleeps, and how long the caller
// polls for the last chunks before it sleeps. Long enough to bridge the gap between two
// kernels of a run (microseconds) and a short serial kernel; short enough that an idle pool
// burns no CPU to speak of.
constexpr auto kSpin = std::chrono::microseconds(300);
constexpr auto kCallerSpin = std::chrono::microseconds(200);
constexpr int kSlots = 4;
constexpr uint64_t kInvalid = ~uint64_t(0);

struct alignas(64) Range {
  std::atomic<int64_t> next{0};  // the first iteration of this share not yet claimed
  int64_t end = 0;
};

struct alignas(64) Job {
  std::atomic<uint64_t> gen{kInvalid};  // the loop this slot holds (kInvalid while rewritten)
  std::atomic<int> inside{0};           // workers that entered this slot and have not left
  alignas(64) std::atomic<int64_t> done{0};  // iterations finished
  ChunkFn fn = nullptr;
  void* const* b = nullptr;
  const int64_t* d = nullptr;
  const int64_t* c = nullptr;
  int64_t n = 0, grain = 1;
  int parts = 1;
  std::vector<Range> ranges;
  // LATHE_POOL_STATS=1 (pool_stats.h): per thread, time inside chunks, iterations run, and
  // when it started its first chunk (0: none yet); each thread writes its own before it
  // counts its iterations done
  bool stats = false;
  int64_t published = 0;
  std::vector<int64_t> busy, iters, first;
  std::vector<int64_t> cost;  // by a chunk's first iteration: its CPU time on the thread that ran it
};

// How long the workers sleep between loops once the pool saw that (then they poll again).
constexpr int64_t kContendedForNs = 100'000'000;

// Measured over windows of at least kWindowNs (one longer than kMaxWindowNs is dropped: the
// thread was idle, not starved), kLowWindows bad windows in a row: the machine is taken. A
// worker's window is bad when it gets less than kShareLow of its core (CPU time over wall
// time, in the loops it works in); the caller's, see sample_caller().
constexpr int64_t kWindowNs = 8'000'000, kMaxWindowNs = 50'000'000;
constexpr double kShareLow = 0.4;
constexpr double kWorthLow = 0.75;  // the pool's progress, in cores, below which a window is bad
constexpr int kLowWindows = 3;  // in a row (one alone: a burst of first-touch page faults)

int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// This thread's CPU time and its time runnable but waiting for a core (the run delay), both
// in ns since it started, from /proc/thread-self/schedstat (one pread of a file kept open per
// thread: ~0.6 us on the 2-core VM, against 3-5 us for the CPU clock); false where the kernel
// has no such file.
struct SchedStat {
  int fd = -2;  // -2: not opened yet, -1: none
  ~SchedStat() {
    if (fd >= 0) close(fd);
  }
  bool read(int64_t& cpu, int64_t& delay) {
    if (fd == -2) fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[96];
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return false;
    buf[n] = 0;
    long long c = 0, d = 0;
    if (std::sscanf(buf, "%lld %lld", &c, &d) != 2) return false;
    cpu = c, delay = d;
    return true;
  }
};

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// Polls `ready` with a pause between reads for up to `budget`; true when it came true.
template <class F>
bool spin_until(F ready, Clock::duration budget) {
  auto until = Clock::now() + budget;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    LATHE_PAUSE();
    if ((i & 63) == 0 && Clock::now() >= until) return ready();
  }
}

class Pool {
 public:
  Pool() {
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    nthreads_ = static_cast<int>(hw);
    // LATHE_POOL_THREADS=N: N threads (the caller among them), e.g. 1 for per-kernel A/B
    // times on a shared machine that a descheduled partner does not blur; the heuristics
    // still split loops for the host's cores
    if (const char* e = std::getenv("LATHE_POOL_THREADS"); e && std::atoi(e) > 0) nthreads_ = std::atoi(e);
    stats_ = pool_stats_enabled();
    // LATHE_POOL_RELEASE=0: the old judgement, where the caller's waits for its sleeping
    // workers count as a sign of oversubscription too (A/B runs; see sample_caller)
    if (const char* e = std::getenv("LATHE_POOL_RELEASE"); e && std::atoi(e) == 0) release_ = false;
    // LATHE_POOL_JUDGE=0: the pool never judges the machine oversubscribed (its workers poll
    // between loops whatever the load; A/B runs)
    if (const char* e = std::getenv("LATHE_POOL_JUDGE"); e && std::atoi(e) == 0) judge_ = false;
    // LATHE_POOL_RUNDELAY=0: the caller is starved when its CPU time falls short of its part
    // of the work, as before, not when it waits for a core (sample_caller; A/B runs)
    if (const char* e = std::getenv("LATHE_POOL_RUNDELAY"); e && std::atoi(e) == 0) rundelay_ = false;
    for (auto& j : jobs_) {
      j.ranges = std::vector<Range>(static_cast<size_t>(nthreads_));
      j.busy = j.iters = j.first = std::vector<int64_t>(static_cast<size_t>(nthreads_), 0);
    }
    for (int t = 1; t < nthreads_; ++t) workers_.emplace_back([this, t] { worker(t); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    if (stats_ && loops_.load() > 0)
      std::fprintf(stderr,
                   "pool: judged oversubscribed %lld times (caller starved %lld, caller waited %lld, worker starved %lld); "
                   "%lld of %lld loops with sleeping workers, %lld wake-ups\n",
                   (long long)marks_.load(), (long long)why_[0].load(), (long long)why_[1].load(), (long long)why_[2].load(),
                   (long long)quiet_loops_.load(), (long long)loops_.load(), (long long)wakeups_.load());
    if (stats_ && marks_.load() > 0) {
      std::fprintf(stderr, "pool: judged so at (ms after the pool's start):");
      for (int64_t k = 0; k < std::min<int64_t>(kMarkLog, mark_log_n_.load()); ++k) std::fprintf(stderr, " %.1f", double(mark_log_[k]) / 1e6);
      std::fprintf(stderr, "; pool lived %.1f ms\n", double(now_ns() - born_ns_) / 1e6);
    }
  }
  int threads() const { return nthreads_; }
  PoolStats stats() const {
    return {loops_.load(std::memory_order_relaxed), quiet_loops_.load(std::memory_order_relaxed),
            wakeups_.load(std::memory_order_relaxed), marks_.load(std::memory_order_relaxed),
            cpu_reads_.load(std::memory_order_relaxed)};
  }

  void run(ChunkFn fn, void* const* b, const int64_t* d, const int64_t* c, int64_t n) {
    if (n <= 0) return;
    int parts = static_cast<int>(std::min<int64_t>(nthreads_, n));
    if (parts == 1) {
      if (!stats_) return fn(b, d, c, 0, n);
      int64_t t0 = now_ns(), c0 = thread_cpu_ns();
      fn(b, d, c, 0, n);
      LoopRecord r;
      r.n = n;
      r.wall_ns = now_ns() - t0;
      r.cpu_ns = r.sim_ns = thread_cpu_ns() - c0;
      r.busy_ns.assign(static_cast<size_t>(nthreads_), 0);
      r.iters.assign(static_cast<size_t>(nthreads_), 0);
      r.reach_ns.assign(static_cast<size_t>(nthreads_), -1);
      r.busy_ns[0] = r.wall_ns, r.iters[0] = n, r.reach_ns[0] = 0;
      return stats_loop(r);
    }
    sample_caller();
    // oversubscribed: the workers sleep between loops (they still take part in each, from
    // when they get a core; the caller alone was slower, 23 ms a run against 16-22 at load 6.5)
    if (contended()) {
      quiet_loops_.fetch_add(1, std::memory_order_relaxed);
      caller_window().asleep = true;
    }
    std::lock_guard<std::mutex> serial(run_mu_);  // one parallel loop at a time
    uint64_t g = ++last_gen_;
    Job& j = jobs_[g % kSlots];
    // A worker still in this slot's previous loop (it woke kSlots loops late) leaves it before
    // the slot is rewritten; one that enters from now on sees kInvalid and leaves at once.
    j.gen.store(kInvalid, std::memory_order_seq_cst);
    while (j.inside.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    j.fn = fn; j.b = b; j.d = d; j.c = c; j.n = n; j.parts = parts;
    j.grain = std::max<int64_t>(1, n / (int64_t(parts) * 8));
    for (int p = 0; p < parts; ++p) {
      j.ranges[p].next.store(n * p / parts, std::memory_order_relaxed);
      j.ranges[p].end = n * (p + 1) / parts;
    }
    j.done.store(0, std::memory_order_relaxed);
    j.stats = stats_;
    if (stats_) {
      std::fill(j.busy.begin(), j.busy.end(), 0);
      std::fill(j.iters.begin(), j.iters.end(), 0);
      std::fill(j.first.begin(), j.first.end(), 0);
      j.cost.assign(static_cast<size_t>(n), 0);
      j.published = now_ns();
    }
    j.gen.store(g, std::memory_order_release);
    gen_.store(g, std::memory_order_seq_cst);
    loops_.fetch_add(1, std::memory_order_relaxed);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      // under mu_: a worker between its check and its wait has waited by now. Those woken
      // are counted out at once, so the next loops do not wake them again while they are
      // still on their way to a core. Notified after mu_ is released: a worker woken while
      // the caller still held it blocked again on the mutex (a second futex round trip)
      bool wake = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (sleepers_.load(std::memory_order_relaxed) > 0) {
          sleepers_.store(0, std::memory_order_relaxed);
          ++sleep_round_;
          wakeups_.fetch_add(1, std::memory_order_relaxed);
          wake = true;
        }
      }
      if (wake) cv_.notify_all();
    }
    Window& w = caller_window();
    int64_t t_start = now_ns();
    int64_t mine = chunk(j, 0);
    // Wait for the iterations, not for the workers: one that has not woken yet (the machine
    // is shared) finds everything claimed. Poll briefly (chunks are short), then block.
    int64_t t_own = now_ns();
    auto all_done = [&] { return j.done.load(std::memory_order_seq_cst) == n; };
    if (!spin_until(all_done, kCallerSpin)) {
      std::unique_lock<std::mutex> lock(mu_);
      caller_waiting_.store(true, std::memory_order_seq_cst);
      done_cv_.wait(lock, all_done);
      caller_waiting_.store(false, std::memory_order_relaxed);
    }
    int64_t t_end = now_ns();
    w.loop_ns += t_end - t_start;
    w.own_ns += double(t_end - t_start) * double(mine) / double(n);
    w.wait_ns += t_end - t_own;
    if (stats_) report(j, t_end);
  }

 private:
  // While the machine is oversubscribed, the workers sleep between loops instead of polling:
  // a polling worker takes its caller's CPU time (the scheduler shares a core between
  // sessions, not threads).
  bool contended() const { return now_ns() < contended_until_.load(std::memory_order_relaxed); }
  // why: 0 the caller starved, 1 it waited for the workers, 2 a worker starved
  void mark_contended(int why) {
    marks_.fetch_add(1, std::memory_order_relaxed);
    why_[why].fetch_add(1, std::memory_order_relaxed);
    if (stats_) {
      const int64_t k = mark_log_n_.fetch_add(1, std::memory_order_relaxed);
      if (k < kMarkLog) mark_log_[k] = now_ns() - born_ns_;
    }
    if (judge_) contended_until_.store(now_ns() + kContendedForNs, std::memory_order_relaxed);
  }
  struct Window {
    int64_t wall0 = 0, cpu0 = 0;
    int64_t delay0 = -1;               // run delay at the window's start (-1: no schedstat)
    int64_t loop_ns = 0, wait_ns = 0;  // in parallel loops: in all, and waiting for workers
    double own_ns = 0;                 // loop_ns weighted by the caller's part of each loop
    bool asleep = false;               // a loop of this window found the workers sleeping
    int low = 0;  // bad windows in a row
  };
  static Window& caller_window() {
    thread_local Window w;
    return w;
  }
  // The pool's worth, checked once a window (while the workers sleep too): a window is bad
  // when the threads
  // together made less progress than 3/4 of a core would (a polling worker takes CPU time
  // from its caller's session: at load 4.5 the caller got ~1/2 of a core and the worker did
  // little), or when the caller spent more than a third of its parallel loops waiting for
  // the workers' last chunks: they lost their core while holding them, or share the
  // caller's (the scheduler put both on one).
  void sample_caller() {
    Window& w = caller_window();
    int64_t wall = now_ns();
    if (w.wall0 != 0 && wall - w.wall0 < kWindowNs) return;
    int64_t cpu = 0, delay = -1;
    thread_local SchedStat sched;
    if (!rundelay_ || !sched.read(cpu, delay)) cpu = thread_cpu_ns(), delay = -1;
    cpu_reads_.fetch_add(1, std::memory_order_relaxed);
    if (w.wall0 != 0 && wall - w.wall0 <= kMaxWindowNs) {
      // the cores' worth of progress: the caller's CPU time over the window, divided by its
      // part of the work (code between parallel loops is all the caller's; of each loop,
      // the iterations it ran). Serial, that is the caller's share of its core.
      double total = double(wall - w.wall0);
      double part = std::clamp((total - double(w.loop_ns) + w.own_ns) / total, 1e-3, 1.0);
      bool starved = double(cpu - w.cpu0) / total < kWorthLow * part;
      // With the run delay: starved when the caller waited for a core over a quarter of the
      // window (not of the time it wanted one: a caller that mostly blocks would count its
      // wake-ups' latency against a sliver of CPU time). CPU time over wall time (LATHE_POOL_RUNDELAY=0, or no schedstat)
      // also fell when the caller blocked outside the pool's loops (a model's first run, a
      // background compile or pack: mobilenet_v2's first ~250 ms with nothing else running
      // judged oversubscribed, the workers asleep for them).
      if (delay >= 0 && w.delay0 >= 0) starved = 4 * (delay - w.delay0) > wall - w.wall0;
      // Waits in a window whose workers slept between loops are no sign of a taken machine:
      // each loop woke them, and the caller waited for the wake-up the pool itself chose.
      // Counted, they could renew the sleeping regime with nothing else running; left out,
      // it lasts kContendedForNs unless the caller or a worker is starved, and the polling
      // windows after it judge again. (Seen so far, at load 6-7, every renewal was the
      // caller starved: LATHE_POOL_STATS=1 prints the reasons.)
      bool stalled = (!release_ || !w.asleep) && w.loop_ns > kWindowNs / 4 && 3 * w.wait_ns > w.loop_ns;
      w.low = starved || stalled ? w.low + 1 : 0;
      if (w.low >= kLowWindows) mark_contended(starved ? 0 : 1), w.low = 0;
    }
    w.wall0 = wall, w.cpu0 = cpu, w.delay0 = delay, w.loop_ns = w.wait_ns = 0;
    w.own_ns = 0;
    w.asleep = contended();
  }
  // Thread t first works through its own share of [0, n) (the same iterations on every call
  // with the same n, so a kernel run many times over one weight, an RNN's steps, finds its
  // part in this core's cache), then takes the chunks left in the other shares.
  // Returns how many iterations it ran.
  int64_t chunk(Job& j, int t) {
    if (j.stats) return chunk_stats(j, t);
    return walk_chunks(j, t, [&](int64_t begin, int64_t end) {
      j.fn(j.b, j.d, j.c, begin, end);
      count_done(j, t, end - begin);
    });
  }
  // The walk of chunk() and chunk_stats(): claims thread t's chunks in that order and calls
  // run(begin, end) on each; returns how many iterations it ran. A template, so that `run`
  // is inlined into the loop (no call per chunk beyond the kernel's own).
  template <class Run>
  static int64_t walk_chunks(Job& j, int t, Run&& run) {
    int64_t mine = 0;
    for (int k = 0; k < j.parts; ++k) {
      Range& r = j.ranges[(t + k) % j.parts];
      for (;;) {
        int64_t begin = r.next.fetch_add(j.grain, std::memory_order_relaxed);
        if (begin >= r.end) break;
        int64_t end = std::min(r.end, begin + j.grain);
        run(begin, end);
        mine += end - begin;
      }
    }
    return mine;
  }
  void count_done(Job& j, int t, int64_t iters) {
    bool last = j.done.fetch_add(iters, std::memory_order_seq_cst) + iters == j.n;
    if (last && t != 0 && caller_waiting_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_cv_.notify_all();
    }
  }
  // chunk() under LATHE_POOL_STATS: each chunk's wall time (CLOCK_MONOTONIC, cheap), and the
  // thread's CPU clock read once around all its chunks of the loop (a system call, 3-5 us on
  // the 2-core VM: read around each chunk, as before, it added ~20 us of CPU to every
  // two-thread launch of mobilenet_v2 and showed as a two-thread cost); a chunk's cost is its
  // wall time scaled by the thread's CPU over wall in the loop. Its iterations count as done
  // once the costs are written (the caller's report reads them).
  int64_t chunk_stats(Job& j, int t) {
    thread_local std::vector<int64_t> begins;
    begins.clear();
    int64_t wall = 0;
    const int64_t c0 = thread_cpu_ns();
    const int64_t mine = walk_chunks(j, t, [&](int64_t begin, int64_t end) {
      int64_t t0 = now_ns();
      j.fn(j.b, j.d, j.c, begin, end);
      int64_t dt = now_ns() - t0;
      j.cost[static_cast<size_t>(begin)] = dt;
      if (!j.first[t]) j.first[t] = t0;
      begins.push_back(begin);
      wall += dt;
    });
    if (mine == 0) return 0;
    const double share = std::min(1.0, double(thread_cpu_ns() - c0) / double(std::max<int64_t>(wall, 1)));
    for (int64_t b : begins) j.cost[static_cast<size_t>(b)] = int64_t(double(j.cost[static_cast<size_t>(b)]) * share);
    j.busy[t] += wall;
    j.iters[t] += mine;
    count_done(j, t, mine);
    return mine;
  }
  // LATHE_POOL_STATS: the loop just joined (every chunk done: the threads' counts are final)
  void report(const Job& j, int64_t t_end) {
    LoopRecord r;
    r.n = j.n;
    r.wall_ns = t_end - j.published;
    r.busy_ns = j.busy;
    r.iters = j.iters;
    for (size_t t = 0; t < j.first.size(); ++t) r.reach_ns.push_back(j.first[t] ? j.first[t] - j.published : -1);
    // the same chunks on dedicated cores: each thread takes its own share's chunks in order,
    // then those left in the next shares; whichever thread is free first claims next
    std::vector<int64_t> clock(static_cast<size_t>(j.parts), 0), next(static_cast<size_t>(j.parts));
    for (int p = 0; p < j.parts; ++p) next[p] = j.n * p / j.parts;
    for (;;) {
      int t = int(std::min_element(clock.begin(), clock.end()) - clock.begin());
      bool took = false;
      for (int k = 0; k < j.parts && !took; ++k) {
        int p = (t + k) % j.parts;
        int64_t end = j.n * (p + 1) / j.parts;
        if (next[p] >= end) continue;
        clock[t] += j.cost[static_cast<size_t>(next[p])];
        r.cpu_ns += j.cost[static_cast<size_t>(next[p])];
        next[p] = std::min(end, next[p] + j.grain);
        took = true;
      }
      if (!took) {
        clock[t] = INT64_MAX;  // nothing left for it
        if (std::all_of(clock.begin(), clock.end(), [](int64_t c) { return c == INT64_MAX; })) break;
      } else {
        r.sim_ns = std::max(r.sim_ns, clock[t]);
      }
    }
    stats_loop(r);
  }
  // The next loop's generation after `seen`: polled for kSpin, then waited for asleep (the
  // time asleep, to its return, is added to `slept`).
  uint64_t next_loop(uint64_t seen, int64_t& slept) {
    auto fresh = [&] { return gen_.load(std::memory_order_seq_cst) != seen; };
    if (!contended() && spin_until(fresh, kSpin)) return gen_.load(std::memory_order_acquire);
    const int64_t t0 = now_ns();
    {
      std::unique_lock<std::mutex> lock(mu_);
      uint64_t round = sleep_round_;
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_.wait(lock, fresh);
      if (sleep_round_ == round) sleepers_.fetch_sub(1, std::memory_order_relaxed);  // not counted out
    }
    slept += now_ns() - t0;
    return gen_.load(std::memory_order_acquire);
  }
  // This worker's share of its core, judged once a window: its CPU time over the time it was
  // awake (working in loops or polling for the next one; the time asleep between loops left
  // out) since the window began, at the end of a loop it worked in. The thread's CPU clock is
  // read once a window, after a loop, not around each loop: a read is a system call, ~5 us on
  // the 2-core VM (CLOCK_MONOTONIC: 0.15 us), and the two reads around every loop delayed the
  // worker's first chunk by one of them and took ~10 us of its core per loop (mobilenet_v2:
  // 54 loops a run of 6.5 ms).
  struct WorkerWindow {
    int64_t wall0 = 0, cpu0 = 0, slept = 0;  // wall0 0: no window open
    int low = 0;                             // bad windows in a row
  };
  void judge_worker(WorkerWindow& w) {
    const int64_t now = now_ns();
    if (w.wall0 != 0 && now - w.wall0 - w.slept < kWindowNs) return;
    const int64_t cpu = thread_cpu_ns();
    cpu_reads_.fetch_add(1, std::memory_order_relaxed);
    if (w.wall0 != 0) {
      const int64_t awake = now - w.wall0 - w.slept;
      w.low = double(cpu - w.cpu0) < kShareLow * double(awake) ? w.low + 1 : 0;
      if (w.low >= kLowWindows) mark_contended(2), w.low = 0;
    }
    w.wall0 = now, w.cpu0 = cpu, w.slept = 0;
  }
  void worker(int t) {
    uint64_t seen = 0;
    WorkerWindow win;
    for (;;) {
      uint64_t g = next_loop(seen, win.slept);
      if (stop_.load()) return;
      seen = g;
      Job& j = jobs_[g % kSlots];
      j.inside.fetch_add(1, std::memory_order_seq_cst);
      // still loop g (not rewritten for g + kSlots meanwhile): its fields are stable until we leave
      bool worked = false;
      if (j.gen.load(std::memory_order_seq_cst) == g && t < j.parts) {
        chunk(j, t);
        worked = true;
      }
      j.inside.fetch_sub(1, std::memory_order_release);
      if (worked) judge_worker(win);
    }
  }

  int nthreads_ = 1;
  bool stats_ = false;  // LATHE_POOL_STATS=1
  bool release_ = true;  // LATHE_POOL_RELEASE (sample_caller)
  bool judge_ = true;    // LATHE_POOL_JUDGE
  bool rundelay_ = true;  // LATHE_POOL_RUNDELAY
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  alignas(64) std::atomic<uint64_t> gen_{0};  // the latest loop published
  alignas(64) std::atomic<int> sleepers_{0};  // workers asleep on cv_ (or about to be)
  uint64_t sleep_round_ = 0;                  // under mu_: notifications that counted them out
  std::atomic<bool> caller_waiting_{false};   // the caller asleep on done_cv_
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> contended_until_{0};   // now_ns() before which the workers do not poll
  uint64_t last_gen_ = 0;                     // under run_mu_
  std::atomic<int64_t> loops_{0}, quiet_loops_{0}, wakeups_{0}, marks_{0}, cpu_reads_{0};  // PoolStats
  std::atomic<int64_t> why_[3] = {};  // marks_ by their reason (mark_contended)
  // LATHE_POOL_STATS: when the first kMarkLog judgements came, after the pool's start
  static constexpr int64_t kMarkLog = 32;
  int64_t born_ns_ = now_ns(), mark_log_[kMarkLog] = {};
  std::atomic<int64_t> mark_log_n_{0};
  Job jobs_[kSlots];
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

extern "C" void lathe_llvm_parallel_for(ChunkFn fn, void* const* buffers, const int64_t* dims, const int64_t* captures,
                                        int64_t n) {
  pool().run(fn, buffers, dims, captures, n);
}

namespace {
// this thread's scratch stack: one buffer per depth, grown as needed, freed with the thread
struct Scratch {
  struct Buf {
    void* p = nullptr;
    int64_t bytes = 0;
  };
  std::vector<Buf> bufs;
  size_t depth = 0;
  ~Scratch() {
    for (Buf& b : bufs) std::free(b.p);
  }
};
thread_local Scratch t_scratch;
}  // namespace

extern "C" void* lathe_llvm_scratch_push(int64_t bytes) {
  Scratch& s = t_scratch;
  if (s.depth == s.bufs.size()) s.bufs.emplace_back();
  Scratch::Buf& b = s.bufs[s.depth];
  if (b.bytes < bytes) {
    std::free(b.p);
    const int64_t size = (std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
    b.p = std::aligned_alloc(64, static_cast<size_t>(size));
    if (!b.p) {
      b.bytes = 0;
      std::fprintf(stderr, "lathe: out of memory for a kernel's %lld-byte scratch array\n", static_cast<long long>(bytes));
      std::abort();
    }
    b.bytes = size;
  }
  ++s.depth;
  return b.p;
}

extern "C" void lathe_llvm_scratch_pop(int64_t count) { t_scratch.depth -= static_cast<size_t>(count); }

int pool_threads() { return pool().threads(); }

PoolStats pool_stats() { return pool().stats(); }

}  // namespace lathe::llvmjit
