// tune_measure.h — the tuner's link to the backends: measuring candidate schedules of a
// kernel on a compiled program, and compiling a program with tuning records applied.
//
// BackendMeasurer compiles the heuristic program once and runs it on seeded inputs. For a
// batch of candidates of kernel k it compiles them together as one small program (one
// compiler call, one kernel-cache entry), then runs the whole program once with a launcher
// that, at kernel k, times every candidate and the heuristic's kernel on the same buffers
// (the real intermediates, so indices and masks are the model's): a warm-up, then
// `repeats` rounds over the candidates in turn (each sample long enough to time, ≥ ~0.2 ms),
// and per candidate the median of the samples left after dropping outliers (beyond 3 median
// absolute deviations); candidates clearly slower are cut short (core/tune/sampler.h).
// Each candidate's output is compared with the heuristic's; one that differs is rejected.
// CPU backends only (c, llvm): a device backend's launches are queued.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/tune/records.h"
#include "core/tune/sampler.h"
#include "core/tune/search.h"

namespace lathe {

class BackendMeasurer : public tune::Measurer {
 public:
  BackendMeasurer(const Program& p, const std::string& backend, TensorMap inputs, int repeats = 7);
  std::vector<double> measure(int kernel, const std::vector<const loop::LoopFunc*>& candidates, double* baseline_ms) override;
  // Times the candidate and the heuristic's kernel as measure() does (back to back on the
  // program's buffers, warm-up, rotating rounds, outliers dropped), with kConfirmRepeats
  // rounds of samples of at least kConfirmSampleMs: the kernel's own time, not a lone
  // launch's inside a whole run (that added the launch's fixed costs to both sides).
  std::vector<tune::Timing> confirm(int kernel, const tune::Candidate& c) override;
  static constexpr int kConfirmRepeats = 15;
  static constexpr double kConfirmSampleMs = 2.0;
  int confirm_runs = 0;     // whole program runs the last confirm() made (for tests)
  int confirm_samples = 0;  // samples of each side it took
  int confirm_inner = 0;    // back-to-back launches per sample
  // Candidates with their schedules: a GEMM candidate whose blocks differ from the build's
  // reads the weights packed in its own layout (loop::repack_for), as its record's program would.
  std::vector<tune::Timing> measure_each(int kernel, const std::vector<tune::Candidate>& candidates) override;
  int repacked = 0;         // candidates of the last batch given weights packed for their blocks
  // Compile time per candidate (seconds; 0: unbounded): each candidate of a batch is then
  // compiled on its own in a child process, killed when it takes longer (the candidate fails,
  // and is not measured); what compiled is loaded here from the kernel cache. Off by default
  // in the class; `lathe tune --compile-limit` sets it (default 20 s).
  double compile_limit_s = 0;
  int compile_killed = 0;   // candidates of the last batch whose compile was cut
  double compile_s = 0;     // the last batch's compile time
  int cut = 0;              // candidates of the last batch cut short as clearly slower (best_ratio)
  std::vector<int> samples_each;  // samples each candidate of the last batch got
  // Tests: a scripted clock (core/tune/sampler.h) read instead of the steady clock; the
  // kernels still run (outputs are checked), each launch advancing it by its scripted time.
  tune::ScriptedClock* scripted = nullptr;
  // Each kernel's median time over 5 runs of the heuristic program (after one warm-up).
  std::vector<double> kernel_ms() override;
  // The end-to-end check of a tuning run's records: the program with them applied (as
  // compile_tuned builds it) and the heuristic program, whole runs alternated in pairs on the
  // same inputs (one untimed run of each first), up to `pairs` pairs or `max_s` seconds (at
  // least 3 pairs). ratio: the median over pairs of tuned / heuristic (drift between pairs
  // cancels); the medians of each side's runs beside it. applied = 0: no record applies.
  struct ProgramCheck {
    int applied = 0, pairs = 0;
    double heuristic_ms = -1, tuned_ms = -1, ratio = -1;
  };
  ProgramCheck check_program(const std::vector<tune::Record>& records, const std::string& target, int pairs = 30,
                             double max_s = 10);
  // Throws the UserError the constructor would for a backend it cannot measure on (interp,
  // cuda, one not available here), before anything is compiled.
  static void check_backend(const std::string& backend);
  // the robust median used above (exposed for tests)
  static double robust_median(std::vector<double> samples);

 private:
  Backend& backend_;
  std::string name_;
  std::unique_ptr<Executable> exe_;
  std::shared_ptr<CompiledProgram> base_;
  TensorMap inputs_;
  int repeats_;
  struct Batch {
    std::vector<double> ms;  // per candidate, < 0: wrong output
    double baseline_ms = -1;
    int samples = 0, inner = 0;
  };
  Batch run_batch(int kernel, const std::vector<tune::Candidate>& candidates, int repeats, double sample_ms,
                  bool cut_slow = true);
};

// build_program + tuning records + compile: compile_graph with `records` applied for
// `backend`'s target. Notes (records ignored, and why) go to *notes.
Executable compile_tuned(const Graph& g, const std::string& backend, const std::vector<tune::Record>& records,
                         std::vector<std::string>* notes, int* applied = nullptr);

}  // namespace lathe
