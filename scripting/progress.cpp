// progress.cpp — the progress bar and spinner on stderr, the Ctrl-C check between steps,
// and the native helpers of the REPL's long commands (lathe.cmd._step_n, _profile,
// _compile): they loop in C++ so they can draw progress and stop between iterations.
#include "scripting/progress.h"

#include <lua.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "backends/backend.h"
#include "core/runtime/machine.h"
#include "core/runtime/random.h"
#include "scripting/binding.h"
#include "scripting/commands.h"
#include "scripting/engine.h"
#include "scripting/program_box.h"
#include "scripting/session_lua.h"

namespace lathe::script {

bool interrupted() {
  if (!Engine::interrupt_pending()) return false;
  Engine::clear_interrupt();
  return true;
}

// ------------------------------------------------------------------ Progress
bool Progress::enabled() {
  static const bool on = isatty(2) && !std::getenv("LATHE_NO_PROGRESS");
  return on;
}

Progress::Progress(std::string what, int total)
    : what_(std::move(what)), total_(total), start_(std::chrono::steady_clock::now()), on_(enabled()) {}

Progress::~Progress() { finish(); }

void Progress::update(int done) {
  done_ = done;
  if (!on_) return;
  auto now = std::chrono::steady_clock::now();
  // Nothing for quick work (< 0.3 s); then at most ~10 redraws a second.
  if (now - start_ < std::chrono::milliseconds(300)) return;
  if (shown_ && now - last_draw_ < std::chrono::milliseconds(100) && done != total_) return;
  last_draw_ = now;
  draw();
}

void Progress::draw() {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char line[256];
  if (total_ > 0) {
    int width = 30, done = std::min<int>(done_, total_);
    int fill = (int)std::lround((double)width * done / total_);
    std::string bar(fill, '#');
    bar += std::string(width - fill, '.');
    std::snprintf(line, sizeof line, "\r%s [%s] %d/%d  %.1fs  (Ctrl-C stops)", what_.c_str(), bar.c_str(), done,
                  total_, secs);
  } else {
    static const char spin[] = "|/-\\";
    std::snprintf(line, sizeof line, "\r%s %c %.1fs", what_.c_str(), spin[(int)(secs * 8) % 4], secs);
  }
  std::fputs(line, stderr);
  std::fputs("\x1b[K", stderr);  // clear to the end of the line
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish() {
  if (shown_) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    shown_ = false;
  }
}

void with_spinner(const std::string& what, const std::function<void()>& fn) {
  if (!Progress::enabled()) return fn();
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread t([&] {
    Progress p(what, 0);
    std::unique_lock<std::mutex> lk(m);
    while (!cv.wait_for(lk, std::chrono::milliseconds(120), [&] { return done; })) p.update(0);
  });
  auto stop = [&] {
    {
      std::lock_guard<std::mutex> lk(m);
      done = true;
    }
    cv.notify_all();
    t.join();
  };
  try {
    fn();
  } catch (...) {
    stop();
    throw;
  }
  stop();
}

// ------------------------------------------------------------------ long commands
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// lathe.cmd._step_n(s, n) -> array of steps, stop ("fixpoint" | "interrupted" | "done")
int l_step_n(lua_State* L) {
  auto ss = test_session(L, 1);
  if (!ss) raise(L, "expected a rewrite session, got a " + type_of(L, 1));
  int64_t n = check_int(L, 2, "n");
  if (n < 0) raise(L, "n must be >= 0");
  lua_newtable(L);
  int out = lua_gettop(L);
  const char* stop = "done";
  Progress bar("rewriting", (int)n);
  for (int64_t i = 0; i < n; ++i) {
    if (interrupted()) { stop = "interrupted"; break; }
    auto st = ss->step();
    if (!st) { stop = "fixpoint"; break; }
    push_step(L, *st);
    lua_rawseti(L, out, i + 1);
    bar.update((int)i + 1);
  }
  bar.finish();
  lua_pushstring(L, stop);
  return 2;
}

// lathe.cmd._run(s) -> as s:run(), under a spinner (one core call: not interruptible
// unless a rule is a Lua function).
int l_run(lua_State* L) {
  auto ss = test_session(L, 1);
  if (!ss) raise(L, "expected a rewrite session, got a " + type_of(L, 1));
  RunResult r;
  with_spinner("rewriting", [&] { r = ss->run(); });
  push_run_result(L, r);
  return 1;
}

// Profiles one iteration at a time so the bar moves and Ctrl-C stops between runs; the
// per-kernel medians are computed here over the iterations that ran (as Executable does).
ProfileReport profile_iterations(Executable& exe, const TensorMap& in, int iters, bool* stopped) {
  *stopped = false;
  Progress bar("profiling", iters);
  ProfileReport r;
  with_spinner("warming up", [&] { r = exe.profile(in, 1, 2); });
  std::vector<std::vector<double>> per(r.kernels.size());
  std::vector<double> totals{r.total_ms};
  for (size_t k = 0; k < r.kernels.size(); ++k) per[k].push_back(r.kernels[k].median_ms);
  bar.update(1);
  for (int i = 1; i < iters; ++i) {
    if (interrupted()) { *stopped = true; break; }
    ProfileReport one = exe.profile(in, 1, 0);
    if (one.kernels.size() != per.size()) break;  // cannot happen: same program
    for (size_t k = 0; k < per.size(); ++k) per[k].push_back(one.kernels[k].median_ms);
    totals.push_back(one.total_ms);
    r.events = std::move(one.events);
    bar.update(i + 1);
  }
  bar.finish();
  r.total_ms = median_of(totals);
  for (size_t k = 0; k < per.size(); ++k) {
    KernelProfile& kp = r.kernels[k];
    kp.calls = (int)per[k].size();
    kp.median_ms = median_of(per[k]);
    kp.min_ms = *std::min_element(per[k].begin(), per[k].end());
    double s = std::max(kp.median_ms, 1e-6) / 1000;
    if (kp.flops > 0 || kp.bytes > 0) {
      kp.gflops = kp.flops / s / 1e9;
      kp.gbps = kp.bytes / s / 1e9;
      kp.roof = kp.bound == "memory" ? (r.peak_gbps > 0 ? kp.gbps / r.peak_gbps : 0)
                                     : (r.peak_gflops > 0 ? kp.gflops / r.peak_gflops : 0);
      kp.above_roof = r.device_ceiling ? (kp.roof > 1 ? "above the device ceiling measured" : "")
                                       : above_roof_reason(kp.roof, kp.bound == "memory", kp.bytes);
    }
  }
  return r;
}

// Seeded random inputs; symbolic dims from `binds` ({B = 64}), else kDefaultDim each.
constexpr int64_t kDefaultDim = 64;
TensorMap profile_inputs(lua_State* L, int binds_idx, const Graph& g, std::string* note) {
  Bindings b;
  if (lua_istable(L, binds_idx)) {
    lua_pushnil(L);
    while (lua_next(L, binds_idx)) {
      if (lua_type(L, -2) == LUA_TSTRING) b[lua_tostring(L, -2)] = check_int(L, -1, "dim value");
      lua_pop(L, 1);
    }
  }
  for (const std::string& sym : g.symbols()) {
    if (b.count(sym)) continue;
    b[sym] = kDefaultDim;
    *note += (note->empty() ? "" : " ") + sym + "=" + std::to_string(kDefaultDim);
  }
  TensorMap in;
  for (auto& [n, t] : random_inputs(g, 0, b)) in[n] = t;
  return in;
}

// lathe.cmd._profile(p, iters [, trace_path [, {SYM = N}]])
//   -> {text=, total_ms=, iters=, kernels=, interrupted=, defaults= "B=64" (dims not given)}
int l_profile(lua_State* L) {
  std::shared_ptr<Executable> exe = check_program_exe(L, 1);
  int64_t iters = check_int(L, 2, "iters");
  if (iters < 1) raise(L, "iters must be >= 1");
  std::string trace = luaL_optstring(L, 3, "");
  bool stopped = false;
  std::string defaults;
  TensorMap in = profile_inputs(L, 4, exe->program().graph, &defaults);
  ProfileReport r = profile_iterations(*exe, in, (int)iters, &stopped);
  if (!trace.empty()) r.write_trace(trace);
  lua_createtable(L, 0, 6);
  lua_pushstring(L, r.table().c_str());
  lua_setfield(L, -2, "text");
  lua_pushnumber(L, r.total_ms);
  lua_setfield(L, -2, "total_ms");
  lua_pushinteger(L, r.kernels.empty() ? 0 : r.kernels[0].calls);
  lua_setfield(L, -2, "iters");
  lua_pushboolean(L, stopped);
  lua_setfield(L, -2, "interrupted");
  lua_pushinteger(L, (lua_Integer)r.kernels.size());
  lua_setfield(L, -2, "kernels");
  lua_pushstring(L, defaults.c_str());
  lua_setfield(L, -2, "defaults");
  return 1;
}

// lathe.cmd._compile(g [, backend]) -> program, backend: lathe.compile under a spinner.
int l_compile(lua_State* L) {
  check_graph(L, 1);
  std::string backend = luaL_optstring(L, 2, default_backend().c_str());
  lua_getglobal(L, "lathe");
  lua_getfield(L, -1, "compile");
  lua_pushvalue(L, 1);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, backend.c_str());
  lua_setfield(L, -2, "backend");
  with_spinner("compiling with " + backend, [&] { lua_call(L, 2, 1); });
  lua_pushstring(L, backend.c_str());
  return 2;
}

