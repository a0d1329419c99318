// cmd_tune.cpp — `lathe tune FILE`: searches schedules for a graph's kernels on a backend
// and writes tuning records (core/tune/, backends/tune_measure.h).
//
//   lathe tune FILE|--sample NAME [--backend B] [--records R.jsonl] [--trials N] [--time-budget S]
//              [--measure time|model] [--kernels k3,k7] [--bind SYM=N]… [--seed N]
//
// Progress goes to stderr, one line per measured batch (rewritten in place on a terminal):
// kernel i/n, trials, best so far, the heuristic's time, time left. Ctrl-C stops the search
// after the batch in flight; the records found so far are written (each kernel's record
// is written as soon as it is final, so a run that is killed keeps what it had found).
//
// Under mpirun/srun (app/tune_mpi.h) rank 0 runs the search and writes the records, and the
// other ranks measure the candidates it sends them.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "app/load_model.h"
#include "app/tune_mpi.h"
#include "backends/backend.h"
#include "backends/tune_measure.h"
#include "core/frontend/samples.h"
#include "core/ir/diag.h"
#include "core/runtime/random.h"
#include "core/tune/records.h"
#include "core/tune/search.h"

namespace lathe::app {
namespace {

std::atomic<bool> g_stop{false};
void on_sigint(int) {
  g_stop = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

// "k3_sum,7" -> kernel indices (by name, or the number N of kN_…, or the index)
std::vector<int> parse_kernels(const std::string& list, const Program& p) {
  std::vector<int> r;
  std::stringstream ss(list);
  for (std::string w; std::getline(ss, w, ',');) {
    if (w.empty()) continue;
    int found = -1;
    for (int i = 0; i < p.num_kernels(); ++i) {
      const std::string& n = p.kg.kernels[i].name;
      if (n == w || n.rfind(w + "_", 0) == 0 || w == std::to_string(i)) found = i;
    }
    if (found < 0) {
      std::string names;
      for (auto& k : p.kg.kernels) names += (names.empty() ? "" : ", ") + k.name;
      throw UserError("--kernels: no kernel '" + w + "' (kernels: " + names + ")");
    }
    r.push_back(found);
  }
  return r;
}

int report(const tune::TuneResult& r, const std::string& path, bool model);

// The seconds of --time-budget kept for the end-to-end check: 5%, 3 to 30 s.
double check_reserve_s(double budget) { return std::clamp(0.05 * budget, 3.0, 30.0); }

// The end-to-end check: kernels measured faster alone can run slower inside the program
// (caches and threads shared with the kernels around them), so the program with this run's
// records (and the file's others) and the heuristic's are timed in alternating whole runs; unless the tuned one is
// faster by the pairs' median (ratio < kProgramMargin), this run's records are rewritten as
// not faster (ms = baseline_ms: they stay in the file, and the heuristic stays).
constexpr double kProgramMargin = 0.99;
void check_whole_program(BackendMeasurer& m, tune::TuneResult& r, const std::string& path, const std::string& backend,
                         double budget) {
  int faster = 0;
  for (auto& rec : r.records) faster += rec.ms < rec.baseline_ms * tune::kApplyMargin;
  if (!faster) return;
  // the program as `lathe run/bench --tuned path` (or, for the default file, with no
  // --tuned) will run it: this run's records with those the file already had for the
  // program's other kernels (tuned by earlier runs), so a new record that is faster alone
  // but slower beside the kept ones is caught; only this run's records are demoted
  std::vector<tune::Record> in_file;
  try {
    in_file = tune::load_tuned(path == tune::default_records_path() ? "" : path);
  } catch (const UserError&) {
  }
  std::vector<tune::Record> checked = tune::merged_records(in_file, r.records);
  double max_s = budget > 0 ? 0.6 * check_reserve_s(budget) : 10;
  BackendMeasurer::ProgramCheck c = m.check_program(checked, tune::target_of(backend), 30, max_s);
  if (!c.applied) return;
  char line[384];
  bool keep = c.ratio > 0 && c.ratio < kProgramMargin;
  std::snprintf(line, sizeof line,
                "whole program with the %d record%s applied (%d of this run): %s vs heuristic %s (median of %d "
                "alternating pairs, ratio %.3f)%s",
                c.applied, c.applied == 1 ? "" : "s", faster, tune::format_ms(c.tuned_ms).c_str(), tune::format_ms(c.heuristic_ms).c_str(),
                c.pairs, c.ratio, keep ? "" : ": not faster, so the records are kept as not faster (the heuristic stays)");
  r.notes.push_back(line);
  if (keep) return;
  std::vector<tune::Record> demoted;
  for (auto& rec : r.records)
    if (rec.ms < rec.baseline_ms * tune::kApplyMargin) {
      rec.ms = rec.baseline_ms;
      demoted.push_back(rec);
    }
  tune::merge_records(path, demoted);
}

int run_tune(const std::vector<std::string>& args) {
  CLI::App cli{"Searches schedules for a graph's kernels and writes tuning records.\n\n"
               "Each kernel's space is written in Lathe's schedule primitives (split_k, reduce_rows, fuse,\n"
               "tile, parallel, vectorize, split, unroll; a matmul's packed-GEMM block sizes MR NR KC MC NC\n"
               "and B packed or read in place, or its plain reduction scheduled like any other). A cost model ranks candidates so only\n"
               "promising ones are compiled and measured (warm-up, repeats, median without outliers);\n"
               "kernels with the same structure are tuned once. Records are JSON lines (hash, target,\n"
               "schedule, ms, baseline_ms, trials); `lathe run/kernels/bench --tuned R.jsonl` and\n"
               "lathe.compile(g, {tuned = R}) apply them, and the default file (--records) is applied\n"
               "when no --tuned is given. A record applies only on the same kernel and target, and only\n"
               "when it beat the heuristic. Records of --measure model are the cost model's predictions,\n"
               "not times: they apply only from a file named with --tuned FILE, never from the default file.\n"
               "After a measured search the program with the run's records (and the file's others for it)\n"
               "and the heuristic's are timed in alternating whole runs (5% of --time-budget, 3 to 30 s):\n"
               "unless the tuned program is faster,\n"
               "the run's records are written as not faster and the heuristic stays (--no-check skips this).\n"
               "Ctrl-C stops and keeps what was found.\n"
               "The same search runs in the desktop app's Tune tab (lathe gui), which plots each candidate's\n"
               "time against trials and shows the best schedule's loop IR beside the heuristic's.\n\n"
               "Over MPI (lathe built with libopenmpi-dev): `mpirun -n N lathe tune FILE …` (or srun)\n"
               "runs the search on rank 0, which writes the records, while the other ranks compile and\n"
               "measure its candidates (each beside its own heuristic run) and send the times back. A rank\n"
               "that does not answer within --rank-timeout seconds per candidate loses its candidates to\n"
               "another rank (or rank 0 measures them). Open MPI ends the whole job when a rank dies unless\n"
               "mpirun is given --enable-recovery; records of finished kernels are written as they finish.\n"
               "As root, Open MPI also wants --allow-run-as-root; more ranks than cores, --oversubscribe.\n"
               "Ranks that time kernels on one machine share its cores: use one rank per machine\n"
               "(--map-by ppr:1:node) for --measure time." +
                   std::string(mpi_built() ? "" : "\nThis lathe was built without MPI: it tunes as one process."),
               "lathe tune"};
  std::string file, sample, backend = default_backend(), records, measure = "time", kernels;
  int trials = 48;
  double budget = 0;
  int64_t seed = 1;
  std::vector<std::string> bind_args;
  auto* file_opt = cli.add_option("FILE", file, "graph (.lathe, .lua or .onnx)");
  auto* sample_opt = cli.add_option("--sample", sample, "a built-in sample or bench workload instead of FILE");
  file_opt->excludes(sample_opt);
  cli.add_option("--backend", backend, "c | llvm (default: " + default_backend() + ")");
  cli.add_option("--records", records, "records file to update (default: " + tune::default_records_path() + ")");
  cli.add_option("--trials", trials, "candidates measured per kernel (default 48)")->check(CLI::Range(1, 100000));
  cli.add_option("--time-budget", budget, "seconds for the whole run, shared over the kernels by their share of a run (the largest first); no batch starts that would end past it (default: none)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--measure", measure, "time: run candidates on the backend; model: rank by the cost model alone (deterministic)")
      ->check(CLI::IsMember({"time", "model"}));
  cli.add_option("--kernels", kernels, "only these kernels, by name or number (k3,k7 or 3,7)");
  cli.add_option("--bind", bind_args, "SYM=N: a symbolic dim's value (repeatable)");
  cli.add_option("--seed", seed, "seed of the search and the random inputs (default 1)");
  double compile_limit = 20;
  cli.add_option("--compile-limit", compile_limit,
                 "seconds one candidate may take to compile (each compiled in a child process, killed past it; "
                 "0: no limit, a batch compiled together in this process; default 20; none under mpirun)")
      ->check(CLI::NonNegativeNumber);
  bool no_check = false;
  cli.add_flag("--no-check", no_check,
               "skip the end-to-end check (whole runs of the program with the records against the heuristic's, which "
               "keeps the records as not faster unless the program is)");
  double rank_timeout = 60;
  cli.add_option("--rank-timeout", rank_timeout,
                 "under mpirun: seconds per candidate a rank may take before its candidates go elsewhere (default 60)")
      ->check(CLI::PositiveNumber);
  if (int rc = parse_cli(cli, args); rc >= 0) return rc;
  if (file.empty() && sample.empty()) {
    std::cerr << "lathe tune: give FILE or --sample NAME\n";
    return 2;
  }
  Bindings binds;
  for (auto& s : bind_args) {
    size_t eq = s.find('=');
    try {
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument("");
      binds[s.substr(0, eq)] = std::stoll(s.substr(eq + 1));
    } catch (const std::exception&) {
      std::cerr << "lathe tune: --bind expects SYM=N, got '" + s + "'\n";
      return 2;
    }
  }
  Backend& b = get_backend(backend);
  if (backend == "interp") throw UserError("lathe tune: the interp backend has no schedules to tune; use c or llvm");
  Graph g = sample.empty() ? load_model(file, backend) : build_sample(sample);  // as `lathe run` runs it
  if (auto why = b.supports_graph(g); !why.empty()) throw UserError("backend '" + backend + "' cannot run " + why);
  Program p = build_program(g);
  tune::TuneOptions o;
  o.trials = trials;
  o.budget_s = budget;
  o.seed = static_cast<uint64_t>(seed);
  o.graph = sample.empty() ? tune::graph_name(file) : "sample " + sample;
  if (!kernels.empty()) o.only = parse_kernels(kernels, p);
  o.stop = &g_stop;
  bool tty = isatty(2);
  o.progress = [&](const tune::Progress& pr) {
    std::string line = "[" + std::to_string(pr.index) + "/" + std::to_string(pr.count) + " " + pr.kernel + "] trials " +
                       std::to_string(pr.trials) + "/" + std::to_string(pr.max_trials) + "  best " + tune::format_ms(pr.best_ms) +
                       "  heuristic " + tune::format_ms(pr.baseline_ms);
    if (pr.time_left_s >= 0) line += "  time left " + std::to_string((int)pr.time_left_s) + " s";
    if (tty) std::cerr << "\r\033[K" << line << (pr.done ? "\n" : "") << std::flush;
    else if (pr.done || measure == "time") std::cerr << line << "\n";
  };
  Bindings dims = binds;
  TensorMap inputs = random_inputs(g, static_cast<uint64_t>(seed), binds);
  std::string path = records.empty() ? tune::default_records_path() : records;
  o.on_record = [&](const tune::Record& rec) { tune::merge_records(path, {rec}); };
  if (measure == "time") BackendMeasurer::check_backend(backend);  // every rank, before MPI starts
  int launcher_rank = -1;
  MpiWorld world = mpi_start(&launcher_rank);
  if (!world.active && launcher_rank > 0) {
    std::cerr << "lathe tune (rank " << launcher_rank << "): lathe was built without MPI, so only rank 0 tunes\n";
    return 0;
  }
  auto backend_measurer = [&]() -> std::unique_ptr<tune::Measurer> {
    auto bm = std::make_unique<BackendMeasurer>(p, backend, inputs);
    // (not under MPI: Open MPI's transports may not survive a fork of the rank)
    bm->compile_limit_s = world.size > 1 ? 0 : compile_limit;
    return bm;
  };
  int rc = 0;
  std::unique_ptr<MeasurePool> pool;
  try {
    if (world.rank > 0) {
      rc = mpi_worker(world, p, dims, measure, backend_measurer, rank_timeout);
      mpi_finish(world, rc);
      return rc;
    }
    std::unique_ptr<tune::Measurer> m;
    std::vector<std::string> pool_notes;
    if (world.size > 1) {
      PoolOptions po;
      po.rank_timeout_s = rank_timeout;
      po.machine = o.machine;
      auto local = [&]() -> std::unique_ptr<tune::Measurer> {
        if (measure == "time") return backend_measurer();
        return std::make_unique<tune::ModelMeasurer>(p, dims, o.machine);
      };
      pool = make_mpi_pool(world, p, measure, local, po, &pool_notes);
      if (measure == "time") o.batch = std::max(o.batch, 2 * (world.size - 1));  // every rank gets a share
      std::cerr << "lathe tune: rank 0 searches, " << world.size - 1 << " rank" << (world.size == 2 ? "" : "s")
                << " measure\n";
      if (std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("OMPI_MCA_orte_enable_recovery"))
        std::cerr << "note: without mpirun --enable-recovery, Open MPI ends the whole job when a rank dies "
                     "(records of finished kernels are kept)\n";
    } else if (measure == "time") {
      m = backend_measurer();
    }
    g_stop = false;
    auto old = std::signal(SIGINT, on_sigint);
    // the end-to-end check's share of the budget (it runs after the search: see below)
    const bool check = measure == "time" && !pool && !no_check;
    if (check && o.budget_s > 0) o.budget_s -= check_reserve_s(o.budget_s);
    tune::TuneResult r = tune::tune_program(p, dims, tune::target_of(backend), pool ? pool.get() : m.get(), o);
    if (check && !g_stop) check_whole_program(*static_cast<BackendMeasurer*>(m.get()), r, path, backend, budget);
    std::signal(SIGINT, old);
    if (pool) {
      pool->stop_workers();
      std::cerr << "ranks:\n" << pool->summary();
      for (auto& n : pool_notes) std::cerr << "note: " << n << "\n";
      pool.reset();
    }
    rc = report(r, path, measure == "model");
  } catch (...) {
    if (pool) pool->stop_workers();  // else they wait for jobs, and MPI_Finalize for them
    pool.reset();
    mpi_finish(world, 1);
    throw;
  }
  mpi_finish(world, rc);
  return rc;
}

int report(const tune::TuneResult& r, const std::string& path, bool model) {
  for (auto& n : r.notes) std::cerr << "note: " << n << "\n";
  int better = 0;
  for (auto& rec : r.records) better += rec.ms < rec.baseline_ms * tune::kApplyMargin;
  std::cout << (r.interrupted ? "interrupted: " : "") << r.records.size() << " kernel" << (r.records.size() == 1 ? "" : "s")
            << " tuned, " << better
            << (model ? " predicted faster than the heuristic by the cost model (applied only with --tuned " + path + ")"
                      : " faster than the heuristic (applied)")
            << "; records in " << path << "\n";
  for (auto& rec : r.records) {
    std::cout << "  " << rec.kernel << " (" << rec.kind << "): " << tune::format_ms(rec.ms) << " vs heuristic " << tune::format_ms(rec.baseline_ms);
    if (rec.ms > 0 && rec.baseline_ms > 0) {
      char x[32];
      std::snprintf(x, sizeof x, "  %.2fx", rec.baseline_ms / rec.ms);
      std::cout << x;
    }
    std::cout << (rec.measure == "model" ? "  (model)" : "")
              << (rec.ms < rec.baseline_ms * tune::kApplyMargin ? "" : "  (not faster: the heuristic stays)") << "\n";
    for (auto& l : rec.schedule) std::cout << "      " << l << "\n";
  }
  return r.interrupted ? 130 : 0;
}

LATHE_COMMAND("tune", "search schedules for a graph's kernels on a backend; write tuning records (JSON lines)", run_tune);

}  // namespace
}  // namespace lathe::app
