// progress.h — long work in the REPL: a progress bar on stderr (only when stderr is a
// terminal) and Ctrl-C checks between the steps of loops the command layer controls.
//
//   Progress bar("profiling", iters);
//   for (int i = 0; i < iters; ++i) {
//     if (interrupted()) break;        // Ctrl-C: stop between iterations, state consistent
//     work(i);
//     bar.update(i + 1);
//   }
//
// What cannot be interrupted (it runs inside one core call): compiling (the backend and its
// compiler), one rewrite step or sweep, s:run() over pattern-only rules, s:check(). Ctrl-C
// there takes effect when that call returns. Rules written as Lua functions are
// interrupted inside the rule (the session stays before that step).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

struct lua_State;

namespace lathe::script {

// True (once) when Ctrl-C was pressed since the command started; consumes the request so
// the Lua hook does not raise "interrupted" later for the same key press.
bool interrupted();

class Progress {
 public:
  // total <= 0: unknown length (a spinner with the elapsed time).
  Progress(std::string what, int total);
  ~Progress();
  void update(int done);
  void finish();  // erases the bar (also done by the destructor)
  static bool enabled();  // stderr is a terminal and LATHE_NO_PROGRESS is unset

 private:
  void draw();
  std::string what_;
  int total_ = 0;
  std::atomic<int> done_{0};
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool shown_ = false;
  bool on_ = false;
};

// Runs fn while a background thread draws a spinner ("compiling… 2.3s") on a terminal,
// for work that reports no progress of its own. The spinner starts after 300 ms.
void with_spinner(const std::string& what, const std::function<void()>& fn);

// Installs into the table at `table` (lathe.cmd) the native helpers of the long commands:
//   _step_n(s, n)            up to n steps, one at a time (progress, Ctrl-C between steps)
//   _profile(p, iters)       profile iteration by iteration (progress, Ctrl-C) -> report table
//   _compile(g, backend)     lathe.compile under a spinner
void register_long_commands(lua_State* L, int table);
// lathe.cmd._tune(p, {trials=, measure=, records=, kernels=, binds=, budget=}): :tune (tune_cmd.cpp)
void register_tune_command(lua_State* L, int table);

}  // namespace lathe::script