// lathe.cmd._compiled_from(p, g) -> true when p was compiled from g (the same output nodes:
// nodes are hash-consed, so equal graphs share them)
int l_compiled_from(lua_State* L) {
  const Graph& pg = check_program(L, 1)->program().graph;
  const Graph& g = check_graph(L, 2);
  lua_pushboolean(L, pg.outputs == g.outputs);
  return 1;
}

const Function kLong[] = {
    {"_compiled_from", l_compiled_from, "lathe.cmd._compiled_from(p, g)", "was p compiled from g?"},
    {"_step_n", l_step_n, "lathe.cmd._step_n(s, n)", "up to n rewrite steps with progress; Ctrl-C stops between steps"},
    {"_profile", l_profile, "lathe.cmd._profile(p, iters [, trace])", "profile with progress; Ctrl-C stops between iterations"},
    {"_run", l_run, "lathe.cmd._run(s)", "s:run() under a spinner"},
    {"_compile", l_compile, "lathe.cmd._compile(g [, backend])", "lathe.compile under a spinner"},
    {nullptr, nullptr, nullptr, nullptr},
};

}  // namespace

void register_long_commands(lua_State* L, int table) {
  for (const Function* f = kLong; f->name; ++f) {  // internal: not listed in lathe.help()
    push_guarded(L, f->fn);
    lua_setfield(L, table, f->name);
  }
  register_tune_command(L, table);
}

}  // namespace lathe::script
