// jobs.h — the app's background jobs: compiling, profiling and running the graph take
// from milliseconds to minutes, so they run on one worker thread while the window keeps
// drawing (a spinner says what runs and for how long) and the result is applied on the UI
// thread, in the next frame after the work ends.
//
// One job at a time: start() refuses a second. A job's work runs on the worker and must
// not touch AppState, ImGui or Lua; it gets what it needs by value (a snapshot of the
// graph, a shared_ptr to the program) and returns a closure that poll() runs on the UI
// thread to apply the result. The closure checks the state still wants it (the same
// document, the same program) and drops it otherwise. Work that throws becomes the error
// panel's content; nothing escapes to the frame loop.
//
// Scripts stay deterministic: the `gui` functions that start a job wait for it (a
// --script pauses while the app renders, the console blocks) before they return.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/ir/diag.h"

namespace lathe::views {

class AppState;

class JobRunner {
 public:
  using Apply = std::function<void(AppState&)>;
  using Work = std::function<Apply()>;   // runs on the worker; returns what to apply

  JobRunner() = default;
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;
  ~JobRunner() { join(); }

  // Starts `work` on the worker. `kind` names it for scripts ("compile", "profile",
  // "run"), `label` for the spinner ("compiling with llvm"), `failure` heads the error
  // panel when it throws ("compile failed"). False (and nothing started) when busy.
  bool start(std::string kind, std::string label, std::string failure, Work work);
  // A job was started and its result is not applied yet.
  bool busy() const { return busy_; }
  const std::string& kind() const { return kind_; }
  const std::string& label() const { return label_; }
  double seconds() const;   // since the running job started
  // UI thread, once per frame: applies a finished job (its result or its error). True
  // when it applied one.
  bool poll(AppState& s);
  // Blocks until the running job's work is done (poll() still has to apply it).
  void wait();
  // Tests: while held, a started job waits before doing its work, so a script can look
  // at the app mid-job deterministically. Releasing lets it go.
  void hold(bool on);
  bool held() const;
  // Joins the worker (waiting for its work); the app calls it before the window goes.
  void join();

  // Called on the worker when work ends, to wake an idle frame loop (glfwPostEmptyEvent).
  std::function<void()> wake;
  // The last applied job: its kind and, when it failed, the error panel's text.
  std::string last_kind, last_error;
  uint64_t finished = 0;   // jobs applied so far

 private:
  void run(Work work);
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;            // UI thread only
  bool done_ = false;            // guarded by mu_: the worker finished
  bool hold_ = false;            // guarded by mu_
  Apply result_;                 // guarded by mu_
  std::optional<Diagnostic> error_;   // guarded by mu_
  std::string kind_, label_, failure_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace lathe::views
