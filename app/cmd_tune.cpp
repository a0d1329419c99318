// cmd_tune.cpp — `lathe tune FILE`: searches schedules for a graph's kernels on a backend
// and writes tuning records (core/tune/, backends/tune_measure.h).
//
//   lathe tune FILE|--sample NAME [--backend B] [--records R.jsonl] [--trials N] [--time-budget S]
//              [--measure time|model] [--kernels k3,k7] [--bind SYM=N]… [--seed N]
//
// Progress goes to stderr, one line per measured batch (rewritten in place on a terminal):
// kernel i/n, trials, best so far, the heuristic's time, time left. Ctrl-C stops the search
// after the batch in flight; the records found so far are written.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "app/cli.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "backends/tune_measure.h"
#include "core/frontend/samples.h"
#include "core/ir/diag.h"
#include "core/ir/loader.h"
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

std::string fmt_ms(double ms) {
  if (ms < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, ms < 1 ? "%.4f ms" : "%.3f ms", ms);
  return b;
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

int run_tune(const std::vector<std::string>& args) {
  CLI::App cli{"Searches schedules for a graph's kernels and writes tuning records.\n\n"
               "Each kernel's space is written in Lathe's schedule primitives (reduce_rows, fuse, tile,\n"
               "parallel, vectorize, split, unroll; a matmul's packed-GEMM block sizes MR NR KC MC NC, or\n"
               "its plain reduction scheduled like any other). A cost model ranks candidates so only\n"
               "promising ones are compiled and measured (warm-up, repeats, median without outliers);\n"
               "kernels with the same structure are tuned once. Records are JSON lines (hash, target,\n"
               "schedule, ms, baseline_ms, trials); `lathe run/kernels/bench --tuned R.jsonl` and\n"
               "lathe.compile(g, {tuned = R}) apply them, and the default file (--records) is applied\n"
               "when no --tuned is given. A record applies only on the same kernel and target, and only\n"
               "when it beat the heuristic. Ctrl-C stops and keeps what was found.",
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
  cli.add_option("--time-budget", budget, "seconds for the whole run, shared over the kernels (default: none)")
      ->check(CLI::PositiveNumber);
  cli.add_option("--measure", measure, "time: run candidates on the backend; model: rank by the cost model alone (deterministic)")
      ->check(CLI::IsMember({"time", "model"}));
  cli.add_option("--kernels", kernels, "only these kernels, by name or number (k3,k7 or 3,7)");
  cli.add_option("--bind", bind_args, "SYM=N: a symbolic dim's value (repeatable)");
  cli.add_option("--seed", seed, "seed of the search and the random inputs (default 1)");
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
  Graph g = sample.empty() ? load_graph(file) : build_sample(sample);
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
                       std::to_string(pr.trials) + "/" + std::to_string(pr.max_trials) + "  best " + fmt_ms(pr.best_ms) +
                       "  heuristic " + fmt_ms(pr.baseline_ms);
    if (pr.time_left_s >= 0) line += "  time left " + std::to_string((int)pr.time_left_s) + " s";
    if (tty) std::cerr << "\r\033[K" << line << (pr.done ? "\n" : "") << std::flush;
    else if (pr.done || measure == "time") std::cerr << line << "\n";
  };
  Bindings dims = binds;
  TensorMap inputs = random_inputs(g, static_cast<uint64_t>(seed), binds);
  std::unique_ptr<BackendMeasurer> m;
  if (measure == "time") m = std::make_unique<BackendMeasurer>(p, backend, inputs);
  g_stop = false;
  auto old = std::signal(SIGINT, on_sigint);
  tune::TuneResult r = tune::tune_program(p, dims, tune::target_of(backend), m.get(), o);
  std::signal(SIGINT, old);
  for (auto& n : r.notes) std::cerr << "note: " << n << "\n";
  std::string path = records.empty() ? tune::default_records_path() : records;
  if (!r.records.empty()) tune::merge_records(path, r.records);
  int better = 0;
  for (auto& rec : r.records) better += rec.ms < rec.baseline_ms * tune::kApplyMargin;
  std::cout << (r.interrupted ? "interrupted: " : "") << r.records.size() << " kernel" << (r.records.size() == 1 ? "" : "s")
            << " tuned, " << better << " faster than the heuristic (applied); records in " << path << "\n";
  for (auto& rec : r.records) {
    std::cout << "  " << rec.kernel << " (" << rec.kind << "): " << fmt_ms(rec.ms) << " vs heuristic " << fmt_ms(rec.baseline_ms);
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
