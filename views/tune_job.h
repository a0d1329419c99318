// tune_job.h — the app's Tune job: the tuner (core/tune/search.h, what `lathe tune` and the
// REPL's :tune run) on the selected kernel or on every kernel of the compiled program, as
// a background job (jobs.h), and "apply", which replays the best schedules onto the
// session's program `p` and writes the records.
//
// The search starts from the heuristic's schedules: the worker builds the compiled
// program's graph afresh (as :tune does), so records applied at compile time or hand edits
// of `p` do not become the baseline. While it runs, the worker appends each candidate's
// time (TuneOptions::on_trial) and the progress to the TuneRun under its mutex, and the
// Tune tab (tune_panel.h) draws a copy every frame; Cancel sets TuneRun::stop, the search
// ends after the batch in flight and keeps what it found (the kernel being tuned gets its
// best so far). When the job is applied, each tuned kernel gets its record, the loop IR
// of the best schedule (replayed from the record's lines) and the heuristic's loop IR.
//
// Apply (UI thread) writes the records (merged into the records file, as `lathe tune`
// does) and starts a compile job for the program shown with the records that beat the
// heuristic replayed onto its kernels (tune::apply_records: same hash and target, and
// 5% faster); the result becomes `p` and the Kernels panel's program.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tune/records.h"
#include "core/tune/search.h"
#include "views/app_state.h"

namespace lathe::views {

struct TuneRequest {
  int kernel = -1;                  // index in the compiled program; -1 = the whole graph
  int trials = 16;                  // candidates measured per kernel (tune::TuneOptions::trials)
  std::string measure = "time";     // "time": run them on the backend; "model": the cost model alone
  double budget_s = 0;              // seconds for the whole run; 0 = none
  std::string records;              // the records file Apply writes; "" = the default one
  uint64_t seed = 1;
  int cancel_after = 0;             // tests: cancel (as the button does) after this many trials
};

// One distinct kernel of a run (kernels of the same structure are tuned once).
struct TuneKernel {
  int kernel = -1;                  // its index in the program
  std::string name, kind;
  std::vector<tune::Trial> trials;  // each candidate's time, in order
  double best_ms = -1, baseline_ms = -1;   // so far (the search's Progress)
  bool done = false;
  // when the job is applied
  bool has_record = false;
  tune::Record record;
  bool faster = false;              // it beat the heuristic (Apply replays it)
  std::string best_loop, heuristic_loop;   // loop IR
};

class TuneRun {
 public:
  TuneRequest req;
  std::string backend, target, records_path;
  std::string scope;                // "kernel k3_sum" or "the graph (7 kernels)"
  uint64_t document = 0;            // AppState::document it was started on
  std::shared_ptr<Compiled> compiled;   // the program it was started from
  std::atomic<bool> stop{false};    // Cancel
  std::atomic<int> trials_seen{0};

  // Written by the worker, read by the UI: take a copy with snapshot().
  struct Live {
    std::vector<TuneKernel> kernels;
    tune::Progress progress;
    bool started = false;           // the measurer exists, the search runs
  };
  Live snapshot() const;
  void update(const std::function<void(Live&)>& f);

  // After the job is applied (UI thread).
  bool finished = false, interrupted = false;
  std::vector<std::string> notes;
  std::vector<tune::Record> records;
  double seconds = 0;
  bool applied = false;             // Apply wrote the records and recompiled
  int applied_kernels = 0;
  std::vector<loop::LoopFunc> heuristic_funcs;   // the fresh build's schedules (p:reset() goes back to them)

 private:
  mutable std::mutex mu_;
  Live live_;
};

// Starts tuning (kernel r.kernel, or every kernel) of the program shown; false, with a log
// line, when nothing is compiled, the kernel does not exist, or another job runs.
bool start_tune(AppState& s, const TuneRequest& r);
// Asks the running search to stop after the batch in flight (it keeps what it found).
bool cancel_tune(AppState& s);
// Writes the last run's records and starts compiling the program shown with them applied
// (a "compile" job). False, with a log line, when there is nothing to apply or a job runs.
bool apply_tune(AppState& s);

}  // namespace lathe::views
