// tune_mpi.h — `mpirun -n N lathe tune …` (or `srun`): the tuning search spread over MPI
// ranks. Rank 0 runs the search (core/tune/search.h) and writes the records; the other
// ranks load the same graph, and answer rank 0's jobs: a job is a few candidates of one
// kernel as schedule lines, which the rank replays on its own copy of the program,
// measures on its backend (or estimates, --measure model) beside the heuristic, and sends
// back as (ms, baseline ms) pairs. MPI stays here, out of core/: rank 0 sees the ranks as
// one tune::Measurer (a measure pool), the others run mpi_worker().
//
// Rank 0 hands out jobs as ranks fall idle and collects results as they finish (MPI_Iprobe:
// it never blocks on one rank). A job not answered within `rank_timeout_s` per candidate
// marks its rank lost and goes to another rank, or is measured by rank 0 itself when none
// is left: a rank that dies or hangs loses only its candidates, and the search finishes.
// (Open MPI ends the whole job when a rank dies unless mpirun is given --enable-recovery;
// the records of the kernels finished so far are written as each finishes, so they stay.)
// A worker ends itself when one job runs far past its deadline (a hung compile or kernel).
//
// Built without MPI (no libopenmpi-dev), lathe tune runs as one process; started by mpirun
// anyway, the ranks other than 0 say so and exit.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/schedule/program.h"
#include "core/tune/search.h"

namespace lathe::app {

struct MpiWorld {
  int rank = 0, size = 1;
  bool active = false;  // MPI was started (launched by mpirun/srun, built with MPI)
};

// Starts MPI when this process was launched by an MPI launcher and lathe was built with
// MPI; else {0, 1, false}. `launcher_rank` gets the rank the launcher's environment names
// (-1 when not launched by one), so a build without MPI can tell the other ranks to leave.
MpiWorld mpi_start(int* launcher_rank);
// MPI_Finalize (when started); bounded: a rank that never finalizes (hung) cannot keep
// rank 0 from exiting once its records are written.
void mpi_finish(const MpiWorld& w, int exit_code);
bool mpi_built();

struct PoolOptions {
  double rank_timeout_s = 60;   // per candidate, before its rank is given up on
  tune::Machine machine;        // rank 0's (the --measure model estimates use it everywhere)
};

// Rank 0: the other ranks as a tune::Measurer of `kind` ("time" | "model"). `local` makes
// rank 0's own measurer, called only when no rank is left to measure. Notes (ranks lost,
// ranks that could not start) go to *notes; the summary per rank to summary().
class MeasurePool : public tune::Measurer {
 public:
  virtual std::string summary() const = 0;
  // tells every rank to stop (after the search)
  virtual void stop_workers() = 0;
};
std::unique_ptr<MeasurePool> make_mpi_pool(const MpiWorld& w, const Program& p, const std::string& kind,
                                           std::function<std::unique_ptr<tune::Measurer>()> local,
                                           const PoolOptions& o, std::vector<std::string>* notes);

// The other ranks: `make` builds this rank's measurer (a UserError is sent to rank 0 as
// the reason this rank cannot measure); answers jobs until rank 0 says stop. Returns the
// process's exit code.
int mpi_worker(const MpiWorld& w, const Program& p, const Bindings& dims, const std::string& kind,
               const std::function<std::unique_ptr<tune::Measurer>()>& make, double rank_timeout_s);

// A fingerprint of p's kernels (their structural hashes): the ranks check they tune the same program.
std::string program_fingerprint(const Program& p);

}  // namespace lathe::app
