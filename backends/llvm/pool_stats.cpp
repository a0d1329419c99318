// pool_stats.cpp — LATHE_POOL_STATS=1: per-kernel accounting of the pool's loops. See pool_stats.h.
#include "backends/llvm/pool_stats.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "backends/llvm/parallel.h"

namespace lathe::llvmjit {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct State {
  std::mutex mu;
  std::map<std::string, KernelPoolStats> rows;
  std::map<std::string, int64_t> seen;  // launches per kernel, the first one left out
  int64_t gap_ns = 0;
};
State& state() {
  static State* s = new State;  // never destroyed: the exit report reads it
  return *s;
}

// the calling thread's current launch
struct Current {
  const char* name = nullptr;
  bool counted = false;
  int64_t start = 0, last_end = 0;
  KernelPoolStats acc;
};
thread_local Current t_cur;

void add_per_thread(std::vector<int64_t>& to, const std::vector<int64_t>& from) {
  if (to.size() < from.size()) to.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) to[i] += from[i];
}

void report_at_exit() {
  std::string table = pool_stats_table(pool_threads());
  if (const char* f = std::getenv("LATHE_POOL_STATS_FILE"); f && *f) {
    std::ofstream out(f);
    out << table;
    if (out) return;
  }
  std::fputs(table.c_str(), stderr);
}

}  // namespace

bool pool_stats_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_POOL_STATS");
    bool v = e && *e && std::string(e) != "0";
    if (v) std::atexit(report_at_exit);
    return v;
  }();
  return on;
}

void stats_kernel_begin(const char* name) {
  Current& c = t_cur;
  int64_t t = now_ns();
  c.name = name;
  c.acc = KernelPoolStats{};
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    c.counted = s.seen[name]++ > 0;
    if (c.counted && c.last_end != 0) s.gap_ns += t - c.last_end;
  }
  c.start = now_ns();
}

void stats_kernel_end() {
  Current& c = t_cur;
  int64_t t = now_ns();
  if (c.name && c.counted) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    KernelPoolStats& r = s.rows[c.name];
    r.name = c.name;
    r.calls += 1;
    r.wall_ns += t - c.start;
    r.loops += c.acc.loops;
    r.loop_ns += c.acc.loop_ns;
    r.odd_loops += c.acc.odd_loops;
    if (c.acc.loops) {
      r.min_jobs = r.min_jobs ? std::min(r.min_jobs, c.acc.min_jobs) : c.acc.min_jobs;
      r.max_jobs = std::max(r.max_jobs, c.acc.max_jobs);
    }
    add_per_thread(r.busy_ns, c.acc.busy_ns);
    add_per_thread(r.iters, c.acc.iters);
    r.reach_ns += c.acc.reach_ns;
    r.reaches += c.acc.reaches;
    r.cpu_ns += c.acc.cpu_ns;
    r.sim_ns += c.acc.sim_ns;
  }
  c.name = nullptr;
  c.last_end = now_ns();
}

void stats_loop(const LoopRecord& r) {
  Current& c = t_cur;
  if (!c.name) return;  // a loop outside a bracketed launch (a test calling the pool)
  KernelPoolStats& a = c.acc;
  a.loops += 1;
  a.loop_ns += r.wall_ns;
  a.min_jobs = a.min_jobs ? std::min(a.min_jobs, r.n) : r.n;
  a.max_jobs = std::max(a.max_jobs, r.n);
  const int64_t parts = static_cast<int64_t>(r.busy_ns.size());
  if (parts > 1 && r.n % parts != 0) a.odd_loops += 1;
  add_per_thread(a.busy_ns, r.busy_ns);
  add_per_thread(a.iters, r.iters);
  a.cpu_ns += r.cpu_ns;
  a.sim_ns += r.sim_ns;
  for (size_t t = 1; t < r.reach_ns.size(); ++t)
    if (r.reach_ns[t] >= 0) a.reach_ns += r.reach_ns[t], a.reaches += 1;
}

void stats_run_begin() { t_cur.last_end = 0; }

std::vector<KernelPoolStats> pool_stats_rows() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<KernelPoolStats> out;
  for (auto& [_, r] : s.rows) out.push_back(r);
  std::sort(out.begin(), out.end(), [](const KernelPoolStats& a, const KernelPoolStats& b) { return a.wall_ns > b.wall_ns; });
  return out;
}

int64_t pool_stats_gap_ns() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.gap_ns;
}

void pool_stats_reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.rows.clear();
  s.seen.clear();
  s.gap_ns = 0;
}

