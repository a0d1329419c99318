// search.h — the search: for each distinct kernel of a program (kernels with the same
// structural hash are tuned once), points of its Space are built, ranked by the CostModel
// and the promising ones measured in batches (beam search: each round mutates the best
// measured so far and draws fresh points; the model, refitted after every batch, picks
// which to measure). Candidates rank by their time over the heuristic's measured in the
// same rounds (so a load change between batches does not pick a winner); the winner is
// measured again beside the heuristic and the record keeps the less favourable pair.
// With --measure model the model's estimate is the time, and the search is a fixed-seed
// random sample plus hill climbing in rounds (each round: 8 mutations of the best so far),
// every sample and round estimated as one batch by the Measurer: deterministic, and the
// same records however many processes share the batches.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/schedule/program.h"
#include "core/tune/records.h"
#include "core/tune/space.h"

namespace lathe::tune {

// A candidate handed to a Measurer: its loop IR and the schedule lines that rebuild it
// from the kernel's plain lowering (replay(kg, kernel, *schedule) == *f), so a measurer in
// another process (app/tune_mpi.h) can rebuild it from text.
struct Candidate {
  const loop::LoopFunc* f = nullptr;
  const std::vector<std::string>* schedule = nullptr;
};
// One candidate's time and the heuristic's measured beside it (the same rounds, the same
// place). ms < 0: it failed to compile, to run, or to match the heuristic's output.
struct Timing {
  double ms = -1, baseline_ms = -1;
};

// Measures candidate schedules of one kernel on the target (backends/tune_measure.h).
class Measurer {
 public:
  virtual ~Measurer() = default;
  // Median ms of each candidate (replacing kernel `kernel`) and, in *baseline_ms, of the
  // heuristic's kernel measured in the same run. A candidate that fails to compile: < 0.
  virtual std::vector<double> measure(int kernel, const std::vector<const loop::LoopFunc*>& candidates,
                                      double* baseline_ms) = 0;
  // What the search calls: each candidate's time with its own baseline, so a pool that
  // measures parts of a batch in different processes or machines (app/tune_mpi.h) reports
  // each part beside its own heuristic run. Default: measure() over the whole batch.
  virtual std::vector<Timing> measure_each(int kernel, const std::vector<Candidate>& candidates);
  // The winner's confirmation (its time and the heuristic's beside it). Default:
  // measure_each; a BackendMeasurer times both back to back for longer (more rounds, longer
  // samples: the kernel's own time, as the search measured it).
  virtual std::vector<Timing> confirm(int kernel, const Candidate& c) { return measure_each(kernel, {c}); }
  // "time", or "model" when the times are the cost model's estimates (--measure model).
  virtual std::string kind() const { return "time"; }
  // The heuristic program's time per run in each kernel (ms, one per kernel of the program):
  // the search tunes the kernels that take most of a run first and shares a time budget by
  // that share (a kernel that repeats counts every time it runs). Empty (the default):
  // unknown, the program's order and equal shares.
  virtual std::vector<double> kernel_ms() { return {}; }
  // Set by the search before each batch: the best candidate's time over the heuristic's it
  // has measured for this kernel so far (<= 0: none yet). A measurer may stop sampling a
  // candidate that is clearly slower than the faster of that and the heuristic (the
  // BackendMeasurer: its first samples over 2x), so a slow candidate does not eat the budget.
  double best_ratio = 0;
};

// --measure model as a Measurer: each candidate's analytic estimate (model.h) on `machine`,
// the heuristic's estimate as the baseline. Deterministic; what the search uses when it is
// given no Measurer, and what the other ranks of `mpirun … lathe tune --measure model` run.
class ModelMeasurer : public Measurer {
 public:
  ModelMeasurer(const Program& p, const Bindings& dims, const Machine& m) : p_(p), dims_(dims), m_(m) {}
  std::vector<double> measure(int kernel, const std::vector<const loop::LoopFunc*>& candidates,
                              double* baseline_ms) override;
  // with their schedules: a GEMM candidate with other blocks is estimated reading the
  // weights packed in its layout, as its record's program runs it (loop::repack_for)
  std::vector<Timing> measure_each(int kernel, const std::vector<Candidate>& candidates) override;
  std::string kind() const override { return "model"; }

 private:
  const Program& p_;
  Bindings dims_;
  Machine m_;
};

struct Progress {
  int index = 0, count = 0;   // distinct kernel being tuned, of how many
  std::string kernel;         // its name
  int trials = 0, max_trials = 0;
  double best_ms = -1, baseline_ms = -1;
  double time_left_s = -1;    // < 0: no budget
  bool done = false;          // the kernel's last report
};

// One candidate's outcome, as the search records it (for a live plot of time against trials).
struct Trial {
  int kernel = -1;            // the kernel's index in the program
  int trial = 0;              // 1, 2, … within this kernel's search
  double ms = -1;             // its time (the model's estimate with --measure model); < 0: failed
  double baseline_ms = -1;    // the heuristic's, measured beside it (its estimate with --measure model)
};

// A measured search never compiles or measures a candidate whose analytic estimate is
// over this many times the heuristic's (the model-only search is unaffected).
inline constexpr double kFarFromHeuristic = 8;

struct TuneOptions {
  int trials = 64;            // measured candidates per kernel (model-ranked points with no Measurer)
  double budget_s = 0;        // whole run; 0 = none
  int batch = 6;              // candidates compiled and measured together
  uint64_t seed = 1;
  std::vector<int> only;      // kernel indices; empty = all
  std::string graph;          // the file's base name, for the records
  Machine machine = host_machine();
  std::function<void(const Progress&)> progress;
  const std::atomic<bool>* stop = nullptr;  // set (Ctrl-C): finish with what was found
  // called with each kernel's record as soon as it is final (so a caller can write it
  // before the next kernel: a run that is killed keeps what it had found)
  std::function<void(const Record&)> on_record;
  // called on the searching thread with each candidate measured (or estimated), in order
  std::function<void(const Trial&)> on_trial;
};

struct TuneResult {
  std::vector<Record> records;
  bool interrupted = false;
  std::vector<std::string> notes;  // kernels skipped, and why
};

// m = nullptr: --measure model, measured here (a ModelMeasurer); a Measurer whose kind()
// is "model" runs the same search (the same records) with its estimates.
TuneResult tune_program(const Program& p, const Bindings& dims, const std::string& target, Measurer* m,
                        const TuneOptions& o);

}  // namespace lathe::tune
