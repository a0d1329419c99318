// search.h — the search: for each distinct kernel of a program (kernels with the same
// structural hash are tuned once), points of its Space are built, ranked by the CostModel
// and the promising ones measured in batches (beam search: each round mutates the best
// measured so far and draws fresh points; the model, refitted after every batch, picks
// which to measure). Candidates rank by their time over the heuristic's measured in the
// same rounds (so a load change between batches does not pick a winner); the winner is
// measured again beside the heuristic and the record keeps the less favourable pair. With no Measurer (`--measure model`) the model's estimate is the time, and the
// search is a fixed-seed random sample plus hill climbing: deterministic.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/schedule/program.h"
#include "core/tune/records.h"
#include "core/tune/space.h"

namespace lathe::tune {

// Measures candidate schedules of one kernel on the target (backends/tune_measure.h).
class Measurer {
 public:
  virtual ~Measurer() = default;
  // Median ms of each candidate (replacing kernel `kernel`) and, in *baseline_ms, of the
  // heuristic's kernel measured in the same run. A candidate that fails to compile: < 0.
  virtual std::vector<double> measure(int kernel, const std::vector<const loop::LoopFunc*>& candidates,
                                      double* baseline_ms) = 0;
};

struct Progress {
  int index = 0, count = 0;   // distinct kernel being tuned, of how many
  std::string kernel;         // its name
  int trials = 0, max_trials = 0;
  double best_ms = -1, baseline_ms = -1;
  double time_left_s = -1;    // < 0: no budget
  bool done = false;          // the kernel's last report
};

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
};

struct TuneResult {
  std::vector<Record> records;
  bool interrupted = false;
  std::vector<std::string> notes;  // kernels skipped, and why
};

// m = nullptr: --measure model.
TuneResult tune_program(const Program& p, const Bindings& dims, const std::string& target, Measurer* m,
                        const TuneOptions& o);

}  // namespace lathe::tune