std::string pool_stats_table(int threads) {
  const auto rows = pool_stats_rows();
  const int64_t gap = pool_stats_gap_ns();
  const int T = std::max(threads, 1);
  std::ostringstream o;
  char line[512];
  auto us = [](int64_t ns, int64_t calls) { return calls ? double(ns) / 1e3 / double(calls) : 0.0; };
  o << "pool stats (LATHE_POOL_STATS): " << T << " threads; per launch, microseconds; first launch of each kernel left out\n";
  o << "  serial: the kernel's time outside parallel loops (one thread); busy t: thread t inside chunks;\n"
       "  join idle: the loops' wall time on every thread less the threads' busy time; idle: of T x wall;\n"
       "  reach: a worker's time from a loop's publication to its first chunk; jobs * : the threads do not divide them;\n"
       "  cpu: the chunks' CPU time; span: the loops' time were those chunks run on dedicated cores in the\n"
       "  pool's claiming order; split: 1 - cpu / (T x span), what the cut into jobs loses (load-independent)\n";
  std::snprintf(line, sizeof line, "%-32s %5s %8s %7s %5s %9s %8s %8s %8s %5s %6s %8s %8s %6s\n", "kernel", "calls", "wall", "serial",
                "loops", "jobs", "busy 0", "busy 1+", "join idl", "idle", "reach", "cpu", "span", "split");
  o << line;
  int64_t tot_wall = 0, tot_serial = 0, tot_join = 0, tot_calls_max = 0, tot_busy = 0, tot_cpu = 0, tot_sim = 0;
  for (const auto& r : rows) {
    const int64_t serial = r.wall_ns - r.loop_ns;
    int64_t busy_all = 0;
    for (int64_t b : r.busy_ns) busy_all += b;
    const int64_t busy0 = r.busy_ns.empty() ? 0 : r.busy_ns[0];
    const int64_t join = T * r.loop_ns - busy_all;
    const double idle = r.wall_ns ? 1.0 - double(serial + busy_all) / (double(T) * double(r.wall_ns)) : 0.0;
    char jobs[32];
    if (!r.loops) std::snprintf(jobs, sizeof jobs, "-");
    else if (r.min_jobs == r.max_jobs) std::snprintf(jobs, sizeof jobs, "%lld%s", (long long)r.min_jobs, r.odd_loops ? "*" : "");
    else std::snprintf(jobs, sizeof jobs, "%lld-%lld%s", (long long)r.min_jobs, (long long)r.max_jobs, r.odd_loops ? "*" : "");
    const double split = r.sim_ns ? 1.0 - double(r.cpu_ns) / (double(T) * double(r.sim_ns)) : 0.0;
    std::snprintf(line, sizeof line, "%-32.32s %5lld %8.1f %7.1f %5.1f %9s %8.1f %8.1f %8.1f %4.0f%% %6.1f %8.1f %8.1f %5.0f%%\n", r.name.c_str(),
                  (long long)r.calls, us(r.wall_ns, r.calls), us(serial, r.calls), double(r.loops) / double(std::max<int64_t>(r.calls, 1)),
                  jobs, us(busy0, r.calls), us(busy_all - busy0, r.calls), us(join, r.calls), 100 * idle,
                  us(r.reach_ns, r.reaches), us(r.cpu_ns, r.calls), us(r.sim_ns, r.calls), 100 * split);
    o << line;
    tot_wall += r.wall_ns, tot_serial += serial, tot_join += join, tot_busy += busy_all;
    tot_cpu += r.cpu_ns, tot_sim += r.sim_ns;
    tot_calls_max = std::max(tot_calls_max, r.calls);
  }
  const int64_t runs = std::max<int64_t>(tot_calls_max, 1);
  const double avail = double(T) * double(tot_wall + gap);
  auto share = [&](double ns) { return avail > 0 ? 100.0 * ns / avail : 0.0; };
  std::snprintf(line, sizeof line,
                "per run (%lld runs): kernels %.3f ms, gaps between launches %.3f ms; of %d x that thread time: busy in loops "
                "%.1f%%, serial (others idle) %.1f%%, idle at joins %.1f%%, idle in gaps %.1f%%\n",
                (long long)runs, double(tot_wall) / 1e6 / double(runs), double(gap) / 1e6 / double(runs), T, share(double(tot_busy)),
                share(double(T - 1) * double(tot_serial)), share(double(tot_join)), share(double(T) * double(gap)));
  o << line;
  std::snprintf(line, sizeof line, "idle share (all thread time not in a chunk or serial code): %.1f%%\n",
                share(double(T - 1) * double(tot_serial) + double(tot_join) + double(T) * double(gap)));
  o << line;
  std::snprintf(line, sizeof line,
                "load-independent: loops' CPU %.3f ms per run; on dedicated cores they would span %.3f ms (a perfect split: "
                "%.3f), plus serial %.3f and gaps %.3f: the cut into jobs loses %.1f%% of the loops' thread time\n",
                double(tot_cpu) / 1e6 / double(runs), double(tot_sim) / 1e6 / double(runs), double(tot_cpu) / 1e6 / double(runs) / T,
                double(tot_serial) / 1e6 / double(runs), double(gap) / 1e6 / double(runs),
                tot_sim ? 100.0 * (1.0 - double(tot_cpu) / (double(T) * double(tot_sim))) : 0.0);
  o << line;
  return o.str();
}

}  // namespace lathe::llvmjit
